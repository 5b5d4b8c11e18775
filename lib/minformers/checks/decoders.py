"""Checks for the decoder models: GPT's losses, top-p sampling, RMSNorm and in-context
learning's ideal reader.

    >>> import torch.nn.functional as F
    >>> def predicts_its_input(logits, input_ids):  # no shift by one position
    ...     return F.cross_entropy(logits.flatten(0, 1), input_ids.flatten())
    >>> check_language_model_loss(predicts_its_input)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_language_model_loss, case 'random logits, batch of 3': ...
    ...
"""

from collections.abc import Callable

import torch

from minformers import generation, gpt, in_context, llama
from minformers.checks import (
    Case,
    run_check,
    seeded_generator,
    seeded_random,
)
from minformers.recipes import gpt_classifier


def check_language_model_loss(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(logits, input_ids)` is GPT's next-token cross-entropy, a mean
    over the B x (T - 1) predictions, as gpt.language_model_loss."""
    draw = seeded_generator()
    cases = [
        Case("a uniform guess", (torch.zeros(1, 4, 6), torch.tensor([[0, 1, 2, 3]]))),
        Case(
            "random logits, batch of 3",
            (
                torch.randn(3, 7, 11, generator=draw),
                torch.randint(0, 11, (3, 7), generator=draw),
            ),
        ),
        Case(
            "two tokens: one prediction",
            (torch.randn(2, 2, 5, generator=draw), torch.tensor([[1, 4], [0, 2]])),
        ),
        Case(
            "large logits (numerical stability)",
            (
                100 * torch.randn(2, 5, 9, generator=draw),
                torch.randint(0, 9, (2, 5), generator=draw),
            ),
        ),
    ]
    run_check(
        "check_language_model_loss",
        learner,
        gpt.language_model_loss,
        cases,
        blocked_functions=[gpt.language_model_loss],
    )


def _top_p_reference(logits: torch.Tensor, p: float) -> torch.Tensor:
    return generation.filter_logits(logits, top_p=p)


def check_top_p_filter(learner: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise: `learner(logits, p)` keeps the smallest set of most likely tokens whose
    probabilities reach p (the top token always) and sets the other logits to -inf, as
    generation.filter_logits(logits, top_p=p)."""
    draw = seeded_generator()
    cases = [
        Case(
            "p = 1 keeps everything",
            (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 1.0),
        ),
        Case(
            "the top token alone reaches p",
            (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 0.4),
        ),
        Case(
            "two tokens needed", (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 0.65)
        ),
        Case(
            "a tiny p still keeps the top token",
            (torch.log(torch.tensor([[0.5, 0.25, 0.25]])), 0.01),
        ),
        Case("a batch of random rows", (torch.randn(5, 30, generator=draw), 0.8)),
    ]
    run_check(
        "check_top_p_filter",
        learner,
        _top_p_reference,
        cases,
        blocked_functions=[generation.filter_logits],
    )


def check_text_lm_loss(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(lm_logits, input_ids, lengths)` is the next-token loss over
    each row's text pieces only (tokens 1 .. length-2: no padding, no extract token), a
    mean over those predictions, as gpt_classifier.text_lm_loss."""
    draw = seeded_generator()
    cases = [
        Case(
            "one row, no padding",
            (
                torch.randn(1, 5, 7, generator=draw),
                torch.tensor([[0, 3, 4, 5, 1]]),
                torch.tensor([5]),
            ),
        ),
        Case(
            "rows of lengths 6, 4 and 3 (padded)",
            (
                torch.randn(3, 6, 9, generator=draw),
                torch.randint(0, 9, (3, 6), generator=draw),
                torch.tensor([6, 4, 3]),
            ),
        ),
        Case(
            "a long row beside short ones",
            (
                torch.randn(4, 10, 5, generator=draw),
                torch.randint(0, 5, (4, 10), generator=draw),
                torch.tensor([3, 10, 5, 3]),
            ),
        ),
        Case(
            "large logits (numerical stability)",
            (
                100 * torch.randn(2, 4, 6, generator=draw),
                torch.randint(0, 6, (2, 4), generator=draw),
                torch.tensor([4, 3]),
            ),
        ),
    ]
    run_check(
        "check_text_lm_loss",
        learner,
        gpt_classifier.text_lm_loss,
        cases,
        blocked_functions=[gpt_classifier.text_lm_loss, gpt.language_model_loss],
    )


def _rms_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    norm = llama.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def check_rms_norm(
    learner: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor],
) -> None:
    """Exercise: `learner(x, weight, eps)` is RMSNorm over the last dim, as
    llama.RMSNorm with that weight."""
    draw = seeded_generator()
    cases = [
        Case(
            "one vector, unit weight", (torch.tensor([[3.0, 4.0]]), torch.ones(2), 1e-6)
        ),
        Case(
            "a batch of sequences",
            (torch.randn(2, 5, 8, generator=draw), torch.rand(8, generator=draw), 1e-6),
        ),
        Case("eps matters for a zero vector", (torch.zeros(1, 4), torch.ones(4), 1e-2)),
        Case(
            "small values: eps, inside the square root, is as large as their mean square",
            (0.1 * torch.tensor([[1.0, -2.0, 3.0, -4.0]]), torch.ones(4), 1e-1),
        ),
        Case(
            "large values",
            (
                1000 * torch.randn(3, 16, generator=draw),
                torch.randn(16, generator=draw),
                1e-5,
            ),
        ),
    ]
    run_check(
        "check_rms_norm",
        learner,
        _rms_norm_reference,
        cases,
        blocked_functions=[llama.RMSNorm.forward],
        blocked_attributes=[(torch.nn.functional, "rms_norm"), (torch, "rms_norm")],
    )


def _ideal_accuracy_reference(n_examples: int, n_keys: int, n_values: int) -> float:
    return in_context.KeyValueTask(n_keys=n_keys, n_values=n_values).ideal_accuracy(
        n_examples
    )


def check_ideal_accuracy(learner: Callable[[int, int, int], float]) -> None:
    """Exercise: `learner(n_examples, n_keys, n_values)` is the expected accuracy of a
    perfect reader of the prompt, as in_context.KeyValueTask.ideal_accuracy."""
    cases = [
        Case("no examples: chance", (0, 8, 8)),
        Case("every key shown", (8, 8, 8)),
        Case("half the keys, 4 values", (3, 6, 4)),
        Case("one key of ten, two values", (1, 10, 2)),
    ]
    draw = seeded_random()
    for _ in range(2):  # powers of two, so that the exact comparison of floats is fair
        n_keys = draw.choice([2, 4, 8, 16])
        case = (draw.randint(0, n_keys), n_keys, draw.choice([2, 4, 8, 16, 32]))
        cases.append(Case(f"random: {case}", case))
    run_check(
        "check_ideal_accuracy",
        learner,
        _ideal_accuracy_reference,
        cases,
        blocked_functions=[in_context.KeyValueTask.ideal_accuracy],
    )
