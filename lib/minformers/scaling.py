"""Scaling laws: what a GPT costs to train, and power laws fitted to the losses
of a sweep.

The cost formulas and the two fitted laws are one chapter's mathematics, kept together
with the bootstrap behind their intervals.

Compute. A training step multiplies every token by every weight matrix three times
(forward, and twice backward: once for the activations' gradient, once for the
weights'), 2 FLOPs per multiply-add, hence Kaplan et al.'s C ~ 6ND for N parameters and
D tokens. ``training_flops_per_token`` adds what 6N leaves out at small scale: the
output layer (C x V) and attention's scores and weighted sum, which grow with the
context T.

Fits. Following Hoffmann et al. (2022), a law is fitted in log space with a Huber loss
(robust to a stray run):

    L(N)    = E + A / N^alpha
    L(D)    = E + B / D^beta
    L(N, D) = E + A / N^alpha + B / D^beta

with E = exp(e), A = exp(a), B = exp(b), so that log L-hat is a log-sum-exp of linear
terms. Many starting points are optimised at once (the problem has local minima), the
best is polished with L-BFGS, and a bootstrap over runs gives the parameters'
uncertainty. From the joint law and C = 6ND, the compute-optimal split of a budget C is
closed form.

    >>> # Hoffmann et al.'s fit
    >>> law = JointLaw(E=1.69, A=406.4, alpha=0.34, B=410.7, beta=0.28)
    >>> n, d = law.compute_optimal(5.76e23)  # Chinchilla's budget
    >>> f"{n:.1e} parameters, {d:.1e} tokens"
    '3.2e+10 parameters, 3.0e+12 tokens'
"""

import math
from dataclasses import dataclass, fields

import numpy as np
import torch

from minformers.gpt import GPTConfig

# Hoffmann et al.'s delta: residuals of log L above 0.1% count linearly, not squared
HUBER_DELTA = 1e-3


def non_embedding_parameters(config: GPTConfig) -> int:
    """Kaplan et al.'s N: the parameters of the transformer blocks and final norm,
    without the token and position embeddings (which cost a lookup, not a matrix
    product).

    >>> config = GPTConfig(
    ...     n_layers=1, d_model=4, n_heads=1, d_ff=16, vocab_size=10, max_len=8
    ... )
    >>> non_embedding_parameters(config)
    252

    That is 4 x (4 x 4 + 4) for attention's projections, 4 x 16 + 16 + 16 x 4 + 4 for
    the feed-forward, and 2 x 8 + 8 for three LayerNorms' gains and shifts.
    """
    d, f = config.d_model, config.d_ff
    attention = 4 * (d * d + d)
    feed_forward = 2 * d * f + f + d
    norms = 2 * (2 * d) * config.n_layers + (2 * d if config.norm_first else 0)
    return config.n_layers * (attention + feed_forward) + norms


def training_flops_per_token(config: GPTConfig, context: int | None = None) -> int:
    """FLOPs of one training step per token, as our GPT computes them
    (``measure.training_flops`` counts the same): the 6N of Kaplan et al., plus
    attention's scores and weighted sum,

        6 x (matrix weights of the blocks + the tied output layer's C x V)
      + 6 x 2 x n_layers x T x C

    Attention computes all T x T scores and masks the future afterwards, so it is
    counted for the full context; Kaplan et al. count half, for a kernel that skips the
    masked half. Biases, norms and softmax are left out.

    >>> config = GPTConfig(
    ...     n_layers=1, d_model=4, n_heads=1, d_ff=16, vocab_size=10, max_len=8
    ... )
    >>> training_flops_per_token(config)
    1776
    """
    T = config.max_len if context is None else context
    d = config.d_model
    matrices = (
        config.n_layers * (4 * d * d + 2 * d * config.d_ff) + d * config.vocab_size
    )
    attention = config.n_layers * 2 * T * d
    return 6 * (matrices + attention)


