"""Activation functions, their derivatives in closed form and their ranges, as one table
of data, with the numerical checks that test every claim in it.

The dozen activations share one file so that they read side by side, each with its
derivative in closed form, which the page checks against autograd.

``TABLE`` is the table of the course's source notes, row by row: for each function the
formula, the derivative and the range it prints, each in LaTeX and as code.
``CORRECTIONS`` replaces the rows whose printed claims do not survive the checks, and
``corrected_table()`` is the table with them applied. The checks:

- ``formula_error``: the printed formula against torch's own function, on a grid;
- ``derivative_error``: the closed-form derivative against autograd on a grid;
- ``measured_range``: the range seen on a grid from -10,000 to 10,000, an ``Interval``;
- ``audit``: all three, for every parameter setting a row lists.

    >>> x = torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)
    >>> swish(x)  # x σ(x)
    tensor([-0.2689,  0.0000,  1.7616], dtype=torch.float64)
    >>> str(measured_range(relu)), str(measured_range(torch.tanh))
    ('[0, ∞)', '(-1, 1)')
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

# √(2/π): the tanh form matches GELU's slope at 0
GELU_TANH_SCALE = math.sqrt(2 / math.pi)
GELU_TANH_CUBIC = 0.044715  # the cubic term of the tanh form (Hendrycks & Gimpel)


# The functions. Each takes a tensor and its parameters by keyword; torch.tanh and
# torch.erf are the primitives.


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    return 1 / (1 + torch.exp(-x))


def tanh_from_exp(x: torch.Tensor) -> torch.Tensor:
    """2 / (1 + e^(-2x)) - 1: tanh written with one exponential, as the notes print it
    (it is 2 σ(2x) - 1)."""
    return 2 / (1 + torch.exp(-2 * x)) - 1


def relu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, 0.0)


def leaky_relu(x: torch.Tensor, slope: float = 0.01) -> torch.Tensor:
    return torch.where(x > 0, x, slope * x)


def prelu(x: torch.Tensor, weight: float = 0.25) -> torch.Tensor:
    """Leaky ReLU whose slope ``weight`` is learned (one per channel in torch; one
    number here). 0.25 is torch's initial value."""
    return torch.where(x > 0, x, weight * x)


def elu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


def swish(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """x σ(βx); β = 1 is SiLU, torch's ``F.silu``."""
    return x * sigmoid(beta * x)


def normal_cdf(x: torch.Tensor) -> torch.Tensor:
    """Φ(x), the standard normal's cumulative distribution."""
    return 0.5 * (1 + torch.erf(x / math.sqrt(2)))


def normal_pdf(x: torch.Tensor) -> torch.Tensor:
    """φ(x), the standard normal's density."""
    return torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """x Φ(x): the input, weighted by the probability that a standard normal
    falls below it."""
    return x * normal_cdf(x)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """½ x (1 + tanh(√(2/π) (x + 0.044715 x³))), the approximation GPT-2 uses."""
    return 0.5 * x * (1 + torch.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x**3)))


# Their derivatives, as the closed forms the table states. At a kink (x = 0) each takes
# the value torch's autograd gives there: the left-hand slope.


def sigmoid_derivative(x: torch.Tensor) -> torch.Tensor:
    return sigmoid(x) * (1 - sigmoid(x))


def tanh_derivative(x: torch.Tensor) -> torch.Tensor:
    return 1 - torch.tanh(x) ** 2


def relu_derivative(x: torch.Tensor) -> torch.Tensor:
    return (x > 0).to(x.dtype)


def leaky_relu_derivative(x: torch.Tensor, slope: float = 0.01) -> torch.Tensor:
    # full_like: the slope in x's precision
    return torch.where(x > 0, 1.0, torch.full_like(x, slope))


def prelu_derivative(x: torch.Tensor, weight: float = 0.25) -> torch.Tensor:
    return torch.where(x > 0, 1.0, torch.full_like(x, weight))


