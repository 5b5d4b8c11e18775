import math

import pytest
import torch

from minformers.support.statistics import (
    compare_over_seeds,
    mcnemar,
    mean_difference_interval,
    mean_interval,
    paired_bootstrap,
    speedup_interval,
    t_quantile,
    wilson_interval,
)


def test_mcnemar_counts_only_disagreements_and_matches_a_hand_computed_binomial():
    # A alone right on 3 examples, B alone on 10, both right on 4, both wrong on 2 (the agreements do not count).
    correct_a = [1] * 3 + [0] * 10 + [1] * 4 + [0] * 2
    correct_b = [0] * 3 + [1] * 10 + [1] * 4 + [0] * 2
    result = mcnemar(correct_a, correct_b)
    assert (result.a_only, result.b_only) == (3, 10)
    # P(X <= 3) for X ~ Binomial(13, 1/2) is (1 + 13 + 78 + 286) / 8192; two-sided doubles it.
    assert result.p_value == pytest.approx(2 * 378 / 8192, abs=1e-12)
    assert mcnemar(correct_b, correct_a).p_value == result.p_value  # symmetric


def test_mcnemar_is_one_when_the_models_never_disagree_or_split_evenly():
    assert mcnemar([True, False], [True, False]).p_value == 1.0
    assert mcnemar([1, 0, 1, 0], [0, 1, 0, 1]).p_value == 1.0


def test_mcnemar_rejects_flags_of_different_examples():
    with pytest.raises(ValueError, match="same examples"):
        mcnemar([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="0/1"):
        mcnemar([1, 2], [1, 0])


@pytest.mark.parametrize(("probability", "dof", "table_value"), [
    (0.975, 1, 12.706205), (0.975, 2, 4.302653), (0.975, 4, 2.776445), (0.95, 10, 1.812461)])
def test_t_quantile_matches_printed_tables(probability, dof, table_value):
    assert t_quantile(probability, dof) == pytest.approx(table_value, abs=1e-5)


def test_mean_interval_by_hand():
    mean, half_width = mean_interval([2.0, 4.0, 9.0])  # mean 5, sample sd sqrt(13)
    assert mean == 5.0
    assert half_width == pytest.approx(4.302653 * math.sqrt(13) / math.sqrt(3), abs=1e-4)
    with pytest.raises(ValueError, match="at least 2"):
        mean_interval([1.0])


def test_compare_over_seeds_reads_both_tests_together():
    # seed by seed: A alone right on 12 examples of 40 and B alone on 0, so McNemar's p = 2 x (1/2)^12 < 0.05
    a = [[1] * 12 + [0] * 28, [1] * 12 + [0] * 28, [1] * 13 + [0] * 27]
    b = [[0] * 40, [0] * 40, [0] * 40]
    comparison = compare_over_seeds(a, b)
    assert comparison.differences == pytest.approx([0.3, 0.3, 0.325])
    assert comparison.p_values[0] == pytest.approx(2 * 0.5**12)
    assert (comparison.mean, comparison.low, comparison.high) == paired_bootstrap(a, b)
    assert 0 < comparison.low < comparison.mean < comparison.high <= 1
    assert comparison.reading().startswith("a real difference")
    # a difference of one example per seed, alternating in sign: the interval straddles zero
    noisy = compare_over_seeds([[1, 0], [0, 0], [1, 0]], [[0, 0], [1, 0], [0, 0]])
    assert noisy.reading().startswith("the interval includes zero")
    # the same sign every seed, but too few disagreements for McNemar: likely, not established
    # (A alone right on 3 of 20 examples per seed, other ones each seed: McNemar's p = 2 x (1/2)^3 = 0.25)
    small = compare_over_seeds([[0] * 3 * seed + [1] * 3 + [0] * (17 - 3 * seed) for seed in range(3)], [[0] * 20] * 3)
    assert small.low > 0
    assert small.reading().startswith("consistent across seeds") and "McNemar p < 0.05 in 0 of 3" in small.describe()
    with pytest.raises(ValueError, match="the same seeds"):
        compare_over_seeds(a, b[:2])


@pytest.mark.parametrize(("successes", "n", "expected"), [
    # hand-computed from Wilson's formula with z = 1.959964
    (0, 10, (0.0, 0.277533)), (5, 10, (0.236593, 0.763407)), (10, 10, (0.722467, 1.0)),
    (88, 100, (0.801879, 0.930006))])
def test_wilson_interval_by_hand_stays_in_zero_one(successes, n, expected):
    assert wilson_interval(successes, n) == pytest.approx(expected, abs=1e-6)


def test_wilson_interval_rejects_counts_outside_n():
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(11, 10)


def test_paired_bootstrap_stays_in_range_and_is_paired():
    # A right everywhere, B nowhere: the difference is 1 in every resample
    assert paired_bootstrap([[1] * 30], [[0] * 30]) == (1.0, 1.0, 1.0)
    # identical runs: no difference in any resample, however noisy the runs are
    run = [1, 0, 0, 1, 1, 0, 1, 0] * 5
    assert paired_bootstrap([run, run[::-1]], [run, run[::-1]]) == (0.0, 0.0, 0.0)
    # seeds that disagree in sign widen the interval across zero
    difference, low, high = paired_bootstrap([[1] * 20, [0] * 20], [[0] * 20, [1] * 20])
    assert difference == 0.0 and low == -1.0 and high == 1.0
    a, b = [[1, 0] * 20], [[0, 0] * 20]
    assert paired_bootstrap(a, b, seed=3) == paired_bootstrap(a, b, seed=3)  # seeded: two builds print the same
    with pytest.raises(ValueError, match="same seeds and examples"):
        paired_bootstrap([[1, 0]], [[1, 0, 1]])


def test_speedup_interval_is_the_geometric_mean_of_paired_ratios():
    speedup, low, high = speedup_interval([1.0, 4.0], [1.0, 1.0])  # ratios 1 and 4
    assert speedup == pytest.approx(2.0)
    assert low == pytest.approx(1.0) and high == pytest.approx(4.0)
    with pytest.raises(ValueError, match="at least 2 interleaved"):
        speedup_interval([1.0], [1.0])


def test_mean_difference_interval_resamples_real_numbers_paired():
    # a constant shift of 0.5 nats on every example of every run: no resample can move it
    losses = [[3.0, 1.0, 2.0, 5.0], [2.5, 4.0, 1.5, 2.0]]
    shifted = [[value - 0.5 for value in run] for run in losses]
    assert mean_difference_interval(losses, shifted) == pytest.approx((0.5, 0.5, 0.5))
    as_tensors = [torch.tensor(run) for run in losses], [torch.tensor(run) for run in shifted]
    assert mean_difference_interval(*as_tensors) == pytest.approx((0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="same seeds and examples"):
        mean_difference_interval([[1.0, 2.0]], [[1.0]])
