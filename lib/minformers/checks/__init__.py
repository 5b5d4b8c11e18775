"""Automatic checks for the exercises: compare a learner's function with
the lib's reference.

Each `check_*` function runs the learner's function on random and edge-case inputs and
compares the result with the reference. While the learner's code runs, the matching lib
reference (and any library function that would do the whole job) is made unavailable, so
a submission that only calls it fails with a message saying so. On failure the check
raises `CheckFailed` with a short message naming the case, the expected value and the
value received; it never shows the reference code. On success it prints one line.

This module is the harness. The checks live in one module per part of the book
(`PARTS`), imported the first time one of its checks is used, so that the tokenization
page's `checks.check_merge_pair` does not load BERT or the distributed code.

    >>> from minformers import checks
    >>> def everything_allowed(t, window, global_positions):
    ...     return torch.ones(t, t, dtype=torch.bool)
    >>> checks.check_local_global_mask(everything_allowed)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_local_global_mask, case 'no global tokens: a band of width 1 ...': ...
    ...
"""

import contextlib
import importlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minformers.support import measure

# The module of each part of the book, and the checks it holds.
PARTS = {
    "foundations": [
        "check_merge_pair",
        "check_sinusoidal_positions",
        "check_local_global_mask",
    ],
    "encoders": [
        "check_mlm_masking",
        "check_encode_sentences",
        "check_mean_pool",
        "check_contiguous_blocks",
        "check_factorized_embedding_parameters",
        "check_replaced_token_labels",
    ],
    "decoders": [
        "check_language_model_loss",
        "check_top_p_filter",
        "check_text_lm_loss",
        "check_rms_norm",
        "check_ideal_accuracy",
    ],
    "encoder_decoder": ["check_decoder_self_mask", "check_sentinel_corruption"],
    "pretraining": [
        "check_equal_compute_steps",
        "check_relative_distance",
        "check_true_token_share",
        "check_candidate_ranks",
        "check_exposure",
        "check_sgns_loss",
    ],
    "scaling": ["check_compute_optimal"],
    "systems": [
        "check_chunked_attention",
        "check_swish_derivative",
        "check_adamw_step",
        "check_peak_stashed_microbatches",
        "check_int8_rows",
        "check_residual",
    ],
    "applications": ["check_bm25_scores", "check_next_token_targets"],
    "posttraining": [
        "check_response_mask",
        "check_lora_merge",
        "check_dpo_loss",
        "check_group_advantages",
    ],
}
_PART_OF = {check: part for part, checks in PARTS.items() for check in checks}