def elu_derivative(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    return torch.where(x > 0, 1.0, elu(x, alpha) + alpha)  # f(x) + α = α eˣ on the left


def swish_derivative_as_printed(x: torch.Tensor) -> torch.Tensor:
    """eˣ (1 + x + e⁻ˣ) / (1 + e⁻ˣ)², the notes' form: the exponentials outside and
    inside the bracket have swapped signs (the true derivative is
    e⁻ˣ (1 + x + eˣ) / (1 + e⁻ˣ)²), so it is e²ˣ times too large for large x."""
    return torch.exp(x) * (1 + x + torch.exp(-x)) / (1 + torch.exp(-x)) ** 2


def swish_derivative(x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """d/dx x σ(βx) = σ(βx) + βx σ(βx)(1 − σ(βx)) = β f(x) + σ(βx)(1 − β f(x))."""
    return beta * swish(x, beta) + sigmoid(beta * x) * (1 - beta * swish(x, beta))


def gelu_derivative(x: torch.Tensor) -> torch.Tensor:
    return normal_cdf(x) + x * normal_pdf(x)


def gelu_tanh_derivative_as_printed(x: torch.Tensor) -> torch.Tensor:
    """½ (1 + tanh u) + ½ x σ(x) (1 − tanh² u), the notes' form: the product rule's
    second term has a stray σ(x) = 1 / (1 + e⁻ˣ) where the chain rule's
    du/dx = √(2/π) (1 + 3 · 0.044715 x²) belongs."""
    tanh = torch.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x**3))
    return 0.5 * (1 + tanh) + 0.5 * x * sigmoid(x) * (1 - tanh**2)


def gelu_tanh_derivative(x: torch.Tensor) -> torch.Tensor:
    tanh = torch.tanh(GELU_TANH_SCALE * (x + GELU_TANH_CUBIC * x**3))
    inner_slope = GELU_TANH_SCALE * (1 + 3 * GELU_TANH_CUBIC * x**2)
    return 0.5 * (1 + tanh) + 0.5 * x * (1 - tanh**2) * inner_slope


# Ranges.


@dataclass(frozen=True)
class Interval:
    """A range of values; ``low``/``high`` may be ∓inf. An end is closed if some finite
    x reaches it.

    >>> str(Interval(-1.0, math.inf, closed_low=True))
    '[-1, ∞)'
    """

    low: float
    high: float
    closed_low: bool = False
    closed_high: bool = False

    def __str__(self) -> str:
        def end(value: float) -> str:
            return (
                "∞"
                if value == math.inf
                else "-∞"
                if value == -math.inf
                else f"{value:.4g}"
            )

        return f"{'[' if self.closed_low else '('}{end(self.low)}, {end(self.high)}{']' if self.closed_high else ')'}"

    def matches(self, other: "Interval", tolerance: float = 1e-6) -> bool:
        """The same ends (to ``tolerance``) and the same ends closed."""

        def same(a: float, b: float) -> bool:
            return a == b if math.isinf(a) or math.isinf(b) else abs(a - b) <= tolerance

        return (
            same(self.low, other.low)
            and same(self.high, other.high)
            and (self.closed_low, self.closed_high)
            == (other.closed_low, other.closed_high)
        )


# "reached at a finite x" is judged on |x| <= 15, where no function here has saturated
# in float64 (tanh(15) = 1 - 2e-13); beyond about |x| = 20, tanh and σ round to their
# limits and would look reached.
REACH = 15.0


def _grid(extent: float) -> torch.Tensor:
    """float64 points: every 0.001 on [-15, 15], then 2,000 more spread geometrically
    out to ±extent."""
    near = torch.linspace(-REACH, REACH, 30_001, dtype=torch.float64)
    far = torch.logspace(
        math.log10(REACH), math.log10(extent), 1_000, dtype=torch.float64
    )
    return torch.cat([-far.flip(0), near, far])


