"""Our GGUF reader against the gguf package's: a small file written by the package's GGUFWriter (every kind of
metadata value, float and quantized tensors), and SmolLM2's real file."""

import gguf
import numpy as np
import pytest

from minformers.convert.gguf_file import read_gguf


def same_as_the_package(path):
    ours, theirs = read_gguf(path), gguf.GGUFReader(str(path))
    keys = [key for key in theirs.fields if not key.startswith("GGUF.")]
    assert list(ours.metadata) == keys
    for key in keys:
        assert ours.metadata[key] == theirs.fields[key].contents(), key
    assert list(ours.tensors) == [tensor.name for tensor in theirs.tensors]
    for tensor in theirs.tensors:
        mine = ours.tensors[tensor.name]
        assert mine.ggml_type == tensor.tensor_type
        assert mine.data.dtype == tensor.data.dtype and np.array_equal(mine.data, tensor.data)
    return ours


def test_small_file_reads_as_the_package_reads_it(tmp_path):
    path = tmp_path / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("test.count", 7)
    writer.add_int64("test.negative", -3)
    writer.add_float32("test.eps", 1e-5)
    writer.add_bool("test.flag", True)
    writer.add_string("test.name", "café ✓")
    writer.add_array("test.ids", [3, 1, 4, 1, 5])
    writer.add_array("test.words", ["a", "bc", ""])
    weights = np.arange(24, dtype=np.float32).reshape(4, 6)
    writer.add_tensor("w", weights)
    writer.add_tensor("h", np.linspace(-1, 1, 8, dtype=np.float16))
    rows = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    quantized = gguf.quantize(rows, gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("q", quantized, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    ours = same_as_the_package(path)
    assert ours.metadata["test.words"] == ["a", "bc", ""] and ours.metadata["test.name"] == "café ✓"
    assert ours.tensors["w"].dims == (6, 4)  # fastest-varying first, as the file lists them
    assert np.array_equal(ours.tensors["w"].data, weights)
    restored = gguf.dequantize(ours.tensors["q"].data, gguf.GGMLQuantizationType.Q8_0)
    assert np.abs(restored - rows).max() < 0.02  # 8-bit blocks: about 1% of a block's largest value


def test_not_a_gguf_file_is_refused(tmp_path):
    path = tmp_path / "not.gguf"
    path.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        read_gguf(path)


@pytest.mark.slow
def test_smollm2_file_reads_as_the_package_reads_it():
    from minformers.support import data

    ours = same_as_the_package(data.smollm2_gguf())
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == ours.metadata["llama.vocab_size"]
