"""Quantization: a weight stored as small integers and a few floats that map them back.

Absmax (symmetric) 8-bit: one scale s = max|w| / 127 for the whole tensor, or one per
output channel (row), and q = round(w / s) in [-127, 127]; w is read back as q * s.
A single large weight sets the scale for everything that shares it, so the smaller
the groups that share a scale, the smaller the error, and the more scales to store.

Affine k-bit per group: each run of ``group_size`` consecutive weights of a row gets a
scale s = (max - min) / (2^k - 1) and its minimum m; q = round((w - m) / s) in
[0, 2^k - 1], read back as q * s + m. Using the range rather than the largest magnitude
spends no code on values the group does not have.

llama.cpp's GGUF files store weights in blocks of 32 of a row this way (``BLOCK``):

- Q8_0: a float16 scale and 32 int8 codes, absmax (34 bytes for 32 weights, 8.5 bits
  a weight);
- Q4_1: a float16 scale, a float16 minimum and 32 4-bit codes, two to a byte, the
  block's first 16 weights in the low halves and the last 16 in the high halves (20
  bytes, 5 bits a weight).

``dequantize_gguf`` reads both from a file's raw bytes; tests/test_quantization.py
checks it against the ``gguf`` package bit for bit on SmolLM2's own tensors.

    >>> w = torch.tensor([[0.5, -1.0, 0.25, 2.0]])
    >>> q = absmax_int8(w)
    >>> q.codes
    tensor([[[ 32, -64,  16, 127]]], dtype=torch.int8)
    >>> q.dequantize()  # each within half a step, 2 / 127 / 2, of the weight
    tensor([[ 0.5039, -1.0079,  0.2520,  2.0000]])
"""

import contextlib
import copy
from dataclasses import dataclass

import numpy as np
import torch

