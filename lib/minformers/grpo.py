"""Group relative policy optimisation (GRPO): reinforcement learning from a reward that
a program computes, such as whether an answer is right.

For each prompt the policy writes a group of G answers; each answer's advantage is its
reward measured against its own group's (Shao et al., 2024), so no value network is
needed:

    A_i = (r_i - mean(r)) / (std(r) + 1e-4)    (or r_i - mean(r), unscaled)

and the policy takes PPO's clipped step on every token of the answer, with an optional
KL penalty towards a reference model,

    loss = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) + beta * ratio * KL,
    ratio = pi(token) / pi_old(token),

averaged over every answer token of the batch (``average="token"``, DAPO's choice and
TRL's default), or over each answer's tokens and then over the answers
(``average="answer"``, the GRPO paper's, which weighs a short answer's tokens more). A
group whose answers all score the same teaches nothing: every advantage is 0.

    >>> group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]), group_size=3)
    tensor([ 1.1545, -0.5773, -0.5773, -1.1545,  0.5773,  0.5773])
"""

import torch


def group_advantages(
    rewards: torch.Tensor, group_size: int, scale: bool = True
) -> torch.Tensor:
    """Each answer's reward minus its group's mean, divided by the group's standard
    deviation (unbiased, plus 1e-4) when ``scale``. ``rewards`` (B,) holds the groups
    one after another, ``group_size`` answers each."""
    if rewards.numel() % group_size:
        raise ValueError(
            f"{rewards.numel()} rewards do not make groups of {group_size}"
        )
    groups = rewards.view(-1, group_size)
    centred = groups - groups.mean(1, keepdim=True)
    if scale:
        centred = centred / (groups.std(1, keepdim=True) + 1e-4)
    return centred.flatten()


def kl_estimate(policy: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Per token, an unbiased and never negative estimate of KL(pi || ref) from one
    sample of pi (Schulman's k3): exp(q - p) - (q - p) - 1 with p, q the token's
    log-probabilities under the policy and the reference.

    >>> kl_estimate(torch.tensor([-1.0]), torch.tensor([-1.0]))
    tensor([0.])
    """
    difference = reference - policy
    return difference.exp() - difference - 1


def grpo_loss(
    policy: torch.Tensor,
    old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    epsilon: float = 0.2,
    beta: float = 0.0,
    reference: torch.Tensor | None = None,
    average: str = "token",
) -> torch.Tensor:
    """The GRPO loss of a batch of answers: per-token log-probabilities (B, T) under the
    policy being trained, the policy that sampled them (``old``) and, when ``beta`` > 0,
    the reference; each answer's advantage (B,); ``mask`` (B, T) 1 on the answer's
    tokens; ``average`` over "token" or "answer"."""
    if average not in ("token", "answer"):
        raise ValueError(f'average must be "token" or "answer", got {average!r}')
    if beta > 0 and reference is None:
        raise ValueError(
            "a KL penalty (beta > 0) needs the reference's log-probabilities"
        )
    ratio = (policy - old).exp()
    advantage = advantages[:, None]
    clipped = ratio.clamp(1 - epsilon, 1 + epsilon)
    per_token = -torch.min(ratio * advantage, clipped * advantage)
    if beta > 0:
        # weighted by the ratio, as TRL does by default: the tokens were sampled from
        # pi_old, and the weight makes the penalty's gradient that of KL(pi || ref)
        per_token = per_token + beta * ratio * kl_estimate(policy, reference)
    mask = mask.to(per_token.dtype)
    if average == "token":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    return ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
