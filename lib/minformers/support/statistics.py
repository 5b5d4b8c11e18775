"""Is a difference more than noise? Small tools the course's comparisons share.

- ``mcnemar``: two classifiers scored on the same examples. Only the examples on which
  they disagree carry information; under "equally good", each disagreement is a fair
  coin, so the count that one model alone got right is Binomial(disagreements, 1/2).
  The exact two-sided p-value is read from that binomial.
- ``wilson_interval``: a proportion's interval (an accuracy on n examples) that stays in
  [0, 1], unlike p +/- 2 standard errors near 0 or 1.
- ``paired_bootstrap``: the difference of two settings' accuracies, trained with the
  same seeds and scored on the same examples; its interval comes from resampling the
  seeds and the examples together, so it stays in [-1, 1] and counts both kinds of
  noise.
- ``proportion_interval``: the same for one setting's accuracy over seeds and examples;
  ``mean_difference_interval`` for per-example numbers that are not flags (losses).
- ``compare_over_seeds``: that interval and McNemar per seed, with a reading of both.
- ``mean_interval``: a few seeds of a quantity that is not a proportion (a loss): their
  mean and the half-width of a Student-t interval, wide on purpose for 3 seeds.
- ``speedup_interval``: how many times faster one method ran than another, from
  interleaved repeated timings, with a bootstrap interval; a speed-up is claimed only
  when the interval clears 1.
- ``chi_square``: Pearson's goodness of fit of counts to probabilities, for a sampler
  that should follow a known distribution.

    >>> # A alone right 5 times, B alone never
    >>> result = mcnemar([1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0])
    >>> result.a_only, result.b_only, round(result.p_value, 4)  # 2 x (1/2)^5
    (5, 0, 0.0625)
    >>> # sd 1, n 3: t(0.975, 2) = 4.303 times 1 / sqrt(3)
    >>> mean, half_width = mean_interval([1.0, 2.0, 3.0])
    >>> mean, round(half_width, 3)
    (2.0, 2.484)
    >>> [round(end, 3) for end in wilson_interval(0, 10)]  # 0 of 10: not [0, 0]
    [0.0, 0.278]
    >>> counts, expected = torch.tensor([30, 20, 50]), torch.tensor([0.3, 0.2, 0.5])
    >>> round(chi_square(counts, expected)[2], 3)  # counts exactly as expected: p = 1
    1.0
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class McNemarResult:
    a_only: int  # examples model A got right and model B got wrong
    b_only: int  # the reverse
    # exact two-sided: the chance of a split at least this uneven if A and B
    # were equally good
    p_value: float

    def describe(self) -> str:
        return f"A alone right on {self.a_only}, B alone on {self.b_only}: McNemar's exact p = {self.p_value:.3g}"


def _as_bool(name: str, values) -> torch.Tensor:
    values = torch.as_tensor(values)
    if values.dim() != 1 or not len(values):
        raise ValueError(
            f"{name} must be a non-empty 1-D sequence of right/wrong flags, got shape "
            f"{tuple(values.shape)}"
        )
    if not bool(((values == 0) | (values == 1)).all()):
        raise ValueError(f"{name} must hold only 0/1 or False/True")
    return values.bool()


def mcnemar(correct_a, correct_b) -> McNemarResult:
    """McNemar's exact test on two models' right/wrong flags for the same examples, in
    the same order."""
    a, b = _as_bool("correct_a", correct_a), _as_bool("correct_b", correct_b)
    if a.shape != b.shape:
        raise ValueError(
            f"correct_a and correct_b must score the same examples, got {len(a)} and "
            f"{len(b)}"
        )
    a_only, b_only = int((a & ~b).sum()), int((b & ~a).sum())
    disagreements, fewer = a_only + b_only, min(a_only, b_only)
    # P(X <= fewer)
    tail = sum(math.comb(disagreements, k) for k in range(fewer + 1)) / 2**disagreements
    return McNemarResult(a_only, b_only, min(1.0, 2 * tail))


def _t_cdf(x: float, dof: int) -> float:
    """P(T <= x) for Student's t with ``dof`` degrees of freedom, x >= 0: 1/2 plus the
    density integrated from 0 to x by Simpson's rule (the density is smooth, so 2,000
    intervals give about 9 digits)."""
    log_scale = (
        math.lgamma((dof + 1) / 2)
        - math.lgamma(dof / 2)
        - 0.5 * math.log(dof * math.pi)
    )
    grid = torch.linspace(0, x, 2001, dtype=torch.float64)
    density = torch.exp(log_scale - (dof + 1) / 2 * torch.log1p(grid**2 / dof))
    weights = torch.ones(2001, dtype=torch.float64)
    weights[1:-1:2], weights[2:-1:2] = 4, 2
    return 0.5 + float((weights * density).sum()) * x / 6000


def t_quantile(probability: float, dof: int) -> float:
    """The x with P(T <= x) = ``probability`` (above 1/2), by bisection:
    t_quantile(0.975, 2) = 4.303."""
    if not 0.5 < probability < 1:
        raise ValueError(f"probability must be in (0.5, 1), got {probability}")
    if isinstance(dof, bool) or not isinstance(dof, int) or dof < 1:
        raise ValueError(f"dof must be an int >= 1, got {dof!r}")
    low, high = 0.0, 1.0
    while _t_cdf(high, dof) < probability:
        high *= 2
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (
            (middle, high) if _t_cdf(middle, dof) < probability else (low, middle)
        )
    return (low + high) / 2


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """The mean of ``values`` (one per seed, say) and the half-width of its
    Student-t ``confidence`` interval."""
    values = [float(value) for value in values]
    if len(values) < 2:
        raise ValueError(
            f"values must hold at least 2 numbers for an interval, got {len(values)}"
        )
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean = sum(values) / len(values)
    # sample sd
    spread = math.sqrt(sum((value - mean) ** 2 for value in values) / (len(values) - 1))
    return mean, t_quantile((1 + confidence) / 2, len(values) - 1) * spread / math.sqrt(
        len(values)
    )


Z_95 = 1.959964  # the standard normal's 97.5% quantile


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval (95% with the default z) for a proportion of
    ``successes`` in ``n``: the p whose test against the observed proportion would not
    reject, which keeps it inside [0, 1] and off a zero width at 0 or n."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p = successes / n
    middle = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, middle - half), min(1.0, middle + half)


def _flag_grid(name: str, runs: Sequence) -> torch.Tensor:
    """Runs (seeds) of right/wrong flags over the same examples -> (seeds, examples)."""
    flags = [_as_bool(name, run) for run in runs]
    if not flags or len({len(run) for run in flags}) != 1:
        raise ValueError(f"{name} must hold one or more runs over the same examples")
    return torch.stack(flags).float()


def paired_bootstrap(
    correct_a: Sequence, correct_b: Sequence, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """A's accuracy minus B's, and its 95% percentile interval: (difference, low, high).

    ``correct_a[i]`` and ``correct_b[i]`` are the right/wrong flags of the runs with
    seed i on the same examples, in the same order. Each resample draws seeds and
    examples with replacement, the same for A and B (the design is paired), and takes
    the mean difference over the drawn grid; with one seed only examples are drawn.

    >>> difference, low, high = paired_bootstrap([[1, 1, 1, 0] * 25], [[1, 0, 1, 0] * 25])
    >>> difference, low > 0
    (0.25, True)
    """
    a, b = _flag_grid("correct_a", correct_a), _flag_grid("correct_b", correct_b)
    return _bootstrap_differences(a, b, resamples, seed)


def mean_difference_interval(
    values_a: Sequence, values_b: Sequence, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """``paired_bootstrap`` for per-example numbers that are not right/wrong flags (a
    loss in nats, say): the mean of A minus B and its 95% interval, resampling seeds and
    examples. ``values_a[i]`` holds run i's numbers, one per example.

    >>> mean_difference_interval([[2.0, 3.0, 4.0]], [[1.0, 2.0, 3.0]])
    (1.0, 1.0, 1.0)
    """
    a, b = _runs_grid(values_a), _runs_grid(values_b)
    if a.dim() != 2 or not a.numel():
        raise ValueError(
            f"values_a must be (runs, examples), got shape {tuple(a.shape)}"
        )
    return _bootstrap_differences(a, b, resamples, seed)


def _runs_grid(values) -> torch.Tensor:
    """Runs of per-example numbers, as lists or as 1-D tensors, -> (runs, examples)."""
    # torch.as_tensor refuses a list of tensors
    if len(values) and isinstance(values[0], torch.Tensor):
        return torch.stack([run.to(torch.float64) for run in values])
    return torch.as_tensor(values, dtype=torch.float64)


def _bootstrap_differences(a, b, resamples: int, seed: int):
    """The mean of a - b, (seeds, examples) each, and its 95% percentile interval over
    resampled seeds and examples."""
    if a.shape != b.shape:
        raise ValueError(
            f"both settings must hold the same seeds and examples, got "
            f"{tuple(a.shape)} and {tuple(b.shape)}"
        )
    differences = a - b  # (seeds, examples)
    seeds, examples = differences.shape
    generator = torch.Generator().manual_seed(seed)
    means = []
    for start in range(0, resamples, 100):  # in chunks: the grid is (chunk, S, N)
        chunk = min(100, resamples - start)
        seed_draw = torch.randint(seeds, (chunk, seeds), generator=generator)
        example_draw = torch.randint(examples, (chunk, examples), generator=generator)
        grid = differences[seed_draw]  # (chunk, S, N)
        grid = grid.gather(2, example_draw[:, None, :].expand(-1, seeds, -1))
        means.append(grid.mean(dim=(1, 2)))
    levels = torch.tensor([0.025, 0.975], dtype=differences.dtype)
    low, high = torch.quantile(torch.cat(means), levels).tolist()
    return differences.mean().item(), low, high


def proportion_interval(
    correct: Sequence, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """One setting's accuracy over its runs (seeds) on the same examples, and its 95%
    interval from resampling seeds and examples: (accuracy, low, high), in [0, 1].

    >>> proportion_interval([[1, 1, 1, 0] * 25])[0]
    0.75
    """
    zeros = [[0] * len(run) for run in correct]
    return paired_bootstrap(correct, zeros, resamples, seed)


def speedup_interval(
    baseline_seconds: Sequence[float],
    method_seconds: Sequence[float],
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """How many times faster the method ran: the geometric mean over repeats of
    baseline / method, and its 95% bootstrap interval over the repeats. Repeat i of
    each must have been timed next to the other (interleaved), so that a slow moment
    of the machine falls on both.

    >>> round(speedup_interval([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])[0], 6)
    2.0
    """
    baseline = torch.as_tensor(baseline_seconds, dtype=torch.float64)
    method = torch.as_tensor(method_seconds, dtype=torch.float64)
    if baseline.shape != method.shape or baseline.dim() != 1 or len(baseline) < 2:
        raise ValueError(
            "need two equal-length sequences of at least 2 interleaved timings, got "
            f"{len(baseline)} and {len(method)}"
        )
    if not bool((baseline > 0).all() and (method > 0).all()):
        raise ValueError("timings must be positive seconds")
    log_ratios = (baseline / method).log()
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(
        len(log_ratios), (resamples, len(log_ratios)), generator=generator
    )
    means = log_ratios[draws].mean(dim=1)
    low, high = torch.quantile(means, torch.tensor([0.025, 0.975], dtype=torch.float64))
    return log_ratios.mean().exp().item(), low.exp().item(), high.exp().item()


@dataclass(frozen=True)
class SeedComparison:
    differences: list[float]  # accuracy of A minus that of B, seed by seed
    p_values: list[float]  # McNemar's exact p, seed by seed
    mean: float  # of the differences
    low: float  # 95% interval, a paired bootstrap over examples and seeds
    high: float

    def reading(self) -> str:
        """The two tests read together. The interval says whether the difference
        survives another draw of seeds and examples; per seed, McNemar says whether it
        would survive another draw of examples."""
        significant = sum(p < 0.05 for p in self.p_values)
        if self.low <= 0 <= self.high:
            return "the interval includes zero: not distinguishable from noise"
        if 2 * significant > len(self.p_values):
            return "a real difference at this budget, across seeds and beyond these examples"
        return (
            "consistent across seeds, but in most seeds within what the examples can "
            "resolve: likely, not established"
        )

    def describe(self) -> str:
        significant = sum(p < 0.05 for p in self.p_values)
        return (
            f"{self.mean:+.1%} (95% interval {self.low:+.1%} to {self.high:+.1%}; "
            f"McNemar p < 0.05 in {significant} of {len(self.p_values)} seeds): "
            f"{self.reading()}"
        )


def compare_over_seeds(correct_a: Sequence, correct_b: Sequence) -> SeedComparison:
    """Setting A against setting B, trained with the same seeds (``correct_a[i]`` and
    ``correct_b[i]`` share seed i) and scored on the same examples: each item is one
    run's right/wrong flags, in the same order of examples.

    >>> comparison = compare_over_seeds(
    ...     [[1, 1, 0, 1], [1, 0, 1, 1]], [[1, 0, 0, 1], [0, 0, 1, 0]]
    ... )
    >>> comparison.differences, round(comparison.mean, 3)
    ([0.25, 0.5], 0.375)
    """
    if len(correct_a) != len(correct_b):
        raise ValueError(
            f"both settings need the same seeds, got {len(correct_a)} and "
            f"{len(correct_b)} runs"
        )
    pairs = [
        (_as_bool("correct_a", a), _as_bool("correct_b", b))
        for a, b in zip(correct_a, correct_b, strict=True)
    ]
    differences = [(a.float().mean() - b.float().mean()).item() for a, b in pairs]
    mean, low, high = paired_bootstrap(correct_a, correct_b)
    return SeedComparison(
        differences, [mcnemar(a, b).p_value for a, b in pairs], mean, low, high
    )


def chi_square(
    counts: torch.Tensor, expected: torch.Tensor
) -> tuple[float, int, float]:
    """Pearson's goodness of fit of ``counts`` (K,) to the probabilities ``expected``
    (K,): (statistic, degrees of freedom, p-value)."""
    counts, expected = (
        counts.double(),
        expected.double() / expected.sum() * counts.sum(),
    )
    statistic = ((counts - expected) ** 2 / expected).sum()
    freedom = len(counts) - 1
    p_value = torch.special.gammaincc(
        torch.tensor(freedom / 2.0, dtype=torch.float64), statistic / 2
    )
    return statistic.item(), freedom, p_value.item()