def measured_range(
    function: Callable[..., torch.Tensor], extent: float = 1e4, **parameters
) -> Interval:
    """The range of ``function`` as a grid from -extent to extent sees it.

    The low end is -∞ when f still falls by more than 1 from ±extent/2 to ±extent (the
    high end: +∞ when it still rises); otherwise it is the extreme value on the grid
    (within about 1e-7 of the true one: the grid steps by 0.001 near 0), and it is
    closed when a point with |x| <= 15 reaches it.

    >>> str(measured_range(sigmoid)), str(measured_range(elu, alpha=2.0))
    ('(0, 1)', '(-2, ∞)')
    """
    # the unbounded test compares f at extent and extent/2, both beyond REACH
    if not extent > 2 * REACH:
        raise ValueError(f"extent must be > {2 * REACH:g}, got {extent}")
    x = _grid(extent)
    y = function(x, **parameters)
    near = x.abs() <= REACH
    edges = torch.tensor([extent, -extent], dtype=torch.float64)
    # on the far half of each side
    change = function(edges, **parameters) - function(edges / 2, **parameters)

    def end(extreme: torch.Tensor, direction: float) -> tuple[float, bool]:
        # still moving this way at the edge of the grid: unbounded
        if (direction * change > 1).any():
            return direction * math.inf, False
        return extreme.item(), bool((y[near] == extreme).any())

    low, closed_low = end(y.min(), -1.0)
    high, closed_high = end(y.max(), 1.0)
    return Interval(low, high, closed_low, closed_high)


def stationary_point(
    derivative: Callable[[torch.Tensor], torch.Tensor], low: float, high: float
) -> float:
    """The x in [low, high] where ``derivative`` changes sign, by bisection
    to float64 precision.

    >>> round(stationary_point(lambda x: 2 * x - 1, -5.0, 5.0), 12)  # min of x² - x
    0.5
    """
    a, b = (
        torch.tensor(low, dtype=torch.float64),
        torch.tensor(high, dtype=torch.float64),
    )
    sign_at_low = torch.sign(derivative(a))
    if sign_at_low == 0 or sign_at_low == torch.sign(derivative(b)):
        raise ValueError(
            f"the derivative must change sign between low={low} and high={high}"
        )
    # each halves the bracket; float64 runs out of digits after about 60
    for _ in range(200):
        middle = (a + b) / 2
        if middle in (a, b):
            break
        if torch.sign(derivative(middle)) == sign_at_low:
            a = middle
        else:
            b = middle
    return ((a + b) / 2).item()


def lowest_value(
    function: Callable, derivative: Callable, low: float, high: float, **parameters
) -> float:
    """f at the point of [low, high] where f' = 0: the minimum of Swish and of GELU,
    which have no simpler form.

    >>> round(lowest_value(lambda x: x**2 - x, lambda x: 2 * x - 1, -5.0, 5.0), 12)
    -0.25
    """
    x = stationary_point(lambda x: derivative(x, **parameters), low, high)
    return function(torch.tensor(x, dtype=torch.float64), **parameters).item()


# The table.


@dataclass(frozen=True)
class Activation:
    """One row of the table: what the notes state about an activation function, as LaTeX
    and as code."""

    name: str
    # f(x, **parameters): the formula the row states
    function: Callable[..., torch.Tensor]
    # f'(x, **parameters): the closed form the row states
    derivative: Callable[..., torch.Tensor]
    range: Callable[..., Interval]  # the range the row states, for given parameters
    formula: str  # f(x), LaTeX
    derivative_formula: str  # f'(x), LaTeX
    range_formula: str  # LaTeX
    torch_function: Callable[..., torch.Tensor]  # torch's own version, to compare with
    # parameter values to check; the first is the usual one, used in plots
    settings: tuple[dict, ...] = ({},)
    note: str = ""  # in a correction: what was wrong


UNBOUNDED = Interval(-math.inf, math.inf)
POSITIVE = Interval(0.0, math.inf)  # (0, ∞): what the notes give Swish and GELU
GELU_TANH = r"u = \sqrt{2/\pi}\,(x + 0.044715\,x^3)"

