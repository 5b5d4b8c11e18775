"""Direct preference optimisation (DPO): learning from pairs of answers, one preferred.

DPO (Rafailov et al., 2023) trains a policy on pairs (chosen, rejected) with no reward
model and no sampling: the loss is a logistic regression on how much more the policy
has raised the chosen answer's log-probability than the rejected one's, each measured
against a frozen reference,

    loss = -log sigmoid(beta * ((log pi(c) - log ref(c)) - (log pi(r) - log ref(r)))).

Its minimiser, given preferences drawn by Bradley-Terry from a reward r, is the
KL-regularised optimum pi*(y) = ref(y) exp(r(y) / beta) / Z. An answer's log-probability
is the SUM over its tokens, as in the paper and TRL's default; averaging per token
instead would change which policy is optimal (it favours long answers less).

    >>> chosen, rejected = torch.tensor([-3.0]), torch.tensor([-5.0])
    >>> loss = dpo_loss(chosen, rejected, chosen, rejected, beta=0.1)  # policy = ref
    >>> round(loss.item(), 4)  # log 2: the pair is not told apart yet
    0.6931
"""

import torch
import torch.nn.functional as F

from minformers.sft import token_log_probs


def sequence_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each row's summed log-probability of its labelled tokens: position t predicts
    label t + 1 (as ``sft_loss`` reads them) and -100 labels do not count.
    (B, T, V) logits and (B, T) labels -> (B,).

    >>> logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens
    >>> labels = torch.tensor([[-100, 2, 1]])  # two labelled tokens
    >>> sequence_log_probs(logits, labels) / torch.log(torch.tensor(0.25))
    tensor([2.])
    """
    return token_log_probs(logits, labels).sum(-1)


def dpo_loss(
    policy_chosen: torch.Tensor,
    policy_rejected: torch.Tensor,
    reference_chosen: torch.Tensor,
    reference_rejected: torch.Tensor,
    beta: float,
) -> torch.Tensor:
    """The mean DPO loss over a batch of pairs, from each answer's summed
    log-probability under the policy and under the reference, each (B,)."""
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta}")
    margin = implicit_reward(policy_chosen, reference_chosen, beta) - implicit_reward(
        policy_rejected, reference_rejected, beta
    )
    return -F.logsigmoid(margin).mean()


def implicit_reward(
    policy: torch.Tensor, reference: torch.Tensor, beta: float
) -> torch.Tensor:
    """beta * (log pi(y) - log ref(y)): the reward under which the policy would be
    the KL-regularised optimum (up to a constant per prompt).

    >>> implicit_reward(torch.tensor([-2.0]), torch.tensor([-4.0]), beta=0.5)
    tensor([1.])
    """
    return beta * (policy - reference)


def optimal_policy(
    reference_log_probs: torch.Tensor, reward: torch.Tensor, beta: float
) -> torch.Tensor:
    """log pi*(y) = log ref(y) + r(y) / beta - log Z, over the last dimension: the
    policy that maximises E[r] - beta KL(pi || ref), and DPO's target.

    >>> reference = torch.log(torch.tensor([0.5, 0.5]))
    >>> optimal_policy(reference, torch.tensor([0.0, 1.0]), beta=1.0).exp()
    tensor([0.2689, 0.7311])
    """
    return (reference_log_probs + reward / beta).log_softmax(-1)


def kl_divergence(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats, over the last dimension, from log-probabilities.

    >>> p, q = torch.tensor([1.0, 0.0]), torch.tensor([0.5, 0.5])
    >>> kl_divergence(p.log(), q.log())
    tensor(0.6931)
    """
    p = log_p.exp()
    # 0 log 0 = 0: an answer p never gives adds nothing, whatever q says
    return torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p)).sum(-1)


def bradley_terry_wins(
    first_reward: torch.Tensor, second_reward: torch.Tensor, draw: torch.Generator
) -> torch.Tensor:
    """Whether the first of each pair is preferred, drawn by Bradley-Terry: with
    probability sigmoid(r1 - r2), as a labeller whose preferences follow r would.

    >>> many = torch.zeros(10_000)
    >>> wins = bradley_terry_wins(many + 1.0, many, torch.Generator().manual_seed(0))
    >>> round(wins.float().mean().item(), 2)  # sigmoid(1) = 0.73
    0.73
    """
    p_first = torch.sigmoid(first_reward - second_reward)
    return torch.rand(p_first.shape, generator=draw) < p_first
