"""Boolean attention masks. One convention everywhere: ``True`` = this query may
attend this key.

It is the convention of ``torch.nn.functional.scaled_dot_product_attention``. Every mask
here broadcasts to (B, H, T_q, T_k): batch, heads, query time, key time.

When a KV cache holds earlier tokens, T_k > T_q and the queries are the *last* T_q
positions: query i sits at absolute position ``T_k - T_q + i``. ``causal_mask`` and
``sliding_window_mask`` both follow that rule, so the same call serves training
(T_q == T_k) and cached decoding.
"""

import torch

from minformers.support.arguments import require_size


def padding_mask(lengths: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """Mask out the padding at the end of each sequence: key j of sequence b is allowed
    iff j < lengths[b].

    lengths: (B,) integer tensor; max_len: T_k, defaults to ``lengths.max()``.
    Returns a (B, 1, 1, T_k) bool mask: the two 1s broadcast over heads and queries.

    >>> padding_mask(torch.tensor([2, 3]), max_len=4)[:, 0, 0].long()
    tensor([[1, 1, 0, 0],
            [1, 1, 1, 0]])
    """
    lengths = torch.as_tensor(lengths)
    if (
        lengths.dtype.is_floating_point
        or lengths.dtype.is_complex
        or lengths.dtype == torch.bool
    ):
        raise TypeError(f"lengths must be an integer tensor, got dtype {lengths.dtype}")
    if lengths.dim() != 1:
        raise ValueError(f"lengths must have shape (B,), got {tuple(lengths.shape)}")
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    require_size("max_len", max_len)
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    if lengths.numel() and int(lengths.max()) > max_len:
        raise ValueError(
            f"lengths must be <= max_len={max_len}, got {lengths.tolist()}"
        )
    keys = torch.arange(max_len, device=lengths.device)  # (T_k,)
    mask = keys[None, :] < lengths[:, None]  # (1, T_k) < (B, 1) -> (B, T_k)
    return mask[:, None, None, :]  # (B, T_k) -> (B, 1, 1, T_k)


def _positions(t_q: int, t_k: int | None, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Absolute positions of the queries, as a column (T_q, 1), and of the keys, as a
    row (1, T_k)."""
    require_size("t_q", t_q)
    t_k = t_q if t_k is None else require_size("t_k", t_k)
    if t_k < t_q:
        # The queries are the newest positions: there are always at least as many keys.
        raise ValueError(f"t_k must be >= t_q={t_q}, got {t_k}")
    # (T_q,): the last T_q positions
    query = torch.arange(t_k - t_q, t_k, device=device)
    key = torch.arange(t_k, device=device)  # (T_k,)
    return query[:, None], key[None, :]  # (T_q, 1), (1, T_k)


def causal_mask(t_q: int, t_k: int | None = None, device=None) -> torch.Tensor:
    """A query at absolute position p may attend keys j <= p. Returns (T_q, T_k) bool.

    >>> causal_mask(3).long()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]])

    Two new queries against a cache of five keys (they sit at positions 3 and 4):

    >>> causal_mask(2, t_k=5).long()
    tensor([[1, 1, 1, 1, 0],
            [1, 1, 1, 1, 1]])
    """
    query, key = _positions(t_q, t_k, device)
    return key <= query


def sliding_window_mask(
    t_q: int, window: int, t_k: int | None = None, causal: bool = True, device=None
) -> torch.Tensor:
    """Local attention. Returns (T_q, T_k) bool; p is the query's absolute position.

    causal=True:  keys j with p - window < j <= p, i.e. ``window`` keys counting the
                  query itself (Longformer/Mistral style; window >= T_k gives the plain
                  causal mask).
    causal=False: keys j with |p - j| <= window, i.e. ``window`` keys on each side
                  plus itself.

    >>> sliding_window_mask(4, window=2).long()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]])
    >>> sliding_window_mask(4, window=1, causal=False).long()
    tensor([[1, 1, 0, 0],
            [1, 1, 1, 0],
            [0, 1, 1, 1],
            [0, 0, 1, 1]])
    """
    require_size("window", window)
    query, key = _positions(t_q, t_k, device)
    if causal:
        return (key <= query) & (key > query - window)
    return (key - query).abs() <= window


def local_global_mask(
    t: int, window: int, global_positions, device=None
) -> torch.Tensor:
    """Longformer's pattern: a window of ``window`` keys on each side, plus global
    tokens. Returns (T, T) bool.

    A global token (such as [CLS]) attends to every position, and every position attends
    to it, so information can cross the whole sequence in two steps while the cost stays
    O(T * window).

    >>> local_global_mask(5, window=1, global_positions=[0]).long()
    tensor([[1, 1, 1, 1, 1],
            [1, 1, 1, 0, 0],
            [1, 1, 1, 1, 0],
            [1, 0, 1, 1, 1],
            [1, 0, 0, 1, 1]])
    """
    local = sliding_window_mask(t, window, causal=False, device=device)
    positions = list(global_positions)
    if any(
        isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < t
        for p in positions
    ):
        raise ValueError(
            f"global_positions must be ints in [0, t={t}), got {positions}"
        )
    is_global = torch.zeros(t, dtype=torch.bool, device=device)
    is_global[positions] = True
    return local | is_global[:, None] | is_global[None, :]  # (T, T) | (T, 1) | (1, T)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of bool masks, with broadcasting; ``None`` entries are skipped.

    Returns None if every entry is None (no masking at all).

    >>> mask = combine_masks(padding_mask(torch.tensor([2, 3])), None, causal_mask(3))
    >>> mask[:, 0].long()
    tensor([[[1, 0, 0],
             [1, 1, 0],
             [1, 1, 0]],
    <BLANKLINE>
            [[1, 0, 0],
             [1, 1, 0],
             [1, 1, 1]]])
    """
    for index, mask in enumerate(masks):
        if mask is not None and (
            not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool
        ):
            kind = mask.dtype if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise TypeError(
                f"masks must be bool tensors (True = may attend), got {kind} at "
                f"position {index}"
            )
    present = [mask for mask in masks if mask is not None]
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(mask.shape for mask in present))
    except RuntimeError as error:
        shapes = [tuple(mask.shape) for mask in present]
        raise ValueError(f"masks do not broadcast together: shapes {shapes}") from error
    combined = present[0]
    for mask in present[1:]:
        combined = combined & mask
    return combined
