"""Attention over long sequences in O(T * w) time and memory: a sliding window computed
band by band, Longformer's local + global pattern built on it, linear attention (O(T) by
a kernel feature map), and the memory a KV cache needs as the context grows.

Full attention writes out a (T, T) score matrix per head, so its memory grows as T^2,
even when a sliding-window mask then throws almost all of it away. Here the queries are
cut into blocks of W = window positions. A query in block b can only see keys in blocks
b - 1 and b (and b + 1 when the window looks both ways), so each block's scores are
(W, 2W) or (W, 3W): about 3 T w numbers in all instead of T^2. The result equals full
attention with ``masks.sliding_window_mask`` exactly (same keys, same softmax); only the
work on keys it would mask away is skipped.

Shape legend: B batch, H heads, T time, D head dim (D_v for values), N blocks,
W block length (= window, at most T), K keys around one block (2W causal,
3W two-sided), G global tokens.
Masks are bool, True = may attend, as everywhere in minformers.
"""

import math

import torch
import torch.nn.functional as F

from minformers.support.arguments import require_size


def _require_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int
) -> None:
    require_size("window", window)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() < 2:
            raise ValueError(
                f"{name} must have shape (..., T, D), got {tuple(x.shape)}"
            )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same last dim D, got {q.shape[-1]} and "
            f"{k.shape[-1]}"
        )
    if not q.shape[-2] == k.shape[-2] == v.shape[-2]:
        raise ValueError(
            "q, k and v must have the same length T (self-attention), got "
            f"{q.shape[-2]}, {k.shape[-2]} and {v.shape[-2]}"
        )
    if q.shape[-2] == 0:
        raise ValueError("q must hold at least one position, got T = 0")


def _neighbourhoods(
    x: torch.Tensor, block: int, n_blocks: int, before: int, after: int
) -> torch.Tensor:
    """For each block of ``block`` rows, the rows of the blocks around it: ``before``
    blocks, itself, ``after`` blocks.

    (..., T, E) -> (..., N, (before + 1 + after) * W, E), padded with zeros (False for a
    bool x) outside [0, T).

    >>> rows = torch.arange(4.0)[:, None]  # T = 4 rows, E = 1
    >>> # block 0 sees padding, then itself
    >>> _neighbourhoods(rows, block=2, n_blocks=2, before=1, after=0)[..., 0]
    tensor([[0., 0., 0., 1.],
            [0., 1., 2., 3.]])
    """
    length = x.shape[-2]
    front, back = before * block, (n_blocks + after) * block - length
    # (..., T, E) -> (..., (N + before + after) * W, E)
    x = F.pad(x, (0, 0, front, back))
    # -> (..., N + before + after, W, E)
    x = x.unflatten(-2, (n_blocks + before + after, block))
    # each (..., N, W, E)
    shifted = [
        x[..., start : start + n_blocks, :, :] for start in range(before + after + 1)
    ]
    # (..., N, K, E) with K = (before + 1 + after) * W
    return torch.cat(shifted, dim=-2)


def _band_scores(q, k, window: int, causal: bool, key_mask=None):
    """Scores of each query block against the keys around it, -inf wherever the window
    (or key_mask) forbids.

    q, k: (..., T, D). Returns scores (..., N, W, K) and the block geometry
    (block, n_blocks, before, after).
    """
    length = q.shape[-2]
    # a block as wide as the window: the keys a query needs lie in adjacent blocks
    block = min(window, length)
    n_blocks = math.ceil(length / block)
    before, after = 1, 0 if causal else 1
    # (..., T, D) -> (..., N * W, D)
    q_blocks = F.pad(q, (0, 0, 0, n_blocks * block - length))
    # (..., N * W, D) -> (..., N, W, D)
    q_blocks = q_blocks.unflatten(-2, (n_blocks, block))
    k_near = _neighbourhoods(k, block, n_blocks, before, after)  # (..., N, K, D)
    # (..., N, W, D) @ (..., N, D, K) -> (..., N, W, K): each block against its
    # own neighbourhood only
    scores = q_blocks @ k_near.transpose(-2, -1) / math.sqrt(q.shape[-1])

    # (N, W, 1) absolute positions
    query = torch.arange(n_blocks * block, device=q.device).view(n_blocks, block, 1)
    # (N,): where each neighbourhood starts
    first_key = (torch.arange(n_blocks, device=q.device) - before) * block
    # (N, 1, K)
    key = (first_key[:, None] + torch.arange(k_near.shape[-2], device=q.device))[
        :, None, :
    ]
    # the same rule as masks.sliding_window_mask:
    # p - window < j <= p, or |p - j| <= window
    if causal:
        allowed = (key <= query) & (key > query - window)
    else:
        allowed = (key - query).abs() <= window
    # (N, W, K): padding around the sequence is never a key
    allowed = allowed & (key >= 0) & (key < length)
    if key_mask is not None:
        # (..., N, K, 1)
        keys_kept = _neighbourhoods(
            key_mask[..., 0, :, None], block, n_blocks, before, after
        )
        # (N, W, K) & (..., N, 1, K) -> (..., N, W, K)
        allowed = allowed & keys_kept[..., None, :, 0]
    return scores.masked_fill(~allowed, float("-inf")), (block, n_blocks, before, after)


