"""Activation quantization (minformers.quantization.int8_activations, quantized_inputs) and the quantization page's
measurements (minformers.recipes.quantization_costs): scales by hand, outlier channels passed through, hooks that
leave no trace, storage counted per weight, and torch's int8 kernel doing what the page says it does."""

import pytest
import torch
import torch.nn.functional as F

from minformers.quantization import affine, int8_activations, quantized_inputs
from minformers.recipes.quantization_costs import (
    held_out_loss,
    input_peaks,
    int8_kernels,
    state_megabytes,
    weight_costs,
    weight_error,
    weight_schemes,
)


def activations():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    x[..., 3] *= 100  # one outlier channel, in every token
    return x


@pytest.mark.parametrize(
    ("per", "largest"),
    [
        ("tensor", lambda x: x.abs().amax()),
        ("token", lambda x: x.abs().amax(-1, keepdim=True)),
        ("channel", lambda x: x.abs().amax((0, 1), keepdim=True)),
    ],
)
def test_int8_activations_round_each_value_to_a_step_of_its_own_scale(per, largest):
    x = activations()
    scale = largest(x) / 127
    values = int8_activations(x, per)
    torch.testing.assert_close(values, (x / scale).round() * scale, rtol=0, atol=1e-6)
    assert ((values - x).abs() <= scale / 2 + 1e-6).all()


@pytest.mark.parametrize("per", ["tensor", "token"])
def test_kept_channels_pass_through_and_the_rest_are_quantized_without_them(per):
    x = activations()
    keep = torch.zeros(8, dtype=torch.bool)
    keep[3] = True
    values = int8_activations(x, per, keep)
    assert torch.equal(values[..., 3], x[..., 3])
    rest = [c for c in range(8) if c != 3]
    torch.testing.assert_close(values[..., rest], int8_activations(x[..., rest], per), rtol=0, atol=0)


def test_an_outlier_channel_costs_the_others_under_one_scale_and_nothing_under_their_own():
    x = activations()
    small = [c for c in range(8) if c != 3]
    error = {per: (int8_activations(x, per) - x)[..., small].abs().mean() for per in ("tensor", "channel")}
    assert error["channel"] * 50 < error["tensor"]


def test_an_unknown_activation_scheme_says_what_is_allowed():
    with pytest.raises(ValueError, match='"tensor", "token" or "channel"'):
        int8_activations(torch.ones(2, 3), "row")


def two_layers():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 64))


def test_quantized_inputs_feed_every_linear_layer_the_quantized_input_and_leave_no_hooks():
    model, x = two_layers(), torch.randn(3, 64)
    quantize = lambda name, inputs: int8_activations(inputs, "tensor")  # noqa: E731
    with quantized_inputs(model, quantize):
        inside = model(x)
    by_hand = model[2](int8_activations(model[1](model[0](int8_activations(x, "tensor"))), "tensor"))
    torch.testing.assert_close(inside, by_hand, rtol=0, atol=0)
    assert torch.equal(model(x), model[2](model[1](model[0](x))))


def test_weight_error_is_the_norm_of_all_changes_over_the_norm_of_all_weights():
    model = two_layers()
    copy = two_layers()
    with torch.no_grad():
        copy[0].weight.copy_(model[0].weight * 1.1)  # 10% off on the first layer only
        copy[2].weight.copy_(model[2].weight)
    norms = [model[0].weight.norm() ** 2, model[2].weight.norm() ** 2]
    expected = (0.01 * norms[0] / sum(norms)).sqrt().item()
    assert weight_error(model, copy) == pytest.approx(expected, rel=1e-5)
    assert weight_error(model, model) == 0


