"""Scaled dot-product attention and multi-head attention, written out step by step.

Shape legend, used in every comment below: B batch, T time (T_q queries, T_k keys),
C channels = d_model, H heads, D head dim = C / H.

Masks are bool, ``True`` = may attend (see ``minformers.masks``), broadcastable to
(B, H, T_q, T_k).
"""

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from minformers.masks import causal_mask, combine_masks
from minformers.support.arguments import require_heads, require_size


def scaled_dot_product_attention(
    q, k, v, mask=None, dropout_p=0.0, training=False, return_weights=False
):
    """softmax(q k^T / sqrt(D)) v, with masked scores set to -inf before the softmax.

    q: (..., T_q, D), k: (..., T_k, D), v: (..., T_k, D_v), mask: bool, broadcastable
    to (..., T_q, T_k). Returns the output (..., T_q, D_v), and also the weights
    (..., T_q, T_k) if ``return_weights`` (after dropout: the ones actually used).
    A query that may attend no key gets zero weights and a zero output.

    Example: one query, two keys, equal scores -> the output is the mean of the values.
    >>> q, k = torch.zeros(1, 2), torch.ones(2, 2)
    >>> v = torch.tensor([[0.0, 2.0], [4.0, 6.0]])
    >>> scaled_dot_product_attention(q, k, v)
    tensor([[2., 4.]])
    """
    # Dividing by sqrt(D) keeps the scores' variance near 1 whatever D is, so the
    # softmax does not saturate.
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # A row of only -inf comes out of the softmax as NaN. Such a query has nothing
        # to read, so its weights, and so its output, are defined as zero.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    weights = F.dropout(weights, p=dropout_p, training=training)
    output = weights @ v  # (..., T_q, T_k) @ (..., T_k, D_v) -> (..., T_q, D_v)
    return (output, weights) if return_weights else output


