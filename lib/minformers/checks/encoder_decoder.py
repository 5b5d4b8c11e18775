"""Checks for the encoder-decoder models: the decoder's self-attention mask and
T5's sentinel corruption.

    >>> def causal_only(lengths, t):  # lets queries read the padding
    ...     return torch.ones(len(lengths), 1, t, t, dtype=torch.bool).tril()
    >>> check_decoder_self_mask(causal_only)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_decoder_self_mask, case 'rows of lengths 3, 1 and 5': ...
    ...
"""

from collections.abc import Callable

import torch

from minformers import denoising, masks
from minformers.checks import (
    Case,
    run_check,
    seeded_random,
)


def _decoder_mask_reference(lengths: torch.Tensor, t: int) -> torch.Tensor:
    return masks.combine_masks(masks.padding_mask(lengths, t), masks.causal_mask(t))


def check_decoder_self_mask(
    learner: Callable[[torch.Tensor, int], torch.Tensor],
) -> None:
    """Exercise: `learner(lengths, t)` is the (B, 1, t, t) bool self-attention mask of a
    decoder over right-padded targets: query i may read key j iff j <= i and j is a real
    token of its row (True = may attend)."""
    cases = [
        Case("one row, no padding", (torch.tensor([4]), 4)),
        Case("rows of lengths 3, 1 and 5", (torch.tensor([3, 1, 5]), 5)),
        Case("every row padded", (torch.tensor([2, 2]), 6)),
    ]
    draw = seeded_random()
    for _ in range(2):
        t = draw.randint(1, 9)
        lengths = [draw.randint(1, t) for _ in range(draw.randint(1, 4))]
        cases.append(
            Case(f"random: lengths {lengths}, t={t}", (torch.tensor(lengths), t))
        )
    run_check(
        "check_decoder_self_mask",
        learner,
        _decoder_mask_reference,
        cases,
        blocked_functions=[masks.combine_masks],
    )


def check_sentinel_corruption(learner: Callable) -> None:
    """Exercise: `learner(tokens, noise_mask, sentinels)` returns T5's (inputs, targets)
    lists, as denoising.sentinel_corruption."""
    draw = seeded_random()
    tokens = [draw.randrange(100, 200) for _ in range(30)]
    scattered = [draw.random() < 0.3 for _ in range(30)]
    cases = [
        Case(
            "one span in the middle",
            ([5, 6, 7, 8], [False, True, True, False], [1, 2, 3]),
        ),
        Case(
            "noise at both ends",
            ([5, 6, 7, 8, 9], [True, False, False, True, True], [1, 2, 3]),
        ),
        Case(
            "adjacent noise tokens form one span",
            ([5, 6, 7], [False, True, True], [1, 2]),
        ),
        Case("30 tokens, scattered noise", (tokens, scattered, list(range(1, 31)))),
    ]
    run_check(
        "check_sentinel_corruption",
        learner,
        denoising.sentinel_corruption,
        cases,
        blocked_functions=[denoising.sentinel_corruption, denoising.span_corruption],
    )
