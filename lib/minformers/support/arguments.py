"""Argument checks shared by every module, so each error names the argument and the
limit the same way.

>>> require_size("n_heads", 0)
Traceback (most recent call last):
ValueError: n_heads must be >= 1, got 0
"""

import torch


def require_size(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` if it is an int >= ``minimum``; otherwise
    raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def require_heads(d_model: int, n_heads: int) -> None:
    """Raise unless ``d_model`` splits into ``n_heads`` heads of equal width.

    >>> require_heads(100, 12)
    Traceback (most recent call last):
    ValueError: d_model must be divisible by n_heads, got 100 and 12
    """
    if d_model % n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads, got {d_model} and {n_heads}"
        )


def require_ids(
    name: str, ids, limit: int, limit_name: str, shape=None, ignore: int | None = None
) -> None:
    """Raise unless ``ids`` is an integer tensor of ``shape`` (None: any (B, T)) whose
    every value is in [0, ``limit``) or equal to ``ignore``: token ids, segment ids,
    labels.

    >>> require_ids("input_ids", torch.tensor([[3, 12]]), 10, "vocab_size")
    Traceback (most recent call last):
    ValueError: input_ids must be in [0, vocab_size=10), got [12]
    """
    if (
        not isinstance(ids, torch.Tensor)
        or ids.dtype.is_floating_point
        or ids.dtype.is_complex
        or ids.dtype == torch.bool
    ):
        raise TypeError(
            f"{name} must be an integer tensor, got "
            f"{getattr(ids, 'dtype', type(ids).__name__)}"
        )
    if (shape is None and ids.dim() != 2) or (shape is not None and ids.shape != shape):
        raise ValueError(
            f"{name} must have shape {'(B, T)' if shape is None else tuple(shape)}, "
            f"got {tuple(ids.shape)}"
        )
    outside = (ids < 0) | (ids >= limit)
    if ignore is not None:
        outside &= ids != ignore
    if outside.any():
        allowed = f"[0, {limit_name}={limit})" + (
            "" if ignore is None else f" or {ignore} (ignored)"
        )
        raise ValueError(
            f"{name} must be in {allowed}, got {ids[outside].unique().tolist()}"
        )


def require_context(name: str, length: int, max_len: int, offset: int = 0) -> None:
    """Raise unless ``length`` new tokens after ``offset`` cached ones fit in the
    ``max_len`` positions a model has.

    >>> require_context("input_ids", 5, max_len=64, offset=60)
    Traceback (most recent call last):
    ValueError: input_ids of length 5 after 60 cached tokens need 65 positions, more than max_len=64
    """
    if offset + length <= max_len:
        return
    if offset:
        raise ValueError(
            f"{name} of length {length} after {offset} cached tokens need "
            f"{offset + length} positions, more than max_len={max_len}"
        )
    raise ValueError(f"{name} has length {length}, more than max_len={max_len}")
