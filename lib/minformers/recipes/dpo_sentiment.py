"""DPO on text: the Shakespeare GPT taught to write lines that a sentiment lexicon
scores higher, as in the DPO paper's IMDb experiment but with a reward anyone can read:
the summed valence of the completion's words in VADER's lexicon (Hutto and Gilbert
2014).

The GPT page's model is the reference. Each prompt is a short stretch of Shakespeare;
two completions sampled from the reference make a pair, ordered by a Bradley-Terry draw
on the true reward. DPO trains a copy of the reference on those pairs; what it reaches
is measured on fresh prompts, by the true reward of its samples and their Monte-Carlo
KL from the reference, against two baselines: best-of-n sampling from the reference, and
fine-tuning on the chosen completions alone.

    >>> valence = {"love": 3.2, "hate": -2.7}
    >>> sentiment("O love, I hate thee; love!", valence)
    3.7
"""

import math
import re
from dataclasses import dataclass

import torch

from minformers.generation import generate
from minformers.language_modeling import random_windows
from minformers.preference import bradley_terry_wins, dpo_loss, sequence_log_probs
from minformers.sft import IGNORE_INDEX

PROMPT_LENGTH, COMPLETION_LENGTH = 16, 48  # characters; together the model's context
WORD = re.compile(r"[a-z']+")


def sentiment(text: str, valence: dict[str, float]) -> float:
    """The summed valence of the words of ``text`` that the lexicon knows."""
    return round(sum(valence.get(w, 0.0) for w in WORD.findall(text.lower())), 6)