def __getattr__(name: str):
    # `checks.check_x` imports check_x's part on first use (PEP 562)
    if name not in _PART_OF:
        raise AttributeError(f"module 'minformers.checks' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_PART_OF[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PART_OF])


_BLOCKED = "minformers-reference-blocked"
# The seed of every check's random cases. Learners see the cases drawn from 0; the
# grader draws its own seed, so the random cases it uses cannot be known, or answered
# from a table, in advance.
SEED = 0
# What is blocked while a learner's function runs, for a grader that runs the function
# in another process.
blocked_now: tuple[list[Callable], list[tuple[object, str]]] = ([], [])


class CheckFailed(AssertionError):
    """An exercise check failed; the message says which case and why.

    `kind` says how, for graders: "not attempted" (the stub is still there), "calls
    reference" (the learner's function used the library's solution), "raised" (it raised
    an exception) or "wrong" (a value differs).
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind

    def _render_traceback_(self) -> list[str]:
        # Jupyter shows this instead of a traceback: the learner needs the message, not
        # the checker's internals.
        return [f"CheckFailed: {self}"]


@dataclass
class Case:
    name: str  # shown to the learner, so it should say what the case is about
    args: tuple
    kwargs: dict = field(default_factory=dict)


@contextlib.contextmanager
def cases_from(seed: int):
    """Draw the checks' random cases from `seed` inside the block (a grader's own), then
    from the usual one again."""
    global SEED
    previous, SEED = SEED, seed
    try:
        yield
    finally:
        SEED = previous


def seeded_random() -> random.Random:
    """Python's random numbers for a check's random cases, from the current SEED."""
    return random.Random(SEED)


def seeded_generator() -> torch.Generator:
    """torch's random numbers for a check's random cases, from the current SEED."""
    return torch.Generator().manual_seed(SEED)


def _refuse(*args, **kwargs):
    # Swapped in as the reference's code while a learner's function runs. It may only
    # use builtins, because it runs with the reference module's globals.
    raise LookupError("minformers-reference-blocked")


@contextlib.contextmanager
def _unavailable(functions: list[Callable], attributes: list[tuple[object, str]]):
    """Make Python `functions` raise (every alias of them too) and replace module
    `attributes` with `_refuse`."""
    global blocked_now
    saved_code = [(function, function.__code__) for function in functions]
    saved_attributes = [
        (owner, name, getattr(owner, name)) for owner, name in attributes
    ]
    blocked_now = (functions, attributes)
    try:
        for function, _ in saved_code:
            function.__code__ = _refuse.__code__
        for owner, name, _ in saved_attributes:
            setattr(owner, name, _refuse)
        yield
    finally:
        blocked_now = ([], [])
        for function, code in saved_code:
            function.__code__ = code
        for owner, name, value in saved_attributes:
            setattr(owner, name, value)


def peak_tensor_bytes(learner: Callable, *args) -> int:
    """The peak tensor bytes of `learner(*args)`, measured where the learner runs (in a
    grader's sandbox, if any)."""
    measured_elsewhere = getattr(learner, "peak_tensor_bytes", None)
    if measured_elsewhere is not None:
        return measured_elsewhere(*args)
    return measure.peak_tensor_bytes(lambda: learner(*args))


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
    # several results, say (ids, attention_mask): compared one by one
    if isinstance(expected, tuple):
        if not isinstance(received, tuple) or len(received) != len(expected):
            return f"expected a tuple of {len(expected)} results, received {_describe(received)}"
        for position, (wanted, got) in enumerate(zip(expected, received, strict=True)):
            problem = _mismatch(wanted, got, atol)
            if problem:
                return f"result {position}: {problem}"
        return None
    # plain Python values (lists of ids, strings) compare exactly
    if not isinstance(expected, torch.Tensor):
        if type(received) is not type(expected):
            return f"expected a {type(expected).__name__}, received {type(received).__name__}"
        return None if received == expected else "values differ"
    if not isinstance(received, torch.Tensor):
        return f"expected a torch.Tensor, received {type(received).__name__}"
    if received.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, received shape {tuple(received.shape)}"
    if expected.dtype == torch.bool and received.dtype != torch.bool:
        return (
            f"expected dtype torch.bool (True = may attend), received {received.dtype}"
        )
    if expected.dtype == torch.bool:
        return None if torch.equal(expected, received) else "values differ"
    if torch.isnan(received).any() and not torch.isnan(expected).any():
        return "received NaN where the expected values are all finite"
    if not torch.allclose(received.double(), expected.double(), atol=atol, rtol=0):
        return f"values differ by up to {(received.double() - expected.double()).abs().max().item():.3g}"
    return None


def call_learner(
    name: str, learner: Callable, case: Case, blocked_functions, blocked_attributes=()
):
    """Run the learner's function on one case with the references unavailable; turn
    failures into CheckFailed."""
    try:
        with _unavailable(blocked_functions, list(blocked_attributes)):
            return learner(*case.args, **case.kwargs)
    except NotImplementedError as error:
        raise CheckFailed(
            f"{name}: not attempted yet ({error})", "not attempted"
        ) from None
    except Exception as error:
        if _called_reference(error):
            raise CheckFailed(
                f"{name}: your function calls the library's own solution; write the "
                "computation yourself",
                "calls reference",
            ) from None
        message = f"{name}, case '{case.name}': raised {type(error).__name__}: {error}"
        raise CheckFailed(message, "raised") from None


def run_check(
    name: str,
    learner: Callable,
    reference: Callable,
    cases: list[Case],
    blocked_functions: list[Callable],
    blocked_attributes: list[tuple[object, str]] = (),
    atol: float = 1e-5,
) -> None:
    """Compare `learner` with `reference` on every case; raise CheckFailed on
    the first difference."""
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        received = call_learner(
            name, learner, case, blocked_functions, blocked_attributes
        )
        problem = _mismatch(expected, received, atol)
        if problem:
            raise CheckFailed(
                f"{name}, case '{case.name}': {problem}\n  expected "
                f"{_describe(expected)}\n  received {_describe(received)}",
                "wrong",
            )
    print(f"ok: {name} passed {len(cases)} cases")