# The appendix table of the course's source notes (seeds/003), in its order, with
# its names and its parameter (α for the leaky ReLU, PReLU and ELU slopes). Swish
# has no β there: it is β = 1, torch's SiLU. "GELU" there is the tanh
# approximation, torch's gelu(approximate="tanh").
TABLE = (
    Activation(
        "sigmoid",
        sigmoid,
        sigmoid_derivative,
        lambda: Interval(0.0, 1.0),
        r"\frac{1}{1 + e^{-x}}",
        r"\sigma(x)\,(1 - \sigma(x))",
        r"(0, 1)",
        torch.sigmoid,
    ),
    Activation(
        "tanh",
        tanh_from_exp,
        tanh_derivative,
        lambda: Interval(-1.0, 1.0),
        r"\frac{2}{1 + e^{-2x}} - 1",
        r"1 - \tanh^2 x",
        r"(-1, 1)",
        torch.tanh,
    ),
    Activation(
        "ReLU",
        relu,
        relu_derivative,
        lambda: Interval(0.0, math.inf, closed_low=True),
        r"\max(0, x)",
        r"1 \text{ if } x > 0 \text{ else } 0",
        r"[0, \infty)",
        F.relu,
    ),
    Activation(
        "leaky ReLU",
        leaky_relu,
        leaky_relu_derivative,
        lambda slope: UNBOUNDED,
        r"x \text{ if } x > 0 \text{ else } \alpha x",
        r"1 \text{ if } x > 0 \text{ else } \alpha",
        r"(-\infty, \infty)",
        lambda x, slope: F.leaky_relu(x, slope),
        ({"slope": 0.01}, {"slope": 0.2}),
    ),
    Activation(
        "PReLU",
        prelu,
        prelu_derivative,
        lambda weight: UNBOUNDED,
        r"x \text{ if } x > 0 \text{ else } \alpha x \; (\alpha \text{ learned})",
        r"1 \text{ if } x > 0 \text{ else } \alpha",
        r"(-\infty, \infty)",
        lambda x, weight: F.prelu(x, torch.tensor([weight], dtype=x.dtype)),
        ({"weight": 0.25}, {"weight": 0.1}),
    ),
    Activation(
        "ELU",
        elu,
        elu_derivative,
        lambda alpha: Interval(-alpha, math.inf),
        r"x \text{ if } x > 0 \text{ else } \alpha (e^x - 1)",
        r"1 \text{ if } x > 0 \text{ else } f(x) + \alpha",
        r"(-\alpha, \infty)",
        lambda x, alpha: F.elu(x, alpha),
        ({"alpha": 1.0}, {"alpha": 0.5}, {"alpha": 2.0}),
    ),
    Activation(
        "Swish",
        swish,
        swish_derivative_as_printed,
        lambda: POSITIVE,
        r"\frac{x}{1 + e^{-x}}",
        r"\frac{e^{x}\,(1 + x + e^{-x})}{(1 + e^{-x})^2}",
        r"(0, \infty)",
        F.silu,
    ),
    Activation(
        "GELU",
        gelu_tanh,
        gelu_tanh_derivative_as_printed,
        lambda: POSITIVE,
        r"\tfrac12 x\,(1 + \tanh u),\; " + GELU_TANH,
        r"\tfrac12 (1 + \tanh u) + \frac{\tfrac12 x}{1 + e^{-x}}\,(1 - \tanh^2 u)",
        r"(0, \infty)",
        lambda x: F.gelu(x, approximate="tanh"),
    ),
)


def _bounded_below(
    function: Callable, derivative: Callable, low: float
) -> Callable[..., Interval]:
    """The range [min f, ∞) of a function with one minimum, in [low, 0] (scaled by 1/β
    for Swish). The bracket's left end must be where f' is still clearly negative: far
    out, f' rounds to 0 in float64."""

    def stated(**parameters) -> Interval:
        scale = 1 / parameters.get("beta", 1.0)
        return Interval(
            lowest_value(function, derivative, low * scale, 0.0, **parameters),
            math.inf,
            closed_low=True,
        )

    return stated