class MultiHeadAttention(nn.Module):
    """H attention heads in parallel, each on its own D = C / H slice of learned
    projections.

    The attention itself runs in PyTorch's fused kernel
    (``torch.nn.functional.scaled_dot_product_attention``) unless the weights are asked
    for: same result, without materialising the (T_q, T_k) weights, and given
    ``causal=True`` it also skips the scores above the diagonal. ``fused=False`` always
    takes the written-out function above, the one the attention chapter teaches; it is a
    plain attribute, so it can be flipped on a built model. Parameters match
    ``torch.nn.MultiheadAttention`` once its ``in_proj_weight`` is split into the q, k,
    v rows.

    >>> attention = MultiHeadAttention(d_model=8, n_heads=2)
    >>> attention(torch.randn(3, 5, 8)).shape  # (B, T, C) -> (B, T, C)
    torch.Size([3, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        fused: bool = True,
    ):
        super().__init__()
        require_size("d_model", d_model)
        require_size("n_heads", n_heads)
        require_heads(d_model, n_heads)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.d_model, self.n_heads, self.head_dim = d_model, n_heads, d_model // n_heads
        self.dropout, self.fused = dropout, fused
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _require_inputs(self, query, key, value) -> None:
        for name, x in (("query", query), ("key", key), ("value", value)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(
                    f"{name} must have shape (B, T, {self.d_model}) (d_model), got "
                    f"{tuple(x.shape)}"
                )
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(
                "query, key, value must share B, and key, value T_k: got "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
            )

    @staticmethod
    def _require_mask(mask, scores_shape) -> None:
        """Reject a float mask, which torch's fused kernel would add to the scores as
        a bias, and a mask that does not broadcast to the scores (B, H, T_q, T_k)."""
        if mask is None:
            return
        if mask.dtype != torch.bool:
            raise TypeError(
                f"mask must be a bool tensor (True = may attend), got {mask.dtype}"
            )
        # broadcasts without growing the scores: each trailing size is 1 or the scores'
        pairs = zip(mask.shape[::-1], scores_shape[::-1], strict=False)
        if mask.dim() > len(scores_shape) or any(m not in (1, s) for m, s in pairs):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores "
                f"{tuple(scores_shape)}"
            )

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        x = x.view(B, T, self.n_heads, self.head_dim)  # (B, T, C) -> (B, T, H, D)
        return x.transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D)

    def forward(
        self,
        query,
        key=None,
        value=None,
        mask=None,
        causal=False,
        return_weights=False,
        cache=None,
        cache_layer=0,
    ):
        """query: (B, T_q, C); key, value: (B, T_k, C). Returns (B, T_q, C) [, weights
        (B, H, T_q, T_k)].

        Self-attention when ``key`` is None; ``value`` defaults to ``key``
        (cross-attention reads one memory for both). ``mask`` is bool, broadcastable to
        (B, H, T_q, T_k). ``causal=True`` adds the causal mask (the queries are the last
        T_q of the T_k positions, as in ``masks.causal_mask``). With a ``cache``
        (``minformers.kv_cache.KVCache``), the new keys and values are appended to layer
        ``cache_layer``'s and the queries attend over all of them; ``mask`` must then
        cover every cached key.
        """
        key = query if key is None else key
        value = key if value is None else value
        self._require_inputs(query, key, value)
        # (B, T_q, C) -> (B, H, T_q, D); (B, T_k, C) -> (B, H, T_k, D) twice
        q, k, v = map(self._split_heads, self._project(query, key, value))
        if cache is not None:  # decoding (the KV cache): earlier keys, then these
            k, v = cache.update(cache_layer, k, v)
        self._require_mask(mask, (*q.shape[:-1], k.shape[-2]))  # (B, H, T_q, T_k)
        output, weights = self._attend(q, k, v, mask, causal, return_weights)
        B, _, T_q, _ = output.shape
        # (B, H, T_q, D) -> (B, T_q, H, D) -> (B, T_q, C): the heads side by side
        output = output.transpose(1, 2).reshape(B, T_q, self.d_model)
        output = self.out_proj(output)
        return (output, weights) if return_weights else output

    def _project(self, query, key, value):
        """``q_proj(query)``, ``k_proj(key)``, ``v_proj(value)``, each called as a
        module, in self-attention too: whatever wraps or hooks a projection (a LoRA
        layer, a hook that quantizes its input) sees its input, which it would not if
        the stacked weights were multiplied in one product.

        >>> attention = MultiHeadAttention(d_model=4, n_heads=2)
        >>> seen = []
        >>> hook = attention.k_proj.register_forward_hook(lambda *_: seen.append("k"))
        >>> _ = attention(torch.randn(1, 3, 4))
        >>> seen
        ['k']
        """
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def _attend(self, q, k, v, mask, causal: bool, return_weights: bool):
        """Every head's attention at once: (output (B, H, T_q, D), weights or None).
        PyTorch's fused kernel unless the weights are asked for or ``fused`` is off; the
        written-out ``scaled_dot_product_attention`` otherwise. Both give the same
        output."""
        T_q, T_k = q.shape[-2], k.shape[-2]
        # torch's is_causal aligns the queries with the first keys, not the last: only a
        # square causal mask with nothing else to combine is passed as the flag; any
        # other is built out.
        causal_flag = causal and mask is None and T_q == T_k
        if causal and not causal_flag:
            mask = combine_masks(mask, causal_mask(T_q, T_k, device=q.device))
        dropout_p = self.dropout if self.training else 0.0
        if self.fused and not return_weights:
            output = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal_flag
            )
            return output, None
        if causal_flag:
            mask = causal_mask(T_q, T_k, device=q.device)
        return scaled_dot_product_attention(
            q,
            k,
            v,
            mask=mask,
            dropout_p=dropout_p,
            training=self.training,
            return_weights=True,
        )


@contextmanager
def recorded_attention(model: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the ``with`` block, each call of a ``MultiHeadAttention`` inside ``model``
    runs the written-out path and appends its weights (B, H, T_q, T_k) to the list this
    yields, in call order (a GPT's layers in order); the model's outputs are unchanged.
    A way to look at every head of a trained model without rewiring it.

        with recorded_attention(gpt) as weights:
            gpt(ids)
        torch.stack(weights)  # (L, B, H, T, T)
    """
    weights: list[torch.Tensor] = []

    def ask_for_weights(module, args, kwargs):
        return args, {**kwargs, "return_weights": True}

    def keep_weights(module, args, kwargs, result):
        output, layer_weights = result
        weights.append(layer_weights.detach())
        return output

    attentions = [
        module for module in model.modules() if isinstance(module, MultiHeadAttention)
    ]
    if not attentions:
        raise ValueError(
            f"{type(model).__name__} holds no MultiHeadAttention to record"
        )
    handles = [
        hook
        for module in attentions
        for hook in (
            module.register_forward_pre_hook(ask_for_weights, with_kwargs=True),
            module.register_forward_hook(keep_weights, with_kwargs=True),
        )
    ]
    try:
        yield weights
    finally:
        for handle in handles:
            handle.remove()
