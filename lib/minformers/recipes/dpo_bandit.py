"""DPO where the answer can be checked: a policy over a few dozen answers to one
prompt, small enough to write down whole, so that what DPO reaches can be compared with
the optimum pi* = ref exp(r / beta) / Z exactly (the DPO page's first experiment).

Pairs are drawn from the reference and labelled by Bradley-Terry on a known reward r,
afresh at every step, as if from an endless stream of human comparisons; the policy's
logits are trained with the DPO loss from the reference's.

    >>> bandit = Bandit(answers=4)
    >>> bandit.reference().exp().sum().item()
    1.0
"""

from dataclasses import dataclass

import torch

from minformers.preference import (
    bradley_terry_wins,
    dpo_loss,
    kl_divergence,
    optimal_policy,
)


@dataclass(frozen=True)
class Bandit:
    """One prompt, ``answers`` possible answers: a reference policy and a reward."""

    answers: int = 32
    seed: int = 0  # the draw of the reference and the reward

    def reference(self) -> torch.Tensor:
        """The reference policy's log-probabilities, (answers,): some answers common,
        some rare, as a pretrained model's would be."""
        draw = torch.Generator().manual_seed(self.seed)
        return torch.randn(self.answers, generator=draw).mul(1.5).log_softmax(0)

    def reward(self) -> torch.Tensor:
        """The true reward of each answer, (answers,), unrelated to how common it is."""
        draw = torch.Generator().manual_seed(self.seed + 1)
        return torch.randn(self.answers, generator=draw)

    def optimum(self, beta: float) -> torch.Tensor:
        return optimal_policy(self.reference(), self.reward(), beta)


def preference_pairs(
    bandit: Bandit, n: int, draw: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of answers drawn from the reference, each ordered (chosen, rejected)
    by a Bradley-Terry draw: y1 is preferred to y2 with probability
    sigmoid(r(y1) - r(y2))."""
    reference, reward = bandit.reference(), bandit.reward()
    drawn = torch.multinomial(reference.exp(), 2 * n, replacement=True, generator=draw)
    first, second = drawn.chunk(2)
    first_wins = bradley_terry_wins(reward[first], reward[second], draw)
    chosen = torch.where(first_wins, first, second)
    return chosen, first + second - chosen


def train_dpo(
    bandit: Bandit,
    beta: float,
    steps: int = 1500,
    pairs_per_step: int = 512,
    lr: float = 0.1,
    seed: int = 0,
    pairs=preference_pairs,
) -> tuple[torch.Tensor, list[float]]:
    """Train the policy's logits (from the reference's) with DPO on fresh pairs, drawn
    by ``pairs(bandit, n, draw)``; return its log-probabilities and KL(policy || pi*)
    after each step. Adam's step decays linearly to zero, so the last steps average out
    the draw of the pairs."""
    reference, target = bandit.reference(), bandit.optimum(beta)
    logits = reference.clone().requires_grad_()
    optimizer = torch.optim.Adam([logits], lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1 - s / steps)
    draw = torch.Generator().manual_seed(seed)
    kl_to_optimum = []
    for _ in range(steps):
        chosen, rejected = pairs(bandit, pairs_per_step, draw)
        policy = logits.log_softmax(0)
        loss = dpo_loss(
            policy[chosen],
            policy[rejected],
            reference[chosen],
            reference[rejected],
            beta,
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        with torch.no_grad():
            kl_to_optimum.append(kl_divergence(logits.log_softmax(0), target).item())
    return logits.detach().log_softmax(0), kl_to_optimum
