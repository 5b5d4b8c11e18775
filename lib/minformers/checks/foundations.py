"""Checks for the foundations: tokenization (BPE's merge) and attention
(positions and masks).

    >>> check_merge_pair(lambda ids, pair, new_id: list(ids))  # merges nothing
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_merge_pair, case 'the example in the text': values differ
    ...
"""

from collections.abc import Callable

import torch

from minformers import bpe, masks, positions
from minformers.checks import (
    Case,
    run_check,
    seeded_random,
)


def check_merge_pair(
    learner: Callable[[list[int], tuple[int, int], int], list[int]],
) -> None:
    """Exercise: `learner(ids, pair, new_id)` replaces each non-overlapping occurrence
    of `pair`, left to right."""
    cases = [
        Case("the example in the text", ([1, 2, 3, 1, 2], (1, 2), 4)),
        Case("an empty sequence", ([], (1, 2), 4)),
        Case("a single id", ([1], (1, 2), 4)),
        Case("the pair never occurs", ([2, 1, 3], (1, 2), 4)),
        Case("the pair at the very end", ([3, 3, 1, 2], (1, 2), 9)),
        Case("overlapping occurrences: [7, 7, 7] with (7, 7)", ([7, 7, 7], (7, 7), 8)),
        Case("four in a row: [7, 7, 7, 7] with (7, 7)", ([7, 7, 7, 7], (7, 7), 8)),
    ]
    draw = seeded_random()
    for length in (10, 50, 200):
        ids = [draw.randint(0, 3) for _ in range(length)]
        cases.append(
            Case(f"random: {length} ids from 0..3", (ids, (ids[0], ids[1]), 256))
        )
    run_check(
        "check_merge_pair",
        learner,
        bpe.merge_pair,
        cases,
        blocked_functions=[bpe.merge_pair],
    )


def check_sinusoidal_positions(learner: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: `learner(length, d_model)` returns the
    (length, d_model) sinusoidal encodings."""
    cases = [
        Case("one position, two channels", (1, 2)),
        Case("3 positions, 4 channels", (3, 4)),
        Case("10 positions, 8 channels", (10, 8)),
        Case("a long sequence (slow frequencies matter)", (512, 64)),
    ]
    draw = seeded_random()
    for _ in range(2):
        case = (draw.randint(1, 64), 2 * draw.randint(1, 16))
        cases.append(Case(f"random: {case[0]} positions, {case[1]} channels", case))
    run_check(
        "check_sinusoidal_positions",
        learner,
        positions.sinusoidal_positions,
        cases,
        blocked_functions=[positions.sinusoidal_positions],
        blocked_attributes=[(positions.SinusoidalPositions, "forward")],
        # float32 sin/cos of arguments up to 512, computed in a different order
        atol=1e-4,
    )


def check_local_global_mask(
    learner: Callable[[int, int, list[int]], torch.Tensor],
) -> None:
    """Exercise: `learner(t, window, global_positions)` returns Longformer's
    local + global mask, (t, t)."""
    cases = [
        Case("one token, global", (1, 1, [0])),
        Case("no global tokens: a band of width 1 on each side", (6, 1, [])),
        Case("[CLS] global, window 1", (5, 1, [0])),
        Case("window 2, a global token in the middle", (8, 2, [3])),
        Case("first and last tokens global", (7, 1, [0, 6])),
        Case("window wider than the sequence", (4, 10, [2])),
    ]
    draw = seeded_random()
    for _ in range(3):
        t = draw.randint(2, 24)
        cases.append(
            Case(
                f"random: t={t}",
                (t, draw.randint(1, 5), sorted(draw.sample(range(t), k=2))),
            )
        )
    run_check(
        "check_local_global_mask",
        learner,
        masks.local_global_mask,
        cases,
        blocked_functions=[masks.local_global_mask, masks.sliding_window_mask],
    )
