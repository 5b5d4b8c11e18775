"""Quantization (minformers.quantization): GGUF's Q8_0 and Q4_1 blocks read by our code against the gguf package,
bit for bit, on SmolLM2's own tensors; our quantizers giving back the file's codes; the errors and storage the
module's docstring states; and quantized inputs reaching every linear layer of our GPT and BERT, q, k and v included."""

from functools import lru_cache

import gguf
import numpy as np
import pytest
import torch

from minformers.bert import BertConfig, BertForPreTraining
from minformers.convert.gguf_file import read_gguf
from minformers.gpt import GPT, GPTConfig
from minformers.quantization import (
    BLOCK,
    BLOCK_BYTES,
    Q4_1,
    Q8_0,
    absmax_int8,
    affine,
    dequantize_gguf,
    int8_activations,
    quantized_inputs,
    with_quantized_weights,
)
from minformers.support import data


@lru_cache(maxsize=1)
def smollm2():
    return read_gguf(data.smollm2_gguf())


def tensors_of_type(ggml_type: int, names=("token_embd", "blk.0.", "blk.29.")):
    return [t for name, t in smollm2().tensors.items() if t.ggml_type == ggml_type and name.startswith(names)]


@pytest.mark.parametrize("ggml_type", [Q8_0, Q4_1])
def test_our_reading_of_gguf_blocks_is_the_gguf_package_s_bit_for_bit(ggml_type):
    tensors = tensors_of_type(ggml_type)
    assert tensors, "SmolLM2's file should hold tensors of this type"
    for tensor in tensors:
        theirs = gguf.dequantize(tensor.data, gguf.GGMLQuantizationType(ggml_type))
        ours = dequantize_gguf(tensor.data, ggml_type)
        assert ours.dtype == torch.float32 and ours.shape == theirs.shape
        assert np.array_equal(ours.numpy().view(np.uint32), theirs.astype(np.float32).view(np.uint32)), tensor.name


def file_codes_q8_0(raw: np.ndarray) -> torch.Tensor:
    blocks = torch.tensor(raw).reshape(raw.shape[0], -1, BLOCK_BYTES[Q8_0])
    return blocks[..., 2:].contiguous().view(torch.int8)


def file_codes_q4_1(raw: np.ndarray) -> torch.Tensor:
    blocks = torch.tensor(raw).reshape(raw.shape[0], -1, BLOCK_BYTES[Q4_1])
    return torch.cat([blocks[..., 4:] & 0x0F, blocks[..., 4:] >> 4], dim=-1)


def test_absmax_over_blocks_of_32_gives_back_the_files_q8_0_codes():
    # llama.cpp picked each block's scale from its largest magnitude, as ours does: quantizing the weights the file
    # stands for must find the same scales, and so the same codes
    (embedding,) = tensors_of_type(Q8_0, ("token_embd",))
    ours = absmax_int8(dequantize_gguf(embedding.data, Q8_0), per="group", group_size=BLOCK)
    assert torch.equal(ours.codes, file_codes_q8_0(embedding.data))


def test_affine_4_bit_over_blocks_of_32_gives_back_the_files_q4_1_codes():
    for tensor in tensors_of_type(Q4_1, ("blk.0.",)):
        ours = affine(dequantize_gguf(tensor.data, Q4_1), bits=4, group_size=BLOCK)
        assert torch.equal(ours.codes, file_codes_q4_1(tensor.data)), tensor.name


def test_bits_per_weight_are_gguf_s_block_sizes():
    weight = torch.randn(4, 64)
    assert absmax_int8(weight, per="group", group_size=BLOCK).bits_per_weight() == 8 * BLOCK_BYTES[Q8_0] / BLOCK
    assert affine(weight, bits=4, group_size=BLOCK).bits_per_weight() == 8 * BLOCK_BYTES[Q4_1] / BLOCK


@pytest.mark.parametrize("quantize", [
    lambda w: absmax_int8(w, "tensor"), lambda w: absmax_int8(w, "channel"),
    lambda w: absmax_int8(w, "group", 16), lambda w: affine(w, 4, 16), lambda w: affine(w, 2, 8),
    lambda w: affine(w, 8, 64),
])
def test_each_weight_comes_back_within_half_a_step_of_its_group(quantize):
    torch.manual_seed(0)
    weight = torch.randn(6, 64) * torch.rand(6, 1) * 3
    quantized = quantize(weight)
    error = (quantized.dequantize() - weight).abs().reshape(quantized.codes.shape)
    assert (error <= quantized.scale / 2 * (1 + 1e-5) + 1e-7).all()