def prompts(ids: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` stretches of PROMPT_LENGTH tokens from the 1-D ``ids``: (n, P)."""
    return random_windows(ids, PROMPT_LENGTH, n, torch.Generator().manual_seed(seed))


def sample(model, prompt_ids: torch.Tensor, seed: int) -> torch.Tensor:
    """One completion per prompt at temperature 1: (n, P + C) token ids."""
    draw = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        return generate(model, prompt_ids, COMPLETION_LENGTH, generator=draw)


def completion_labels(ids: torch.Tensor) -> torch.Tensor:
    """Labels for the completion's tokens only: -100 over the prompt."""
    labels = ids.clone()
    labels[:, :PROMPT_LENGTH] = IGNORE_INDEX
    return labels


def completion_log_probs(model, ids: torch.Tensor) -> torch.Tensor:
    """Each row's summed log-probability of its completion given its prompt: (n,)."""
    return sequence_log_probs(model(ids), completion_labels(ids))


def rewards(texts: torch.Tensor, decode, valence: dict[str, float]) -> torch.Tensor:
    """The true reward of each row's completion: (n,)."""
    return torch.tensor(
        [sentiment(decode(row[PROMPT_LENGTH:].tolist()), valence) for row in texts]
    )


@dataclass
class Pairs:
    """Preference pairs: (n, P + C) chosen and rejected texts, sharing their prompts,
    and the reference's summed log-probabilities of each completion."""

    chosen: torch.Tensor
    rejected: torch.Tensor
    reference_chosen: torch.Tensor
    reference_rejected: torch.Tensor

    def __len__(self) -> int:
        return len(self.chosen)


def preference_pairs(
    reference, prompt_ids: torch.Tensor, decode, valence, seed: int
) -> Pairs:
    """Two completions per prompt from the reference, ordered by a Bradley-Terry draw
    on the true reward: the first is chosen with probability sigmoid(r1 - r2). A pair
    whose two completions score the same (often both 0: no word the lexicon knows) is
    dropped, as preference datasets drop ties: its label would be a coin toss."""
    first, second = (
        sample(reference, prompt_ids, seed),
        sample(reference, prompt_ids, seed + 1),
    )
    first_reward, second_reward = (
        rewards(first, decode, valence),
        rewards(second, decode, valence),
    )
    untied = first_reward != second_reward
    first, second = first[untied], second[untied]
    draw = torch.Generator().manual_seed(seed + 2)
    first_wins = bradley_terry_wins(first_reward[untied], second_reward[untied], draw)[
        :, None
    ]
    chosen = torch.where(first_wins, first, second)
    rejected = torch.where(first_wins, second, first)
    with torch.no_grad():
        return Pairs(
            chosen,
            rejected,
            completion_log_probs(reference.eval(), chosen),
            completion_log_probs(reference.eval(), rejected),
        )


def pair_batches(pairs: Pairs, batch_size: int, seed: int):
    """batch_for_step: ``batch_size`` pairs drawn at random, seeded by the step."""

    def batch_for_step(step: int) -> torch.Tensor:
        draw = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return torch.randint(len(pairs), (batch_size,), generator=draw)

    return batch_for_step


def dpo_step_loss(pairs: Pairs, beta: float):
    """loss_for_batch for DPO: the loss, and the policy's mean summed log-probability
    of the chosen and of the rejected completions (both may fall while their gap
    grows)."""

    def loss_for_batch(policy, rows: torch.Tensor) -> dict[str, torch.Tensor]:
        both = torch.cat([pairs.chosen[rows], pairs.rejected[rows]])  # one forward pass
        chosen, rejected = completion_log_probs(policy, both).chunk(2)
        loss = dpo_loss(
            chosen,
            rejected,
            pairs.reference_chosen[rows],
            pairs.reference_rejected[rows],
            beta,
        )
        return {
            "loss": loss,
            "chosen log-prob": chosen.mean().detach(),
            "rejected log-prob": rejected.mean().detach(),
        }

    return loss_for_batch


def chosen_nll_loss(pairs: Pairs):
    """loss_for_batch for the baseline: fine-tuning on the chosen completions alone."""

    def loss_for_batch(policy, rows: torch.Tensor) -> torch.Tensor:
        ids = pairs.chosen[rows]
        return -completion_log_probs(policy, ids).mean() / COMPLETION_LENGTH

    return loss_for_batch


def ranked_as_labelled(policy, reference_pairs: Pairs) -> torch.Tensor:
    """(pairs,) bool: whether the policy has raised each pair's chosen completion more,
    relative to the reference, than the rejected one (its implicit reward ranks the
    pair as the label does)."""
    with torch.no_grad():
        chosen = completion_log_probs(policy.eval(), reference_pairs.chosen)
        rejected = completion_log_probs(policy.eval(), reference_pairs.rejected)
    margin = (chosen - reference_pairs.reference_chosen) - (
        rejected - reference_pairs.reference_rejected
    )
    return margin > 0


def preference_accuracy(policy, reference_pairs: Pairs) -> float:
    """The share of held-out pairs the policy ranks as labelled (``ranked_as_labelled``)."""
    return ranked_as_labelled(policy, reference_pairs).float().mean().item()


@dataclass
class Measured:
    """A policy's samples on fresh prompts: the true reward (mean, standard error) and
    the Monte-Carlo KL from the reference, mean over samples of log pi - log ref; and
    the reward of each prompt's sample, for paired comparisons on the same prompts."""

    reward: float
    reward_error: float
    kl: float
    per_prompt: torch.Tensor  # (prompts,)


def measure(policy, reference, prompt_ids, decode, valence, seed: int) -> Measured:
    texts = sample(policy, prompt_ids, seed)
    scores = rewards(texts, decode, valence)
    with torch.no_grad():
        kl = completion_log_probs(policy.eval(), texts) - completion_log_probs(
            reference.eval(), texts
        )
    return Measured(
        scores.mean().item(),
        (scores.std() / len(scores) ** 0.5).item(),
        kl.mean().item(),
        scores,
    )


def best_of_n(
    reference, prompt_ids, ns: tuple[int, ...], decode, valence, seed: int
) -> dict[int, Measured]:
    """For each n in ``ns``: sample n completions per prompt from the reference and
    keep the best by the true reward (the smaller n reuse the larger's first samples).
    Its KL from the reference is at most log n - (n - 1) / n (Beirami et al. 2024),
    reported as that bound."""
    scores = torch.stack(
        [
            rewards(sample(reference, prompt_ids, seed + i), decode, valence)
            for i in range(max(ns))
        ]
    )  # (samples, prompts)
    measured = {}
    for n in ns:
        best = scores[:n].max(0).values
        bound = math.log(n) - (n - 1) / n
        measured[n] = Measured(
            best.mean().item(), (best.std() / len(best) ** 0.5).item(), bound, best
        )
    return measured
