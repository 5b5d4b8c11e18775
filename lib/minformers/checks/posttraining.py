"""Checks for the post-training pages: the response mask of supervised fine-tuning, the
merge of a LoRA adapter, the DPO loss, GRPO's group advantages.

>>> def includes_padding(prompt_lengths, lengths, T):  # forgets where the example ends
...     return torch.arange(T) >= prompt_lengths[:, None]
>>> check_response_mask(includes_padding)
Traceback (most recent call last):
minformers.checks.CheckFailed: check_response_mask, case 'two examples, the second padded': ...
...
"""

from collections.abc import Callable

import torch

from minformers import grpo, lora, preference, sft
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


def _merged_by_lib(
    weight: torch.Tensor, A: torch.Tensor, B: torch.Tensor, alpha: float, r: int
) -> torch.Tensor:
    base = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    layer = lora.LoRALinear(base, r=r, alpha=alpha)
    with torch.no_grad():
        base.weight.copy_(weight), layer.A.copy_(A), layer.B.copy_(B)
    layer.merge()
    return base.weight.detach().clone()


def check_lora_merge(
    learner: Callable[
        [torch.Tensor, torch.Tensor, torch.Tensor, float, int], torch.Tensor
    ],
) -> None:
    """Exercise: `learner(weight, A, B, alpha, r)` is the merged (out, in) weight of a
    LoRA-adapted linear layer, as LoRALinear.merge leaves it."""
    draw = seeded_generator()

    def adapter(out: int, inp: int, r: int, alpha: float) -> Case:
        weight = torch.randn(out, inp, generator=draw)
        A, B = torch.randn(r, inp, generator=draw), torch.randn(out, r, generator=draw)
        return Case(
            f"{out} x {inp}, r = {r}, alpha = {alpha}", (weight, A, B, alpha, r)
        )

    cases = [
        adapter(3, 3, 1, 1.0),
        adapter(5, 7, 2, 2.0),
        adapter(4, 6, 2, 8.0),
        adapter(16, 9, 4, 1.0),
    ]
    run_check(
        "check_lora_merge",
        learner,
        _merged_by_lib,
        cases,
        # merge calls delta_weight: blocking it blocks every way through the lib
        blocked_functions=[lora.LoRALinear.delta_weight, lora.merge_lora],
    )


def check_dpo_loss(
    learner: Callable[
        [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float], torch.Tensor
    ],
) -> None:
    """Exercise: `learner(policy_chosen, policy_rejected, reference_chosen,
    reference_rejected, beta)`, each (B,) summed log-probabilities, is the mean DPO loss
    of the batch, as preference.dpo_loss gives it."""
    draw = seeded_generator()

    def batch(size: int, beta: float, spread: float = 5.0) -> Case:
        logps = [-spread * torch.rand(size, generator=draw) for _ in range(4)]
        return Case(f"a batch of {size}, beta = {beta}", (*logps, beta))

    cases = [batch(1, 0.1), batch(4, 0.5), batch(7, 1.0), batch(3, 0.05, spread=80.0)]
    # the policy equal to the reference: the loss is log 2 whatever beta is
    same = -torch.rand(5, generator=draw)
    cases.append(Case("policy = reference", (same, same - 1, same, same - 1, 0.3)))
    run_check(
        "check_dpo_loss",
        learner,
        preference.dpo_loss,
        cases,
        blocked_functions=[preference.dpo_loss, preference.implicit_reward],
    )


def check_group_advantages(
    learner: Callable[[torch.Tensor, int], torch.Tensor],
) -> None:
    """Exercise: `learner(rewards, group_size)`, rewards (B,) holding groups of
    `group_size` answers one after another, is each answer's advantage: its reward minus
    its group's mean, over the group's standard deviation (unbiased) plus 1e-4, as
    grpo.group_advantages gives it."""
    draw = seeded_generator()
    right = (torch.rand(24, generator=draw) < 0.4).float()  # 3 groups of 8, 0 or 1
    scores = right + 0.1 * (torch.rand(24, generator=draw) < 0.8).float()
    cases = [
        Case("one group of 4", (torch.tensor([1.0, 0.0, 0.0, 1.0]), 4)),
        Case("two groups of 3", (torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]), 3)),
        Case("a group whose answers all scored alike", (torch.ones(5), 5)),
        Case("3 groups of 8, right or wrong", (right, 8)),
        Case("3 groups of 8, with a format reward", (scores, 8)),
        Case("6 groups of 4, the same rewards", (scores, 4)),
    ]
    run_check(
        "check_group_advantages",
        learner,
        grpo.group_advantages,
        cases,
        blocked_functions=[grpo.group_advantages],
    )
