"""Supervised fine-tuning: a prompt and its response written as one text, the loss taken
on the response only.

An example is its prompt's tokens followed by its response's, the response ending in an
end token so that the model learns to stop. The model reads the whole text, as at
pretraining; only the response's tokens are scored: every other label is -100, which
cross-entropy ignores (TRL's completion mask, HF's ``ignore_index``).

Shape legend: B examples, T tokens.

    >>> ids, labels = sft_batch([[5, 6, 7, 8], [5, 9]], prompt_lengths=[2, 1], pad_id=0)
    >>> ids
    tensor([[5, 6, 7, 8],
            [5, 9, 0, 0]])
    >>> labels  # the response: 7, 8 of the first example, 9 of the second
    tensor([[-100, -100,    7,    8],
            [-100,    9, -100, -100]])
"""

from collections import defaultdict
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from minformers.generation import generate

IGNORE_INDEX = -100  # the label cross-entropy skips, as in torch and HF


def response_mask(
    prompt_lengths: torch.Tensor, lengths: torch.Tensor, T: int
) -> torch.Tensor:
    """(B,) prompt lengths and (B,) example lengths -> (B, T) bool, True at the
    response's positions: prompt_length <= t < length (padding is False).

    >>> response_mask(torch.tensor([1, 2]), torch.tensor([3, 2]), T=4)
    tensor([[False,  True,  True, False],
            [False, False, False, False]])
    """
    positions = torch.arange(T)  # (T,)
    return (positions >= prompt_lengths[:, None]) & (positions < lengths[:, None])


def masked_labels(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The token where ``mask`` is True, IGNORE_INDEX elsewhere: (B, T) -> (B, T)."""
    return ids.masked_fill(~mask, IGNORE_INDEX)


def sft_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the labelled next tokens: position t predicts label t + 1,
    as in pretraining, and positions whose next label is -100 do not count.
    (B, T, V) logits and (B, T) labels -> scalar."""
    # (B, T - 1, V) -> (B(T - 1), V) predictions of (B(T - 1),) labels
    return F.cross_entropy(
        logits[:, :-1].flatten(0, 1),
        labels[:, 1:].flatten(),
        ignore_index=IGNORE_INDEX,
    )


def token_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Each labelled next token's log-probability, read as ``sft_loss`` reads them
    (position t predicts label t + 1), and 0 where the label is -100: what DPO sums over
    an answer and GRPO weighs token by token. (B, T, V), (B, T) -> (B, T - 1).

    >>> logits = torch.zeros(1, 3, 4)  # uniform over 4 tokens
    >>> token_log_probs(logits, torch.tensor([[-100, 2, -100]])).exp()
    tensor([[0.2500, 1.0000]])
    """
    targets = labels[:, 1:]  # (B, T - 1)
    log_probs = logits[:, :-1].log_softmax(-1)  # (B, T - 1, V)
    picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return picked * (targets != IGNORE_INDEX)


def sft_batch(
    examples: Sequence[Sequence[int]],
    prompt_lengths: Sequence[int],
    pad_id: int,
    response_only: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad ``examples`` (token ids, prompt then response) to one length; return
    (ids (B, T), labels (B, T)). The labels are the response's tokens
    (``response_only``) or every token but the padding (the loss on all tokens, the
    usual alternative). Right padding leaves a causal model's reading of the real
    tokens unchanged, so no attention mask is needed."""
    if len(examples) != len(prompt_lengths) or not examples:
        raise ValueError(
            f"need one prompt length per example and at least one example, got "
            f"{len(examples)} examples and {len(prompt_lengths)} prompt lengths"
        )
    lengths = torch.tensor([len(example) for example in examples])  # (B,)
    starts = torch.tensor(list(prompt_lengths))  # (B,)
    if not ((starts >= 1) & (starts < lengths)).all():
        raise ValueError(
            "each prompt length must be at least 1 and shorter than its example, "
            "so that the response has tokens"
        )
    T = int(lengths.max())
    ids = torch.full((len(examples), T), pad_id)
    for row, example in enumerate(examples):
        ids[row, : len(example)] = torch.tensor(list(example))
    mask = response_mask(
        starts if response_only else torch.zeros_like(starts), lengths, T
    )
    return ids, masked_labels(ids, mask)


@torch.no_grad()
def continuations(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    end_id: int,
    samples: int = 1,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> list[list[list[int]]]:
    """For each prompt, ``samples`` texts ``model`` writes after it (greedily at
    temperature 0), each cut just after its end token, which it keeps (or at
    ``max_new_tokens`` tokens). Prompts of one length are decoded together, in one
    batch: with no attention mask, padding them would change what they read."""
    by_length = defaultdict(list)
    for index, prompt in enumerate(prompts):
        by_length[len(prompt)].append(index)
    written: list[list[list[int]]] = [[] for _ in prompts]
    for length, indices in by_length.items():
        # (B * samples, T): each prompt's samples side by side
        batch = torch.tensor([list(prompts[i]) for i in indices]).repeat_interleave(
            samples, 0
        )
        texts = generate(
            model, batch, max_new_tokens, temperature, generator=generator
        )[:, length:].tolist()
        for row, tokens in enumerate(texts):
            end = tokens.index(end_id) + 1 if end_id in tokens else len(tokens)
            written[indices[row // samples]].append(tokens[:end])
    return written


def greedy_responses(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    end_id: int,
) -> list[list[int]]:
    """What ``model`` writes greedily after each prompt, up to and without the end
    token (or ``max_new_tokens`` tokens)."""
    texts = continuations(model, prompts, max_new_tokens, end_id)
    return [text[0][:-1] if text[0][-1:] == [end_id] else text[0] for text in texts]