def test_weight_costs_count_codes_and_floats_per_weight_and_the_loss_each_scheme_adds():
    model = torch.nn.Sequential(torch.nn.Embedding(16, 64), torch.nn.Linear(64, 16))
    ids = torch.randint(0, 16, (4, 9), generator=torch.Generator().manual_seed(2))
    costs = weight_costs(model, ids, {"4-bit, 32": lambda w: affine(w, 4, 32), "8-bit, 64": lambda w: affine(w, 8, 64)})
    assert costs["4-bit, 32"][0] == 4 + 2 * 16 / 32  # a float16 scale and minimum for every 32 weights
    assert costs["8-bit, 64"][0] == 8 + 2 * 16 / 64
    assert costs["8-bit, 64"][1] < costs["4-bit, 32"][1]
    quantized = torch.nn.Sequential(model[0], torch.nn.Linear(64, 16))
    with torch.no_grad():
        quantized[1].weight.copy_(affine(model[1].weight, 4, 32).dequantize())
        quantized[1].bias.copy_(model[1].bias)
    change = held_out_loss(quantized, ids) - held_out_loss(model, ids)
    assert costs["4-bit, 32"][2] == pytest.approx(change, abs=1e-6)


def test_the_page_s_schemes_are_named_for_their_bits_and_groups():
    names = list(weight_schemes(bits=(8, 3), group_sizes=(32, 16, None)))
    assert names == [
        "8-bit absmax, per row",
        "8-bit, groups of 32",
        "3-bit, groups of 32",
        "4-bit, groups of 16",
        "4-bit, per row",
    ]


def test_input_peaks_are_each_channel_s_largest_magnitude_over_all_tokens_and_leave_no_hooks():
    model = torch.nn.Sequential(torch.nn.Embedding(16, 8), torch.nn.Linear(8, 16))
    ids = torch.randint(0, 16, (3, 6), generator=torch.Generator().manual_seed(3))
    peaks = input_peaks(model, ids)
    assert list(peaks) == ["1"]
    torch.testing.assert_close(peaks["1"], model[0](ids[:, :-1]).abs().amax((0, 1)))
    assert not model[1]._forward_hooks


def test_torch_s_int8_kernel_is_per_tensor_7_bit_activations_times_per_channel_int8_weights():
    """What the page says the kernel does, done in float: activations affine over the whole tensor in codes 0..127
    (reduce_range) with 0 in range, weights symmetric per output channel with scale max|w| / 127.5."""
    torch.manual_seed(4)
    layer = torch.nn.Sequential(torch.nn.Linear(64, 32))
    kernel, _ = int8_kernels(layer)
    assert type(kernel[0]).__module__.startswith("torch.ao.nn.quantized.dynamic")
    codes, _ = kernel[0]._packed_params._weight_bias()
    weight = layer[0].weight.detach()
    scale = codes.q_per_channel_scales().float()[:, None]
    torch.testing.assert_close(scale, weight.abs().amax(1, keepdim=True) / 127.5)
    # each row's largest weight lands on 127.5 codes, a tie that float rounding sends to 127 or 128
    steps = weight / scale
    ties = (steps.abs() - 127.5).abs() < 1e-3
    assert torch.equal(codes.int_repr().float()[~ties], steps.round()[~ties])
    x = torch.randn(5, 64) * 3 + 1
    low, high = min(x.min().item(), 0.0), max(x.max().item(), 0.0)
    x_scale = (high - low) / 127
    zero = round(-low / x_scale)
    x_read = ((x / x_scale).round() + zero).clamp(0, 127).sub(zero) * x_scale
    simulated = F.linear(x_read, codes.int_repr().float() * scale, layer[0].bias)
    torch.testing.assert_close(kernel(x), simulated, rtol=1e-5, atol=1e-5)


def test_a_spared_layer_stays_float_the_others_are_shared_and_int8_saves_three_quarters_of_the_bytes():
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.Linear(256, 256))
    converted, mixed = int8_kernels(model, spared={"1"})
    assert type(mixed[1]) is torch.nn.Linear and mixed[1] is not model[1]
    assert mixed[0] is converted[0] and type(converted[0]) is not torch.nn.Linear
    assert state_megabytes(converted) < 0.3 * state_megabytes(model)
    x = torch.randn(3, 256)
    torch.testing.assert_close(mixed(x), model[1](converted[0](x)), rtol=0, atol=0)
