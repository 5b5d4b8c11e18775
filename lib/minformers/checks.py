"""Automatic checks for the exercises: compare a learner's function with the lib's reference.

Each `check_*` function runs the learner's function on random and edge-case inputs and compares the result
with the reference. While the learner's code runs, the matching lib reference (and any library function that
would do the whole job) is made unavailable, so a submission that only calls it fails with a message saying so.
On failure the check raises `CheckFailed` with a short message naming the case, the expected value and the
value received; it never shows the reference code. On success it prints one line.

    >>> everything_allowed = lambda t, window: torch.ones(t, t, dtype=torch.bool)
    >>> check_sliding_window_mask(everything_allowed)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_sliding_window_mask, case 'window 1: each token sees only itself': ...
    ...
"""

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from minformers import attention, masks

_BLOCKED = "minformers-reference-blocked"


class CheckFailed(AssertionError):
    """An exercise check failed; the message says which case and why."""


@dataclass
class Case:
    name: str  # shown to the learner, so it should say what the case is about
    args: tuple
    kwargs: dict = field(default_factory=dict)


def _refuse(*args, **kwargs):
    # Swapped in as the reference's code while a learner's function runs. It may only use builtins, because
    # it runs with the reference module's globals.
    raise LookupError("minformers-reference-blocked")


@contextlib.contextmanager
def _unavailable(functions: list[Callable], attributes: list[tuple[object, str]]):
    """Make Python `functions` raise (every alias of them too) and replace module `attributes` with `_refuse`."""
    saved_code = [(function, function.__code__) for function in functions]
    saved_attributes = [(owner, name, getattr(owner, name)) for owner, name in attributes]
    try:
        for function, _ in saved_code:
            function.__code__ = _refuse.__code__
        for owner, name, _ in saved_attributes:
            setattr(owner, name, _refuse)
        yield
    finally:
        for function, code in saved_code:
            function.__code__ = code
        for owner, name, value in saved_attributes:
            setattr(owner, name, value)


def _called_reference(error: BaseException) -> bool:
    while error is not None:
        if isinstance(error, LookupError) and _BLOCKED in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        text = str(value.detach()).replace("\n", "\n    ")
        return f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}:\n    {text}"
    return repr(value)


def _mismatch(expected, received, atol: float) -> str | None:
    """Why `received` differs from `expected`, or None if it matches."""
    if not isinstance(received, torch.Tensor):
        return f"expected a torch.Tensor, received {type(received).__name__}"
    if received.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, received shape {tuple(received.shape)}"
    if expected.dtype == torch.bool and received.dtype != torch.bool:
        return f"expected dtype torch.bool (True = may attend), received {received.dtype}"
    if expected.dtype == torch.bool:
        return None if torch.equal(expected, received) else "values differ"
    if torch.isnan(received).any() and not torch.isnan(expected).any():
        return "received NaN where the expected values are all finite"
    if not torch.allclose(received.double(), expected.double(), atol=atol, rtol=0):
        return f"values differ by up to {(received.double() - expected.double()).abs().max().item():.3g}"
    return None


def run_check(
    name: str,
    learner: Callable,
    reference: Callable,
    cases: list[Case],
    blocked_functions: list[Callable],
    blocked_attributes: list[tuple[object, str]] = (),
    atol: float = 1e-5,
) -> None:
    """Compare `learner` with `reference` on every case; raise CheckFailed on the first difference."""
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        try:
            with _unavailable(blocked_functions, list(blocked_attributes)):
                received = learner(*case.args, **case.kwargs)
        except NotImplementedError as error:
            raise CheckFailed(f"{name}: not attempted yet ({error})") from None
        except Exception as error:
            if _called_reference(error):
                raise CheckFailed(
                    f"{name}: your function calls the library's own solution; write the computation yourself"
                ) from None
            raise CheckFailed(f"{name}, case '{case.name}': raised {type(error).__name__}: {error}") from None
        problem = _mismatch(expected, received, atol)
        if problem:
            raise CheckFailed(
                f"{name}, case '{case.name}': {problem}\n"
                f"  expected {_describe(expected)}\n  received {_describe(received)}"
            )
    print(f"ok: {name} passed {len(cases)} cases")


def check_sliding_window_mask(learner: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: `learner(t, window)` returns the causal sliding-window mask of shape (t, t)."""
    cases = [
        Case("one token", (1, 1)),
        Case("window 1: each token sees only itself", (5, 1)),
        Case("window 2", (5, 2)),
        Case("window 3 over 7 tokens", (7, 3)),
        Case("window equal to the length (plain causal)", (4, 4)),
        Case("window longer than the sequence", (4, 10)),
    ]
    run_check(
        "check_sliding_window_mask",
        learner,
        lambda t, window: masks.sliding_window_mask(t, window),
        cases,
        blocked_functions=[masks.sliding_window_mask],
    )


def check_attention(learner: Callable) -> None:
    """Exercise: `learner(q, k, v, mask)` is scaled dot-product attention; a fully masked row gives zeros."""
    generator = torch.Generator().manual_seed(0)

    def qkv(*shape_q, t_k=None):
        *batch, t_q, d = shape_q
        t_k = t_k or t_q
        q = torch.randn(*batch, t_q, d, generator=generator)
        k = torch.randn(*batch, t_k, d, generator=generator)
        v = torch.randn(*batch, t_k, d, generator=generator)
        return q, k, v

    no_keys = torch.ones(4, 4, dtype=torch.bool)
    no_keys[2] = False  # query 2 may attend nothing: its output must be zeros, not NaN
    cases = [
        Case("no mask, one head", (*qkv(3, 4), None)),
        Case("no mask, batch of 2 with 3 heads", (*qkv(2, 3, 5, 8), None)),
        Case("causal mask", (*qkv(2, 6, 4), masks.causal_mask(6))),
        Case("padding mask (lengths 2 and 4)", (*qkv(2, 1, 4, 4), masks.padding_mask(torch.tensor([2, 4]), 4))),
        Case("more keys than queries", (*qkv(1, 2, 3, t_k=5), None)),
        Case("large head dimension (the scaling matters)", (*qkv(4, 64), None)),
        Case("a fully masked query row", (*qkv(4, 4), no_keys)),
    ]
    run_check(
        "check_attention",
        learner,
        lambda q, k, v, mask: attention.scaled_dot_product_attention(q, k, v, mask),
        cases,
        blocked_functions=[attention.scaled_dot_product_attention],
        blocked_attributes=[(F, "scaled_dot_product_attention"), (F, "multi_head_attention_forward")],
    )
