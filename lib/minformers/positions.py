"""Absolute positional encodings: fixed sinusoids (Vaswani et al., 2017) and learned
embeddings (GPT, BERT).

Shapes: T time, C channels = d_model. Both modules return (T, C), added to the (B, T, C)
token embeddings by broadcasting.
"""

import torch
from torch import nn

from minformers.support.arguments import require_size


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i / d_model)),
    PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model)).

    Each pair of channels (2i, 2i + 1) is a point on a circle turning at its own
    frequency, so moving k steps rotates every pair by a fixed angle: PE[p + k] is a
    linear function of PE[p].

    >>> sinusoidal_positions(2, 4)  # row 1 = [sin 1, cos 1, sin 0.01, cos 0.01]
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    require_size("length", length)
    require_size("d_model", d_model)
    if d_model % 2:
        raise ValueError(
            f"d_model must be even (sin and cos channels come in pairs), got {d_model}"
        )
    # float64 for the angles: at pos ~ 10^4 float32 loses the low digits that the
    # cos/sin depend on.
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (T, 1)
    # (C/2,)
    frequency = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = position * frequency  # (T, 1) * (C/2,) -> (T, C/2)
    # (T, C/2) -> (T, C/2, 2)
    encoding = torch.stack([angle.sin(), angle.cos()], dim=-1)
    # (T, C/2, 2) -> (T, C): sin, cos interleaved
    return encoding.flatten(1).to(torch.get_default_dtype())


def _require_fits(max_len: int, end: int, what: str) -> None:
    if end > max_len:
        raise ValueError(f"{what} needs {end} positions, more than max_len={max_len}")


class SinusoidalPositions(nn.Module):
    """The table ``sinusoidal_positions(max_len, d_model)``, computed once, moved
    with the model.

    forward(length) -> rows 0..length-1, (T, C); forward(positions) -> rows at those
    indices, positions.shape + (C,) (for left padding or a KV cache offset).

    >>> SinusoidalPositions(max_len=16, d_model=8)(5).shape
    torch.Size([5, 8])
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = require_size("max_len", max_len)
        # Non-persistent: the table is a function of (max_len, d_model), so it stays
        # out of checkpoints.
        self.register_buffer(
            "table", sinusoidal_positions(max_len, d_model), persistent=False
        )

    def forward(self, length_or_positions: int | torch.Tensor) -> torch.Tensor:
        if isinstance(length_or_positions, torch.Tensor):
            positions = length_or_positions
            if positions.numel() and int(positions.min()) < 0:
                raise ValueError(
                    f"positions must be >= 0, got min {int(positions.min())}"
                )
            _require_fits(
                self.max_len,
                int(positions.max()) + 1 if positions.numel() else 0,
                "positions",
            )
            return self.table[positions]
        length = require_size("length", length_or_positions)
        _require_fits(self.max_len, length, f"length {length}")
        return self.table[:length]


class LearnedPositions(nn.Module):
    """One trained vector per position (GPT-1/2, BERT):
    forward(length, offset) -> (T, C).

    ``offset`` skips the positions a KV cache already holds.

    >>> LearnedPositions(max_len=16, d_model=8)(3, offset=2).shape  # positions 2, 3, 4
    torch.Size([3, 8])
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = require_size("max_len", max_len)
        self.embedding = nn.Embedding(max_len, require_size("d_model", d_model))
        # GPT-2 and BERT initialise with std 0.02; nn.Embedding's std 1 would drown
        # the token embeddings.
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        require_size("length", length)
        require_size("offset", offset, minimum=0)
        _require_fits(
            self.max_len, offset + length, f"offset {offset} + length {length}"
        )
        # (T,)
        positions = torch.arange(
            offset, offset + length, device=self.embedding.weight.device
        )
        return self.embedding(positions)  # (T,) -> (T, C)
