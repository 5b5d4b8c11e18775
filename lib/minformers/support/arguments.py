"""Argument checks shared by every module, so each error names the argument and the
limit the same way.

>>> check_size("n_heads", 0)
Traceback (most recent call last):
ValueError: n_heads must be >= 1, got 0
"""


def check_size(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` if it is an int >= ``minimum``; otherwise raise naming
    ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_heads(d_model: int, n_heads: int) -> None:
    """Raise unless ``d_model`` splits into ``n_heads`` heads of equal width.

    >>> check_heads(100, 12)
    Traceback (most recent call last):
    ValueError: d_model must be divisible by n_heads, got 100 and 12
    """
    if d_model % n_heads:
        raise ValueError(
            f"d_model must be divisible by n_heads, got {d_model} and {n_heads}"
        )