def _softmax_or_zero(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim; a row with no allowed key (all -inf) gets zero weights
    instead of NaN."""
    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(scores.isneginf().all(dim=-1, keepdim=True), 0.0)


def sliding_window_attention(
    q, k, v, window: int, causal: bool = True, key_mask=None
) -> torch.Tensor:
    """Self-attention where each query sees only a window of keys, in O(T * window)
    time and memory.

    q, k: (..., T, D), v: (..., T, D_v) -> (..., T, D_v). It equals full attention with
    the mask ``masks.sliding_window_mask(T, window, causal=causal)`` (and ``key_mask``):
    causal=True, the ``window`` keys p - window < j <= p; causal=False, the keys
    |p - j| <= window. ``key_mask``: bool, True = may attend this key, broadcastable to
    (..., 1, T), such as ``masks.padding_mask(lengths)``. A query with no allowed key
    gets zeros.

    Example: equal scores (q = k = 0), so each output is the mean of its window.
    >>> q = k = torch.zeros(5, 1)
    >>> v = torch.arange(5.0)[:, None]  # (T, D_v) = (5, 1): the values 0, 1, 2, 3, 4
    >>> sliding_window_attention(q, k, v, window=2).flatten()
    tensor([0.0000, 0.5000, 1.5000, 2.5000, 3.5000])
    """
    _require_inputs(q, k, v, window)
    length = q.shape[-2]
    if key_mask is not None:
        if not isinstance(key_mask, torch.Tensor) or key_mask.dtype != torch.bool:
            kind = (
                key_mask.dtype
                if isinstance(key_mask, torch.Tensor)
                else type(key_mask).__name__
            )
            raise TypeError(
                f"key_mask must be a bool tensor (True = may attend), got {kind}"
            )
        if key_mask.dim() < 2 or key_mask.shape[-2:] != (1, length):
            raise ValueError(
                f"key_mask must have shape (..., 1, T={length}), got "
                f"{tuple(key_mask.shape)}"
            )
    scores, (block, n_blocks, before, after) = _band_scores(
        q, k, window, causal, key_mask
    )
    v_near = _neighbourhoods(v, block, n_blocks, before, after)  # (..., N, K, D_v)
    # (..., N, W, K) @ (..., N, K, D_v) -> (..., N, W, D_v)
    output = _softmax_or_zero(scores) @ v_near
    # (..., N, W, D_v) -> (..., N * W, D_v) -> (..., T, D_v)
    return output.flatten(-3, -2)[..., :length, :]


def local_global_attention(q, k, v, window: int, global_positions) -> torch.Tensor:
    """Longformer's attention: a two-sided window of ``window`` keys each side, plus G
    global tokens that attend to every position and that every position attends to.
    O(T * (window + G)) time and memory.

    q, k: (..., T, D), v: (..., T, D_v) -> (..., T, D_v). Equals full attention with
    ``masks.local_global_mask(T, window, global_positions)``. Each ordinary query takes
    one softmax over its window's keys and the global keys together (a global key inside
    the window is counted once, as a global key); each global query attends to all T
    keys.

    Example: token 0 is global, so token 4, outside its window of 1, still reads it.
    >>> q = k = torch.zeros(5, 1)
    >>> v = torch.arange(5.0)[:, None]
    >>> # means of {0..4}, {0,1,2}, ...
    >>> local_global_attention(q, k, v, window=1, global_positions=[0]).flatten()
    tensor([2.0000, 1.0000, 1.5000, 2.2500, 2.3333])
    """
    _require_inputs(q, k, v, window)
    length = q.shape[-2]
    positions = list(global_positions)
    if any(
        isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < length
        for p in positions
    ):
        raise ValueError(
            f"global_positions must be distinct ints in [0, T={length}), got "
            f"{positions}"
        )
    if len(set(positions)) != len(positions):
        raise ValueError(
            f"global_positions must be distinct ints in [0, T={length}), got "
            f"{positions}"
        )
    index = torch.tensor(positions, dtype=torch.long, device=q.device)  # (G,)
    is_global = torch.zeros(1, length, dtype=torch.bool, device=q.device)
    is_global[0, index] = True
    # The window part leaves the global keys out: every query reads them through the
    # global part instead.
    band, (block, n_blocks, before, after) = _band_scores(
        q, k, window, causal=False, key_mask=~is_global
    )
    # (..., G, D), (..., G, D_v)
    k_global, v_global = k[..., index, :], v[..., index, :]
    # (..., T, D) @ (..., D, G) -> (..., T, G)
    to_global = q @ k_global.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # (..., N * W, G)
    to_global = F.pad(to_global, (0, 0, 0, n_blocks * block - length))
    # (..., N * W, G) -> (..., N, W, G)
    to_global = to_global.unflatten(-2, (n_blocks, block))
    # one softmax over (..., N, W, K + G)
    weights = _softmax_or_zero(torch.cat([band, to_global], dim=-1))
    v_near = _neighbourhoods(v, block, n_blocks, before, after)  # (..., N, K, D_v)
    # (..., N, W, K) @ (..., N, K, D_v) -> (..., N, W, D_v)
    output = weights[..., : band.shape[-1]] @ v_near
    # (..., N, W, G) @ (..., 1, G, D_v)
    output = output + weights[..., band.shape[-1] :] @ v_global.unsqueeze(-3)
    # (..., N, W, D_v) -> (..., T, D_v)
    output = output.flatten(-3, -2)[..., :length, :]
    # Global queries see every key: G full rows, O(G * T).
    # (..., G, D) @ (..., D, T) -> (..., G, T)
    scores = q[..., index, :] @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # (..., G, T) @ (..., T, D_v) -> (..., G, D_v)
    output[..., index, :] = torch.softmax(scores, dim=-1) @ v
    return output


def linear_attention(q, k, v, causal: bool = True) -> torch.Tensor:
    """Linear attention (Katharopoulos et al., 2020): softmax(q k^T) v with the
    exponential similarity replaced by phi(q) . phi(k), phi(x) = elu(x) + 1 > 0, so the
    sum over keys can be taken once, before the queries come:

        out_i = phi(q_i)^T S_i / (phi(q_i)^T z_i),
        S_i = sum_j phi(k_j) v_j^T,
        z_i = sum_j phi(k_j),

    over j <= i when causal (a running sum: an RNN whose state is the D x D_v matrix S),
    else over all j. Time and memory grow as T D D_v, not T^2; but it is another model,
    not an approximation that converges to softmax. This written-out causal version
    keeps every S_i, (B, H, T, D, D_v); a recurrent or chunked one keeps one.

    q, k: (B, H, T, D); v: (B, H, T, D_v) -> (B, H, T, D_v).

    >>> q, k, v = (torch.randn(1, 2, 6, 4) for _ in range(3))
    >>> # the first query sees only the first value
    >>> linear_attention(q, k, v)[..., 0, :].allclose(v[..., 0, :])
    True
    """
    if q.dim() != 4 or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f"q and k must be (B, H, T, D) and v (B, H, T, D_v), got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1  # (B, H, T, D), positive
    if causal:
        # (B, H, T, D, D_v): S_i for every i
        state = torch.cumsum(phi_k.unsqueeze(-1) * v.unsqueeze(-2), dim=2)
        normaliser = torch.cumsum(phi_k, dim=2)  # (B, H, T, D): z_i
        # (B, H, T, 1, D) @ (B, H, T, D, D_v) -> (B, H, T, D_v)
        numerator = (phi_q.unsqueeze(-2) @ state).squeeze(-2)
    else:
        # (B, H, T, D) @ (B, H, D, D_v)
        numerator = phi_q @ (phi_k.transpose(-2, -1) @ v)
        normaliser = phi_k.sum(dim=2, keepdim=True)  # (B, H, 1, D)
    return numerator / (phi_q * normaliser).sum(-1, keepdim=True)


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    head_dim: int,
    length: int,
    batch: int = 1,
    bytes_per_value: int = 2,
    window: int | None = None,
) -> int:
    """Bytes a KV cache holds after ``length`` tokens: keys and values, for every layer,
    key/value head and token.

    2 x n_layers x batch x n_kv_heads x T x head_dim x bytes_per_value, with T = length,
    or min(length, window) for a rolling cache of a sliding-window model (a key older
    than the window is never read again, so it can be dropped). ``bytes_per_value``:
    4 for float32, 2 for float16/bfloat16.

    >>> # Llama-2-7B, fp16, 4096 tokens: 2 GiB
    >>> kv_cache_bytes(n_layers=32, n_kv_heads=32, head_dim=128, length=4096)
    2147483648
    >>> # Mistral-7B's layout
    >>> kv_cache_bytes(
    ...     n_layers=32, n_kv_heads=8, head_dim=128, length=32768, window=4096
    ... )
    536870912
    """
    for name, value in (
        ("n_layers", n_layers),
        ("n_kv_heads", n_kv_heads),
        ("head_dim", head_dim),
        ("batch", batch),
        ("bytes_per_value", bytes_per_value),
    ):
        require_size(name, value)
    require_size("length", length, minimum=0)
    kept = length if window is None else min(length, require_size("window", window))
    return 2 * n_layers * batch * n_kv_heads * kept * head_dim * bytes_per_value
