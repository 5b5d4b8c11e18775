"""Checks for the post-training pages: the response mask of supervised fine-tuning.

>>> def includes_padding(prompt_lengths, lengths, T):  # forgets where the example ends
...     return torch.arange(T) >= prompt_lengths[:, None]
>>> check_response_mask(includes_padding)
Traceback (most recent call last):
minformers.checks.CheckFailed: check_response_mask, case 'two examples, the second padded': ...
...
"""

from collections.abc import Callable

import torch

from minformers import sft
from minformers.checks import Case, run_check, seeded_generator


def check_response_mask(
    learner: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
) -> None:
    """Exercise: `learner(prompt_lengths, lengths, T)` is the (B, T) bool mask of the
    responses' positions, as sft.response_mask."""
    draw = seeded_generator()
    lengths = torch.randint(4, 12, (6,), generator=draw)
    prompts = (torch.rand(6, generator=draw) * (lengths - 1)).long() + 1
    cases = [
        Case("one example, no padding", (torch.tensor([2]), torch.tensor([5]), 5)),
        Case(
            "two examples, the second padded",
            (torch.tensor([1, 2]), torch.tensor([4, 3]), 4),
        ),
        Case(
            "a prompt as long as its example: no response",
            (torch.tensor([3]), torch.tensor([3]), 4),
        ),
        Case("six random examples in a longer batch", (prompts, lengths, 14)),
    ]
    run_check(
        "check_response_mask",
        learner,
        sft.response_mask,
        cases,
        blocked_functions=[sft.response_mask, sft.sft_batch],
    )
