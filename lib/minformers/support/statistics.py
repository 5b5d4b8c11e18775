"""Is a difference more than noise? Small tools the course's comparisons share.

- ``mcnemar``: two classifiers scored on the same examples. Only the examples on which
  they disagree carry information; under "equally good", each disagreement is a fair
  coin, so the count that one model alone got right is Binomial(disagreements, 1/2).
  The exact two-sided p-value is read from that binomial.
- ``mean_interval``: a few seeds of one quantity (say, one model's accuracy minus
  another's, seed by seed): their mean and the half-width of a Student-t confidence
  interval, wide on purpose when there are only 3 seeds.
- ``compare_over_seeds``: both at once, for two settings trained with the same seeds
  and scored on the same examples, and a reading of the two together.
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


@dataclass(frozen=True)
class SeedComparison:
    differences: list[float]  # accuracy of A minus that of B, seed by seed
    p_values: list[float]  # McNemar's exact p, seed by seed
    mean: float  # of the differences
    low: float  # the 95% Student-t interval of the mean over seeds
    high: float

    def reading(self) -> str:
        """The two tests read together. Across seeds, the interval says whether the
        difference survives another initialisation and batch order; per seed, McNemar
        says whether it would survive another draw of examples."""
        significant = sum(p < 0.05 for p in self.p_values)
        if self.low <= 0 <= self.high:
            return "the seed interval includes zero: not distinguishable from noise"
        if 2 * significant > len(self.p_values):
            return "a real difference at this budget, across seeds and beyond these examples"
        return (
            "consistent across seeds, but in most seeds within what the examples can "
            "resolve: likely, not established"
        )

    def describe(self) -> str:
        significant = sum(p < 0.05 for p in self.p_values)
        return (
            f"{self.mean:+.1%} (seed interval {self.low:+.1%} to {self.high:+.1%}; "
            f"McNemar p < 0.05 in {significant} of {len(self.p_values)} seeds): "
            f"{self.reading()}"
        )


def compare_over_seeds(correct_a: Sequence, correct_b: Sequence) -> SeedComparison:
    """Setting A against setting B, trained with the same seeds (``correct_a[i]`` and
    ``correct_b[i]`` share seed
    i) and scored on the same examples: each item is one run's right/wrong flags, in the
    same order of examples.

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
    mean, half_width = mean_interval(differences)
    return SeedComparison(
        differences,
        [mcnemar(a, b).p_value for a, b in pairs],
        mean,
        mean - half_width,
        mean + half_width,
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
