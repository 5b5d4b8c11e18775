"""Reading llama.cpp's GGUF files: typed key-value metadata, a table of tensors, then
the tensors' bytes.

The layout, all little-endian: the magic b"GGUF", a version (2 or 3), the number of
tensors and of metadata keys (u64 each); each key a string (u64 length, UTF-8 bytes), a
value type (u32) and a value: a number, a string, or an array (item type, u64 count,
items); each tensor's name, number of dimensions, dimensions (fastest-varying first),
ggml type and byte offset into the data, which starts at the first multiple of
``general.alignment`` (32 unless the metadata says otherwise) after the table.

The ``gguf`` package's reader does the same job but makes a numpy view of every value,
which takes seconds on a 49k-token vocabulary; here a file reads in a fraction of a
second. Dequantizing is still the package's (``gguf.dequantize``): the tensors come back
as the raw arrays it expects.

    >>> from minformers.support import data
    >>> smollm2 = read_gguf(data.smollm2_gguf())
    >>> smollm2.metadata["general.architecture"], len(smollm2.tensors)
    ('llama', 272)
    >>> # fastest-varying first: 49,152 rows of 576 channels, in 8-bit blocks (Q8_0)
    >>> embedding = smollm2.tensors["token_embd.weight"]
    >>> embedding.dims, embedding.ggml_type
    ((576, 49152), 8)
"""

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# metadata value types: the numbers, by struct format; 8 and 9 are strings and arrays
_NUMBERS = {
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
    12: "d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9
# ggml types stored as plain floats: numpy's dtype for them
_FLOATS = {0: np.float32, 1: np.float16}


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    dims: tuple[int, ...]  # as the file lists them, fastest-varying first
    # 0 = float32, 1 = float16, others quantized (``gguf.GGMLQuantizationType``)
    ggml_type: int
    # float tensors: shape dims reversed (numpy's order); quantized ones: uint8, one row
    # of blocks per innermost row, the layout ``gguf.dequantize`` reads
    data: np.ndarray


@dataclass(frozen=True)
class GGUFFile:
    version: int
    metadata: dict[str, object]  # numbers, strings, and lists of them
    tensors: dict[str, GGUFTensor]


class _Cursor:
    """Reads values one after another from a bytes buffer."""

    def __init__(self, buffer: bytes):
        self.buffer, self.offset = buffer, 0

    def numbers(self, fmt: str, count: int = 1) -> tuple:
        layout = struct.Struct(f"<{count}{fmt}")
        values = layout.unpack_from(self.buffer, self.offset)
        self.offset += layout.size
        return values

    def number(self, fmt: str):
        return self.numbers(fmt)[0]

    def string(self) -> str:
        length = self.number("Q")
        text = self.buffer[self.offset : self.offset + length].decode("utf-8")
        self.offset += length
        return text

    def value(self, kind: int):
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            item_kind, count = self.number("I"), self.number("Q")
            if item_kind in _NUMBERS:  # all at once
                return list(self.numbers(_NUMBERS[item_kind], count))
            return [self.value(item_kind) for _ in range(count)]
        if kind not in _NUMBERS:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.offset}")
        return self.number(_NUMBERS[kind])


def _tensor_array(buffer: bytes, start: int, dims: tuple[int, ...], ggml_type: int):
    shape = dims[::-1]
    if ggml_type in _FLOATS:
        dtype = _FLOATS[ggml_type]
        count = int(np.prod(shape))
        return np.frombuffer(buffer, dtype, count, start).reshape(shape)
    import gguf  # only here: the block sizes of the quantized types

    block, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ggml_type)]
    if dims[0] % block:
        raise ValueError(
            f"a row of {dims[0]} values is not whole blocks of {block} (ggml type "
            f"{ggml_type})"
        )
    row_bytes = dims[0] // block * block_bytes
    rows = int(np.prod(shape[:-1]))
    return np.frombuffer(buffer, np.uint8, rows * row_bytes, start).reshape(
        *shape[:-1], row_bytes
    )


def read_gguf(path) -> GGUFFile:
    """A GGUF file's metadata and tensors. The tensors' arrays are read-only views of
    the file's bytes, read into memory once."""
    buffer = Path(path).read_bytes()
    if buffer[:4] != MAGIC:
        raise ValueError(f"{path} is not a GGUF file (it starts {buffer[:4]!r})")
    cursor = _Cursor(buffer)
    cursor.offset = len(MAGIC)
    version = cursor.number("I")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version} is not supported (2 or 3)")
    n_tensors, n_keys = cursor.numbers("Q", 2)
    metadata = {}
    for _ in range(n_keys):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.number("I"))
    table = []
    for _ in range(n_tensors):
        name = cursor.string()
        dims = cursor.numbers("Q", cursor.number("I"))
        table.append((name, dims, cursor.number("I"), cursor.number("Q")))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    data_start = -(-cursor.offset // alignment) * alignment  # rounded up
    tensors = {
        name: GGUFTensor(
            name, dims, kind, _tensor_array(buffer, data_start + offset, dims, kind)
        )
        for name, dims, kind, offset in table
    }
    return GGUFFile(version, metadata, tensors)