def _positive_array(name: str, values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or not np.all(np.isfinite(array)) or not np.all(array > 0):
        raise ValueError(
            f"{name} must be a 1-D sequence of positive finite numbers, got {values!r}"
        )
    return array


@dataclass(frozen=True)
class PowerLaw:
    """L(x) = E + A / x^alpha: loss against one resource x (parameters N, or tokens D)
    with the other plentiful."""

    # the irreducible loss: what no amount of x removes
    # (the text's entropy, plus other limits)
    E: float
    A: float  # scale of the reducible part
    # how fast the reducible part shrinks: doubling x multiplies it by 2^-alpha
    alpha: float

    def __call__(self, x):
        return self.E + self.A / np.asarray(x, dtype=np.float64) ** self.alpha


@dataclass(frozen=True)
class JointLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, their eq. 2)."""

    E: float  # irreducible loss
    A: float  # scale of the loss due to a finite model
    alpha: float  # its exponent in parameters N
    B: float  # scale of the loss due to finite data
    beta: float  # its exponent in tokens D

    def __call__(self, n, d):
        n, d = np.asarray(n, dtype=np.float64), np.asarray(d, dtype=np.float64)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def compute_optimal(self, compute):
        """(N*, D*) minimising L(N, D) under 6ND = ``compute``
        (Hoffmann et al.'s eq. 4):

            N* = G (C/6)^a,  D* = (C/6)^b / G,
            G = (alpha A / (beta B))^(1/(alpha+beta)),
            a = beta / (alpha + beta),  b = alpha / (alpha + beta).
        """
        budget = np.asarray(compute, dtype=np.float64) / 6
        if not np.all(budget > 0):
            raise ValueError(f"compute must be > 0, got {compute!r}")
        total = self.alpha + self.beta
        scale = (self.alpha * self.A / (self.beta * self.B)) ** (1 / total)
        return scale * budget ** (self.beta / total), budget ** (
            self.alpha / total
        ) / scale

    def allocation_exponents(self) -> tuple[float, float]:
        """(a, b) in N* ~ C^a and D* ~ C^b; they add up to 1."""
        return self.beta / (self.alpha + self.beta), self.alpha / (
            self.alpha + self.beta
        )


def _huber(residual: torch.Tensor, delta: float) -> torch.Tensor:
    small = residual.abs() <= delta
    return torch.where(small, 0.5 * residual**2, delta * (residual.abs() - 0.5 * delta))


def _objective(
    params: torch.Tensor,
    logs: list[torch.Tensor],
    log_loss: torch.Tensor,
    weights: torch.Tensor,
    delta: float,
) -> torch.Tensor:
    """Weighted Huber loss of log L-hat - log L for each row of ``params`` (S, 1 + 2K):
    e, then (a, alpha) per resource, with ``weights`` (S, n) per run. Returns (S,): S
    independent problems, optimised together."""
    terms = [params[:, :1]]  # (S, 1): log E
    for k, log_x in enumerate(logs):  # each (n,): log N or log D
        # (S, n): log(A / x^alpha)
        terms.append(params[:, 1 + 2 * k, None] - params[:, 2 + 2 * k, None] * log_x)
    # (S, n)
    predicted = torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0)
    return (weights * _huber(predicted - log_loss, delta)).sum(dim=1)


def _starting_point(
    resources: list[np.ndarray],
    loss: np.ndarray,
    delta: float,
    weights: np.ndarray | None = None,
) -> torch.Tensor:
    """Where to start L-BFGS: for fixed exponents the law is linear in E, A and B, so
    try every exponent on a grid (0.02 to 1.5), solve least squares for the scales (each
    run weighted by 1 / loss, i.e. in relative error), and keep the combination whose
    Huber objective in log space is lowest. The problem has local minima, and a grid
    over exponents covers them without a grid over scales."""
    grid = np.linspace(0.02, 1.5, 75)
    # (P, K)
    exponents = (
        np.array(np.meshgrid(*[grid] * len(resources), indexing="ij"))
        .reshape(len(resources), -1)
        .T
    )
    columns = [np.ones((len(exponents), len(loss)))]
    for k, x in enumerate(resources):
        # (P, n): x^-exponent for every candidate
        columns.append(x[None, :] ** -exponents[:, k, None])
    weights = (
        np.ones(len(loss)) if weights is None else np.asarray(weights, dtype=np.float64)
    )
    # each row in relative error, and counted as often as its weight says
    scale = np.sqrt(weights) / loss
    design = np.stack(columns, axis=2) * scale[None, :, None]  # (P, n, 1 + K)
    target = torch.from_numpy(
        np.broadcast_to(
            np.sqrt(weights)[None, :, None], (len(exponents), len(loss), 1)
        ).copy()
    )
    # (P, 1 + K)
    scales = (
        torch.linalg.lstsq(torch.from_numpy(design), target).solution[..., 0].numpy()
    )
    # a negative scale has no log: start it near 0 instead
    scales = np.clip(scales, 1e-8, None)
    params = [np.log(scales[:, 0])]
    for k in range(len(resources)):
        params += [np.log(scales[:, 1 + k]), exponents[:, k]]
    params = torch.from_numpy(np.stack(params, axis=1))  # (P, 1 + 2K)
    logs = [torch.from_numpy(np.log(x)) for x in resources]
    objectives = _objective(
        params,
        logs,
        torch.from_numpy(np.log(loss)),
        torch.from_numpy(weights)[None],
        delta,
    )
    return params[torch.nan_to_num(objectives, nan=math.inf).argmin()]


def _polish(
    start: torch.Tensor,
    logs,
    log_loss,
    weights: torch.Tensor,
    delta: float,
    max_iter: int = 500,
) -> torch.Tensor:
    """L-BFGS from one starting point, with one weight per run, to full precision
    (or ``max_iter`` iterations)."""
    params = start.clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [params],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-12,
        tolerance_change=1e-14,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimizer.zero_grad()
        value = _objective(params[None], logs, log_loss, weights[None], delta).sum()
        value.backward()
        return value

    optimizer.step(closure)
    return params.detach()


def _fit(resources: list[np.ndarray], loss: np.ndarray, delta: float) -> torch.Tensor:
    logs = [torch.from_numpy(np.log(x)) for x in resources]
    start = _starting_point(resources, loss, delta)
    return _polish(
        start,
        logs,
        torch.from_numpy(np.log(loss)),
        torch.ones(len(loss), dtype=torch.float64),
        delta,
    )


def _checked(
    loss, *resources: tuple[str, object], n_parameters: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    loss = _positive_array("loss", loss)
    arrays = [_positive_array(name, values) for name, values in resources]
    for (name, _), array in zip(resources, arrays, strict=True):
        if len(array) != len(loss):
            raise ValueError(
                f"{name} and loss must have the same length, got {len(array)} and "
                f"{len(loss)}"
            )
    if len(loss) <= n_parameters:
        raise ValueError(
            f"need more than {n_parameters} runs to fit {n_parameters} parameters, got "
            f"{len(loss)}"
        )
    return loss, arrays


def _as_law(law_class, params: list[float]):
    """Parameters in the fitted space -> a law: log E, then the log scale and the
    exponent of each resource."""
    e, *pairs = params
    names = [field.name for field in fields(law_class)][1:]
    values = {"E": math.exp(e)}
    for index, name in enumerate(names):
        values[name] = math.exp(pairs[index]) if index % 2 == 0 else pairs[index]
    return law_class(**values)


def _as_params(law) -> list[float]:
    values = [getattr(law, field.name) for field in fields(law)]
    return [math.log(values[0])] + [
        math.log(v) if i % 2 == 0 else v for i, v in enumerate(values[1:])
    ]


def fit_power_law(x, loss, delta: float = HUBER_DELTA) -> PowerLaw:
    """Fit L(x) = E + A / x^alpha to (x, loss) pairs.

    >>> x = [1e3, 1e4, 1e5, 1e6]
    >>> loss = PowerLaw(E=1.5, A=20.0, alpha=0.35)(x) * [1.001, 0.999, 1.0, 1.0]
    >>> law = fit_power_law(x, loss)
    >>> round(law.alpha, 2), round(law.E, 2)
    (0.35, 1.5)
    """
    loss, (x,) = _checked(loss, ("x", x), n_parameters=3)
    return _as_law(PowerLaw, _fit([x], loss, delta).tolist())


def fit_joint_law(n, d, loss, delta: float = HUBER_DELTA) -> JointLaw:
    """Fit L(N, D) = E + A / N^alpha + B / D^beta to runs of N parameters trained
    on D tokens."""
    loss, (n, d) = _checked(loss, ("n", n), ("d", d), n_parameters=5)
    return _as_law(JointLaw, _fit([n, d], loss, delta).tolist())


def bootstrap(
    law,
    resources: list,
    loss,
    samples: int = 200,
    seed: int = 0,
    delta: float = HUBER_DELTA,
    max_iter: int = 100,
) -> dict[str, np.ndarray]:
    """The spread of a fit's parameters: refit ``samples`` times on the runs drawn with
    replacement (each draw gives a run a weight: how often it was drawn). Each refit
    starts from the better of ``law`` (the fit on all runs) and the grid's best point
    for the resampled runs, so a resample may leave the full fit's basin. Returns
    {parameter name: array of its ``samples`` refitted values}.

    ``resources`` is [x] for a PowerLaw and [n, d] for a JointLaw.
    """
    loss, arrays = _checked(
        loss,
        *((f"resources[{i}]", r) for i, r in enumerate(resources)),
        n_parameters=len(fields(law)),
    )
    rng = np.random.default_rng(seed)
    # (S, n) counts
    draws = rng.multinomial(len(loss), np.full(len(loss), 1 / len(loss)), size=samples)
    logs, log_loss = (
        [torch.from_numpy(np.log(x)) for x in arrays],
        torch.from_numpy(np.log(loss)),
    )
    fitted = torch.tensor(_as_params(law), dtype=torch.float64)
    refits = []
    for counts in draws:
        weights = torch.from_numpy(counts).double()
        # (2, 1 + 2K)
        starts = torch.stack([fitted, _starting_point(arrays, loss, delta, counts)])
        start = starts[
            _objective(starts, logs, log_loss, weights[None], delta).argmin()
        ]
        refits.append(
            _as_law(
                type(law),
                _polish(start, logs, log_loss, weights, delta, max_iter).tolist(),
            )
        )
    return {
        field.name: np.array([getattr(refit, field.name) for refit in refits])
        for field in fields(law)
    }


def isoflop_profile(
    parameters, flops_per_token, tokens, loss, compute: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One IsoFLOP profile read off a grid of runs (Hoffmann et al.'s second approach):
    for each size N, its final losses interpolated linearly in log D at the tokens
    D = ``compute`` / its FLOPs per token. The arguments are per run; a size whose
    budgets do not bracket that D is left out, so a profile holds no extrapolation.
    Returns (N, D, loss), one entry per size, in increasing N.

    >>> n, d = [10, 10, 20, 20], [100, 400, 100, 400]
    >>> isoflop_profile(n, [6, 6, 12, 12], d, [2.0, 1.0, 1.8, 1.2], compute=1200)
    (array([10., 20.]), array([200., 100.]), array([1.5, 1.8]))
    """
    n = _positive_array("parameters", parameters)
    per_token = _positive_array("flops_per_token", flops_per_token)
    d, values = _positive_array("tokens", tokens), np.asarray(loss, dtype=np.float64)
    sizes, wanted_tokens, losses = [], [], []
    for size in np.unique(n):
        chosen = n == size
        order = np.argsort(d[chosen])
        budgets, ordered = d[chosen][order], values[chosen][order]
        wanted = compute / per_token[chosen][0]
        if budgets[0] <= wanted <= budgets[-1]:
            sizes.append(size)
            wanted_tokens.append(wanted)
            losses.append(np.interp(np.log(wanted), np.log(budgets), ordered))
    return np.array(sizes), np.array(wanted_tokens), np.array(losses)


def profile_minimum(n, d, loss) -> tuple[float, float] | None:
    """(N*, D*) of one IsoFLOP profile: the vertex of a parabola in log N fitted to its
    losses, with D* read off the profile's tokens at N*. None when the profile has
    fewer than 3 sizes, when the parabola has no minimum, or when the vertex lies
    outside the sizes measured (the optimum was not bracketed).

    >>> n = np.array([1.0, 10.0, 100.0])
    >>> profile_minimum(n, 1000 / n, (np.log10(n) - 1) ** 2 + 2)
    (10.0, 100.0)
    """
    n, d, loss = (np.asarray(x, dtype=np.float64) for x in (n, d, loss))
    if len(n) < 3:
        return None
    curvature, slope, _ = np.polyfit(np.log(n), loss, 2)
    if curvature <= 0:
        return None
    log_best = -slope / (2 * curvature)
    if not np.log(n.min()) <= log_best <= np.log(n.max()):
        return None
    tokens = np.exp(np.interp(log_best, np.log(n), np.log(d)))
    return float(np.round(np.exp(log_best), 9)), float(np.round(tokens, 9))