_ROWS = {row.name: row for row in TABLE}
CORRECTIONS = {
    # Written with the Swish paper's β (the notes' row is β = 1), so that the correction
    # holds for every β.
    "Swish": replace(
        _ROWS["Swish"],
        formula=r"x\,\sigma(\beta x)",
        derivative=swish_derivative,
        range=_bounded_below(swish, swish_derivative, -4.0),
        derivative_formula=r"\beta f(x) + \sigma(\beta x)\,(1 - \beta f(x))",
        range_formula=r"[f(x^*), \infty),\; f'(x^*) = 0,\; f(x^*) = -W(1/e)/\beta",
        torch_function=lambda x, beta: F.silu(beta * x) / beta,
        settings=({"beta": 1.0}, {"beta": 0.5}, {"beta": 2.0}),
        note="the derivative's exponentials have swapped signs; Swish is negative for x < 0, with a minimum at a "
        "finite x",
    ),
    "GELU": replace(
        _ROWS["GELU"],
        derivative=gelu_tanh_derivative,
        range=_bounded_below(gelu_tanh, gelu_tanh_derivative, -4.0),
        derivative_formula=r"\tfrac12 (1 + \tanh u) + \tfrac12 x\,(1 - \tanh^2 u)\,\sqrt{2/\pi}\,"
        r"(1 + 3 \cdot 0.044715\,x^2)",
        range_formula=r"[f(x^*), \infty),\; f'(x^*) = 0",
        note="the derivative has σ(x) where the chain rule's du/dx belongs; GELU is negative for x < 0, with a "
        "minimum at a finite x",
    ),
}


def corrected_table() -> tuple[Activation, ...]:
    """``TABLE`` with the rows of ``CORRECTIONS`` put in their place."""
    return tuple(CORRECTIONS.get(row.name, row) for row in TABLE)


def formula_error(activation: Activation, x: torch.Tensor, **parameters) -> float:
    """The largest |the row's f − torch's| over the points ``x``.

    >>> x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    >>> formula_error(TABLE[1], x) < 1e-12  # tanh = 2σ(2x) - 1
    True
    """
    return (
        (
            activation.function(x, **parameters)
            - activation.torch_function(x, **parameters)
        )
        .abs()
        .max()
        .item()
    )


def derivative_error(activation: Activation, x: torch.Tensor, **parameters) -> float:
    """The largest |closed-form derivative − autograd's| over the points ``x``.

    >>> x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    >>> derivative_error(TABLE[0], x) < 1e-12  # σ' = σ (1 - σ) holds
    True
    """
    x = x.detach().clone().requires_grad_(True)
    (autograd,) = torch.autograd.grad(activation.function(x, **parameters).sum(), x)
    return (
        (activation.derivative(x.detach(), **parameters) - autograd).abs().max().item()
    )


HOLDS = 1e-9  # an error above this on the grid is a wrong formula, not float64 rounding


def audit(activation: Activation, x: torch.Tensor) -> list[dict]:
    """Every claim of a row, for each of its settings: {"setting", "formula_error",
    "derivative_error", "stated", "measured", "range_holds"}. A formula or a derivative
    holds when its error is below ``HOLDS`` (float64 rounding is about 1e-16).

    >>> x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    >>> [entry["range_holds"] for entry in audit(TABLE[-2], x)]
    [False]
    """
    entries = []
    for setting in activation.settings:
        stated, measured = (
            activation.range(**setting),
            measured_range(activation.function, **setting),
        )
        entries.append(
            {
                "setting": setting,
                "formula_error": formula_error(activation, x, **setting),
                "derivative_error": derivative_error(activation, x, **setting),
                "stated": stated,
                "measured": measured,
                "range_holds": stated.matches(measured),
            }
        )
    return entries
