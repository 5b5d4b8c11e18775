"""The activation table: functions equal torch's, corrected derivatives equal autograd, corrected ranges equal what
a grid measures, and the source notes' table fails exactly where it is wrong, by the amounts worked out by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from minformers import activations
from minformers.activations import CORRECTIONS, TABLE, Interval, corrected_table, measured_range

GRID = torch.linspace(-8, 8, 1601, dtype=torch.float64)  # includes 0, the kink of the ReLU family
ROWS = [(row, setting) for row in corrected_table() for setting in row.settings]
IDS = [f"{row.name} {setting}" for row, setting in ROWS]


def lambert_w(z: float) -> float:
    """W(z) for z > 0: the w with w e^w = z, by Newton's method."""
    w = 0.5
    for _ in range(50):
        w -= (w * math.exp(w) - z) / (math.exp(w) * (1 + w))
    return w


@pytest.mark.parametrize("row, setting", ROWS, ids=IDS)
def test_function_equals_torch(row, setting):
    torch.testing.assert_close(row.function(GRID, **setting), row.torch_function(GRID, **setting), rtol=0, atol=1e-12)


@pytest.mark.parametrize("row, setting", ROWS, ids=IDS)
def test_corrected_derivative_equals_autograd_of_ours_and_of_torch(row, setting):
    assert activations.derivative_error(row, GRID, **setting) < 1e-12
    x = GRID.clone().requires_grad_(True)
    (theirs,) = torch.autograd.grad(row.torch_function(x, **setting).sum(), x)
    torch.testing.assert_close(row.derivative(GRID, **setting), theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("row, setting", ROWS, ids=IDS)
def test_corrected_range_is_what_a_grid_measures(row, setting):
    stated, measured = row.range(**setting), measured_range(row.function, **setting)
    assert stated.matches(measured), (str(stated), str(measured))


def test_the_printed_table_fails_exactly_where_it_is_wrong():
    wrong = set()
    for row in TABLE:
        for entry in activations.audit(row, GRID):
            claims = {"formula": entry["formula_error"] <= activations.HOLDS,
                      "derivative": entry["derivative_error"] <= activations.HOLDS, "range": entry["range_holds"]}
            wrong |= {(row.name, claim) for claim, holds in claims.items() if not holds}
    assert wrong == {("Swish", "derivative"), ("Swish", "range"), ("GELU", "derivative"), ("GELU", "range")}
    assert set(CORRECTIONS) == {"Swish", "GELU"}


def test_the_printed_derivatives_are_off_by_the_amounts_worked_by_hand():
    # Swish at x = 2: printed e^2 (3 + e^-2) / (1 + e^-2)^2 = 17.97, true e^-2 (3 + e^2) / (1 + e^-2)^2 = 1.091.
    # GELU at x = -1: printed +0.0870, true -0.0830 (0.1588 - 0.2418, with du/dx = 0.79788 x 1.134145).
    two, minus_one = torch.tensor([2.0], dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64)
    assert abs(activations.swish_derivative_as_printed(two).item() - 17.97) < 0.01
    assert abs(activations.swish_derivative(two).item() - 1.0907) < 1e-4
    assert abs(activations.gelu_tanh_derivative_as_printed(minus_one).item() - 0.0870) < 1e-4
    assert abs(activations.gelu_tanh_derivative(minus_one).item() - (-0.0830)) < 1e-4


def test_swish_minimum_is_minus_lambert_w_of_one_over_e_over_beta():
    w = lambert_w(1 / math.e)
    assert abs(w * math.exp(w) - 1 / math.e) < 1e-15 and abs(w - 0.2784645427610738) < 1e-12
    for beta in (0.5, 1.0, 2.0):
        low = CORRECTIONS["Swish"].range(beta=beta).low
        assert abs(low + w / beta) < 1e-12
        x = torch.tensor(-(1 + w) / beta, dtype=torch.float64)  # where the minimum is
        assert abs(activations.swish(x, beta).item() - low) < 1e-12


def test_gelu_minimum_matches_the_known_value():
    exact = activations.lowest_value(activations.gelu, activations.gelu_derivative, -4.0, 0.0)
    assert abs(exact - (-0.16997)) < 1e-5  # x Φ(x) at x ≈ -0.7518
    assert abs(CORRECTIONS["GELU"].range().low - exact) < 1e-4  # the notes' tanh form is close, not equal


def test_derivatives_at_the_kink_follow_torch():
    zero = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    for function, ours in [(F.relu, activations.relu_derivative(zero.detach())),
                           (lambda x: F.leaky_relu(x, 0.2), activations.leaky_relu_derivative(zero.detach(), 0.2)),
                           (lambda x: F.elu(x, 2.0), activations.elu_derivative(zero.detach(), 2.0))]:
        (theirs,) = torch.autograd.grad(function(zero).sum(), zero)
        assert ours.item() == theirs.item()


def test_measured_range_on_hand_made_functions():
    assert measured_range(lambda x: x**2).matches(Interval(0.0, math.inf, closed_low=True))
    assert measured_range(lambda x: -x).matches(Interval(-math.inf, math.inf))
    assert measured_range(lambda x: torch.full_like(x, 3.0)).matches(Interval(3.0, 3.0, True, True))
    assert measured_range(torch.sin).matches(Interval(-1.0, 1.0, True, True), tolerance=1e-6)
    assert measured_range(activations.sigmoid).matches(Interval(0.0, 1.0))  # approached, never reached
    assert not measured_range(activations.relu).matches(Interval(0.0, math.inf))  # 0 is reached: closed


def test_interval_text():
    assert str(Interval(-math.inf, math.inf)) == "(-∞, ∞)"
    assert str(Interval(0.0, 1.0, True, False)) == "[0, 1)"
    assert str(Interval(-0.27846, math.inf, closed_low=True)) == "[-0.2785, ∞)"


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="derivative must change sign between low=1.0 and high=2.0"):
        activations.stationary_point(lambda x: x, 1.0, 2.0)
    with pytest.raises(ValueError, match="extent must be > 30"):
        measured_range(activations.relu, extent=10.0)


def test_every_row_has_its_formulas():
    for row in corrected_table():
        assert row.formula and row.derivative_formula and row.range_formula and row.settings
    assert all(CORRECTIONS[name].note for name in CORRECTIONS)
    assert [row.name for row in TABLE] == [row.name for row in corrected_table()]
