"""Positional encodings: values computed by hand, the rotation property, and the max_len limit."""

import math

import pytest
import torch

from minformers.positions import LearnedPositions, SinusoidalPositions, sinusoidal_positions


def test_values_by_hand():
    d = 4
    pe = sinusoidal_positions(3, d)
    assert pe.shape == (3, 4) and pe.dtype == torch.float32
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))  # sin 0, cos 0 on every pair
    expected = {
        (1, 0): math.sin(1),
        (1, 1): math.cos(1),
        (2, 2): math.sin(2 / 10000 ** (2 / d)),
        (2, 3): math.cos(2 / 10000 ** (2 / d)),
        (2, 0): math.sin(2),
    }
    for (pos, channel), value in expected.items():
        assert pe[pos, channel].item() == pytest.approx(value, abs=1e-7)


def test_dot_product_depends_only_on_distance():
    # Each channel pair is (sin a, cos a); <PE[p], PE[p + k]> = sum_i cos(k w_i), whatever p is.
    pe = sinusoidal_positions(40, 16).double()
    for k in (1, 3, 7):
        dots = torch.stack([pe[p] @ pe[p + k] for p in range(0, 30, 5)])
        assert torch.allclose(dots, dots[0].expand_as(dots), atol=1e-5)


def test_shift_is_a_rotation():
    # PE[p + k] = R_k PE[p], R_k block-diagonal with a 2x2 rotation by k w_i on each pair.
    d, k = 8, 3
    pe = sinusoidal_positions(20, d).double()
    frequency = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    rotation = torch.zeros(d, d, dtype=torch.float64)
    for i, w in enumerate(frequency.tolist()):
        c, s = math.cos(k * w), math.sin(k * w)
        # sin(a + b) = sin a cos b + cos a sin b; cos(a + b) = cos a cos b - sin a sin b
        rotation[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, s], [-s, c]])
    assert torch.allclose(pe[:-k] @ rotation.T, pe[k:], atol=1e-6)


def test_sinusoidal_module():
    module = SinusoidalPositions(max_len=10, d_model=6)
    assert torch.equal(module(4), sinusoidal_positions(4, 6))
    assert torch.equal(module(torch.tensor([[2, 3], [0, 9]]))[1, 1], sinusoidal_positions(10, 6)[9])
    assert "table" not in module.state_dict()  # recomputed, never saved


def test_learned_module():
    torch.manual_seed(0)
    module = LearnedPositions(max_len=10, d_model=6)
    assert module(4).shape == (4, 6)
    assert torch.equal(module(3, offset=2), module.embedding.weight[2:5])
    assert list(module.state_dict()) == ["embedding.weight"]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sinusoidal_positions(4, 5), ValueError, "d_model must be even"),
        (lambda: sinusoidal_positions(0, 4), ValueError, "length must be >= 1"),
        (lambda: SinusoidalPositions(8, 4)(9), ValueError, "length 9 needs 9 positions, more than max_len=8"),
        (lambda: SinusoidalPositions(8, 4)(torch.tensor([0, 8])), ValueError, "more than max_len=8"),
        (lambda: SinusoidalPositions(8, 4)(torch.tensor([-1, 2])), ValueError, "positions must be >= 0"),
        (lambda: LearnedPositions(8, 4)(9), ValueError, "max_len=8"),
        (
            lambda: LearnedPositions(8, 4)(4, offset=5),
            ValueError,
            "offset 5 \\+ length 4 needs 9 .*max_len=8",
        ),
        (lambda: LearnedPositions(8, 4)(4, offset=-1), ValueError, "offset must be >= 0"),
        (lambda: LearnedPositions(8, 4)(2.5), TypeError, "length must be an int"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