def test_an_outlier_costs_its_row_under_per_channel_scales_and_every_row_under_one_scale():
    torch.manual_seed(1)
    weight = torch.randn(8, 32) * 0.02
    weight[3, 5] = 4.0  # one weight 200 times the others
    per_tensor = (absmax_int8(weight, "tensor").dequantize() - weight).abs().mean(1)
    per_channel = (absmax_int8(weight, "channel").dequantize() - weight).abs().mean(1)
    others = [row for row in range(8) if row != 3]
    assert (per_channel[others] * 10 < per_tensor[others]).all()
    assert per_channel[3] == pytest.approx(per_tensor[3])


def test_constant_groups_under_affine_codes_and_zero_groups_under_absmax_come_back_exactly():
    weight = torch.zeros(2, 32)
    weight[1] = 0.7  # a range of 0: scale 0, every code 0, the minimum is the value
    assert torch.equal(affine(weight, 3, 8).dequantize(), weight)
    assert torch.equal(absmax_int8(torch.zeros(2, 32), "channel").dequantize(), torch.zeros(2, 32))


@pytest.mark.parametrize(("call", "match"), [
    (lambda: absmax_int8(torch.ones(3)), "rows, columns"),
    (lambda: absmax_int8(torch.ones(2, 30), "group", 32), "do not split"),
    (lambda: absmax_int8(torch.ones(2, 32), "block"), "per must be"),
    (lambda: absmax_int8(torch.ones(2, 32), "group"), "needs a group_size"),
    (lambda: affine(torch.ones(2, 32), 0, 8), "bits must be"),
    (lambda: dequantize_gguf(np.zeros((2, 34), np.uint8), 2), "neither Q8_0"),
    (lambda: dequantize_gguf(np.zeros((2, 33), np.uint8), Q8_0), "34-byte blocks"),
])
def test_impossible_requests_say_what_is_wrong(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_model_with_quantized_weights_computes_with_the_codes_values_and_keeps_ties():
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32, bias=False))
    tied = torch.nn.Linear(32, 64)
    tied.weight = model[0].weight  # two modules, one weight: quantized once, still one afterwards
    model.append(tied)
    original = [p.detach().clone() for p in model.parameters()]
    quantize = lambda w: affine(w, bits=3, group_size=16)  # noqa: E731
    quantized = with_quantized_weights(model, quantize)
    assert quantized[3].weight is quantized[0].weight
    x = torch.randn(5, 32)
    first = torch.nn.functional.linear(x, quantize(model[0].weight.detach()).dequantize(), model[0].bias)
    torch.testing.assert_close(quantized[0](x), first, rtol=0, atol=0)
    assert all(torch.equal(p, o) for p, o in zip(model.parameters(), original, strict=True)), "the original changed"


def linear_inputs_under_quantized_inputs(model: torch.nn.Module, ids: torch.Tensor) -> dict[str, int]:
    """How many times each nn.Linear of ``model`` ran on exactly the tensor ``quantize`` returned for it, in one
    forward under ``quantized_inputs``: a forward hook, which sees the input after the pre-hooks, compares."""
    returned, counts = {}, {}

    def quantize(name, x):
        returned[name] = int8_activations(x, "tensor")
        return returned[name]

    def count(name):
        def hook(module, inputs, output):
            if inputs[0] is returned.get(name):
                counts[name] = counts.get(name, 0) + 1

        return hook

    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    with quantized_inputs(model, quantize), torch.no_grad():
        handles = [module.register_forward_hook(count(name)) for name, module in linears.items()]
        model(ids)
    for handle in handles:
        handle.remove()
    return counts


def test_quantized_inputs_reach_every_linear_layer_of_our_gpt_and_bert_q_k_and_v_included():
    ids = torch.randint(0, 41, (2, 9), generator=torch.Generator().manual_seed(3))
    gpt = GPT(GPTConfig.tiny(vocab_size=41, n_layers=2)).eval()  # the output head is the embedding, no nn.Linear
    bert = BertForPreTraining(BertConfig.tiny(vocab_size=41)).eval()  # 2 layers
    # per layer q, k, v, out and the feed-forward's up and down; BERT adds the pooler, the NSP head and the MLM
    # head's dense layer and decoder
    for model, linears in ((gpt, 6 * 2), (bert, 6 * 2 + 4)):
        counts = linear_inputs_under_quantized_inputs(model, ids)
        names = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        assert len(names) == linears
        assert counts == dict.fromkeys(names, 1)  # each ran once, on its quantized input
        for layer in range(2):
            assert {f"layers.{layer}.attention.{p}_proj" for p in "qkv"} <= {n.removeprefix("bert.") for n in counts}