BLOCK = 32  # weights per GGUF block, for Q8_0 and Q4_1
Q8_0, Q4_1 = 8, 3  # their ggml type numbers (gguf.GGMLQuantizationType)
BLOCK_BYTES = {Q8_0: 2 + BLOCK, Q4_1: 2 + 2 + BLOCK // 2}


@dataclass(frozen=True)
class Quantized:
    """A (rows, columns) weight as integer codes (rows, groups, group size) and a scale
    (and, for affine codes, a minimum) per group, (rows, groups, 1)."""

    codes: torch.Tensor
    scale: torch.Tensor
    minimum: torch.Tensor | None  # None: symmetric codes
    bits: int

    def dequantize(self) -> torch.Tensor:
        """The float32 weight the codes stand for, (rows, columns)."""
        values = self.codes.float() * self.scale
        if self.minimum is not None:
            values = values + self.minimum
        return values.flatten(1)

    def bits_per_weight(self, float_bits: int = 16) -> float:
        """Storage per weight: the codes, and the scales and minimums kept in
        ``float_bits`` each (float16, as GGUF keeps them)."""
        floats = self.scale.numel() * (1 if self.minimum is None else 2)
        return self.bits + float_bits * floats / self.codes.numel()


def _grouped(weight: torch.Tensor, group_size: int | None) -> torch.Tensor:
    """(rows, columns) -> (rows, groups, group_size); None: one group a row."""
    if weight.dim() != 2:
        raise ValueError(
            f"expected a (rows, columns) weight, got shape {tuple(weight.shape)}"
        )
    columns = weight.shape[1]
    size = columns if group_size is None else group_size
    if columns % size:
        raise ValueError(f"{columns} columns do not split into groups of {size}")
    return weight.float().reshape(weight.shape[0], columns // size, size)


def absmax_int8(
    weight: torch.Tensor, per: str = "tensor", group_size: int | None = None
) -> Quantized:
    """Symmetric 8-bit codes with one scale for the whole ``weight`` (``per="tensor"``),
    one per row (``"channel"``), or one per ``group_size`` weights of a row
    (``"group"``, as Q8_0 with 32)."""
    if per not in ("tensor", "channel", "group"):
        raise ValueError(f'per must be "tensor", "channel" or "group", got {per!r}')
    if per == "group" and group_size is None:
        raise ValueError('per="group" needs a group_size')
    groups = _grouped(weight, group_size if per == "group" else None)
    largest = groups.abs().amax(-1, keepdim=True)  # (rows, groups, 1)
    if per == "tensor":
        largest = largest.amax().expand_as(largest)
    scale = largest / 127
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero group
    codes = (groups / safe).round().clamp(-127, 127).to(torch.int8)
    return Quantized(codes, scale, None, bits=8)


def affine(weight: torch.Tensor, bits: int, group_size: int) -> Quantized:
    """``bits``-bit codes with a scale and a minimum for each ``group_size`` weights of
    a row (as Q4_1 with 4 bits and 32)."""
    if not 1 <= bits <= 8:
        raise ValueError(f"bits must be from 1 to 8, got {bits}")
    groups = _grouped(weight, group_size)
    low = groups.amin(-1, keepdim=True)
    scale = (groups.amax(-1, keepdim=True) - low) / (2**bits - 1)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant group
    codes = ((groups - low) / safe).round().clamp(0, 2**bits - 1).to(torch.uint8)
    return Quantized(codes, scale, low, bits=bits)


def dequantize_gguf(raw: np.ndarray, ggml_type: int) -> torch.Tensor:
    """float32 weights from a GGUF tensor's bytes: ``raw`` (rows, blocks * block bytes)
    uint8, as ``convert.gguf_file`` reads it, in Q8_0 or Q4_1 -> (rows, blocks * 32)."""
    if ggml_type not in BLOCK_BYTES:
        raise ValueError(
            f"ggml type {ggml_type} is neither Q8_0 ({Q8_0}) nor Q4_1 ({Q4_1})"
        )
    size = BLOCK_BYTES[ggml_type]
    if raw.dtype != np.uint8 or raw.shape[-1] % size:
        raise ValueError(
            f"expected rows of {size}-byte blocks as uint8, got {raw.dtype} {raw.shape}"
        )
    # a copy: the file's bytes are read-only, and torch wants tensors it may write to
    blocks = torch.from_numpy(np.require(raw, requirements=["C", "W"]))
    blocks = blocks.reshape(raw.shape[0], -1, size)  # (rows, blocks, block bytes)
    # (rows, blocks, 1): the first two bytes of a block, a float16
    scale = blocks[..., 0:2].contiguous().view(torch.float16).float()
    if ggml_type == Q8_0:
        codes = blocks[..., 2:].contiguous().view(torch.int8).float()
        return (codes * scale).flatten(1)
    minimum = blocks[..., 2:4].contiguous().view(torch.float16).float()
    # 16 bytes: weight j of the block in the low half of byte j, weight j + 16 in
    # the high half
    packed = blocks[..., 4:]
    codes = torch.cat([packed & 0x0F, packed >> 4], dim=-1).float()
    return (codes * scale + minimum).flatten(1)


def with_quantized_weights(model: torch.nn.Module, quantize) -> torch.nn.Module:
    """A copy of ``model`` whose every ``nn.Linear`` weight is replaced by what
    ``quantize(weight)`` (a ``Quantized``) reads back: the model computes in float32
    with the values the codes stand for, as a dequantizing kernel would. A weight shared
    by two modules (tied embeddings) is quantized once, and stays shared."""
    quantized = copy.deepcopy(model)
    done: set[int] = set()
    for module in quantized.modules():
        if isinstance(module, torch.nn.Linear) and id(module.weight) not in done:
            done.add(id(module.weight))
            with torch.no_grad():
                module.weight.copy_(quantize(module.weight).dequantize())
    return quantized


def int8_activations(
    x: torch.Tensor, per: str = "tensor", keep: torch.Tensor | None = None
) -> torch.Tensor:
    """``x`` (..., channels) as absmax int8 codes would read it back, with one scale for
    the whole tensor (``per="tensor"``), one per token (``"token"``) or one per channel
    over all tokens (``"channel"``); channels where ``keep`` (channels,) bool is True
    pass through in float and do not set the scale, as LLM.int8() keeps its outliers.

    >>> x = torch.tensor([[1.0, 100.0], [-1.0, 50.0]])  # channel 0 small, 1 large
    >>> int8_activations(x, "tensor")[:, 0], int8_activations(x, "channel")[:, 0]
    (tensor([ 0.7874, -0.7874]), tensor([ 1., -1.]))
    """
    largest_over = {
        "tensor": None,
        "token": (-1,),
        "channel": tuple(range(x.dim() - 1)),
    }
    if per not in largest_over:
        raise ValueError(f'per must be "tensor", "token" or "channel", got {per!r}')
    rest = x if keep is None else x.masked_fill(keep, 0.0)
    dims = largest_over[per]
    largest = rest.abs().amax() if dims is None else rest.abs().amax(dims, keepdim=True)
    scale = torch.where(largest > 0, largest / 127, torch.ones_like(largest))
    values = (rest / scale).round().clamp(-127, 127) * scale
    return values if keep is None else torch.where(keep, x, values)


@contextlib.contextmanager
def quantized_inputs(model: torch.nn.Module, quantize):
    """Within the block, every ``nn.Linear`` of ``model`` reads ``quantize(name, x)``
    instead of its input ``x``: simulated activation quantization. ``name`` is the
    layer's in ``model.named_modules()`` (the first, for a layer listed twice, as
    ALBERT's shared ones). A product that is no ``nn.Linear`` reads its input as it is:
    GPT's tied output, ``x @ embedding.T``, or a LoRA update's ``x A^T``.

    >>> model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    >>> seen = []
    >>> with quantized_inputs(model, lambda name, x: seen.append(name) or x.round()):
    ...     _ = model(torch.ones(1, 2))
    >>> seen
    ['0', '1']
    """
    handles = [
        module.register_forward_pre_hook(
            lambda module, inputs, name=name: (quantize(name, inputs[0]),)
        )
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    ]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()
