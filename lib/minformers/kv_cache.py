"""The key/value cache of a decoder: every layer's keys and values for the tokens
already processed, so that generating one more token costs one token's work instead of
re-reading the whole prefix.

A decoder's forward pass takes an optional cache. It reads ``cache.length`` (tokens
already cached) once, before its first layer, to place the new tokens' positions and
causal mask; each attention layer then calls ``cache.update(layer, k, v)`` with the new
tokens' keys and values and attends over what it returns.

    >>> cache = KVCache(n_layers=2)
    >>> k = v = torch.zeros(1, 4, 3, 8)  # (B, H_kv, T_new, D): a 3-token prompt
    >>> keys, values = cache.update(0, k, v)
    >>> # length counts layer 0, so read it before layer 0 is updated
    >>> keys.shape, cache.length
    (torch.Size([1, 4, 3, 8]), 3)
    >>> # then one token at a time
    >>> keys, values = cache.update(0, k[:, :, :1], v[:, :, :1])
    >>> keys.shape
    torch.Size([1, 4, 4, 8])
"""

import torch

from minformers.support.arguments import require_size


class KVCache:
    """Per layer, the keys and values so far: two tensors (B, H_kv, T, D), grown along
    T by concatenation."""

    def __init__(self, n_layers: int):
        self.n_layers = require_size("n_layers", n_layers)
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers

    @property
    def length(self) -> int:
        """Tokens cached so far, as layer 0 sees them."""
        return 0 if self.keys[0] is None else self.keys[0].shape[2]

    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' k, v (B, H_kv, T_new, D) to ``layer``'s cache; return
        all of it, (B, H_kv, T, D)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in [0, {self.n_layers}), got {layer}")
        if k.dim() != 4 or k.shape != v.shape:
            raise ValueError(
                f"k and v must both be (B, H_kv, T_new, D), got {tuple(k.shape)} and "
                f"{tuple(v.shape)}"
            )
        if self.keys[layer] is not None:
            cached = self.keys[layer]
            if cached.shape[:2] != k.shape[:2] or cached.shape[3] != k.shape[3]:
                raise ValueError(
                    f"new keys {tuple(k.shape)} do not fit the cached "
                    f"{tuple(cached.shape)} of layer {layer}: B, H_kv and D must stay "
                    "the same"
                )
            k = torch.cat([cached, k], dim=2)  # (B, H_kv, T_old + T_new, D)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep only the cached sequences at ``rows`` (B_new,) of the batch, in that
        order, repeats allowed: beam search calls it when the surviving hypotheses
        descend from other beams than they did a step ago."""
        for layer in range(self.n_layers):
            if self.keys[layer] is not None:
                # (B, H_kv, T, D) -> (B_new, ...)
                self.keys[layer] = self.keys[layer].index_select(0, rows)
                self.values[layer] = self.values[layer].index_select(0, rows)

    def crop(self, length: int) -> None:
        """Forget every token after the first ``length``: speculative decoding calls it
        when the target rejects drafted tokens that it has already cached.

        >>> cache = KVCache(n_layers=1)
        >>> _ = cache.update(0, torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))
        >>> cache.crop(3)
        >>> cache.length
        3
        """
        if not 0 <= length <= self.length:
            raise ValueError(f"length must be in [0, {self.length}], got {length}")
        for layer in range(self.n_layers):
            if self.keys[layer] is not None:
                # (B, H_kv, T, D) -> (B, H_kv, length, D)
                self.keys[layer] = self.keys[layer][:, :, :length]
                self.values[layer] = self.values[layer][:, :, :length]
