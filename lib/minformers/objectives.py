"""Pretraining objectives as data transformations: what the model sees, and what
it must predict.

Every pretraining objective's data transformation is here, one short function each,
side by side to be compared.

- Masked language modelling (BERT): choose a fraction p of the ordinary tokens; of
  those, 80% become [MASK], 10% a random token and 10% stay as they are; predict the
  original token at the chosen positions only.
- Next sentence prediction (BERT): `[CLS] A [SEP] B [SEP]`, where B follows A in the
  corpus half the time and is a sentence from another document otherwise.
- Contiguous blocks (RoBERTa, without NSP): `[CLS] text [SEP]`, a document's token
  stream cut into full-length pieces.
- Replaced-token detection (ELECTRA): a generator fills the masked positions with
  sampled tokens; the discriminator labels every position 1 if its token differs from
  the original, 0 otherwise.

Labels use -100 for "not predicted here": torch's cross-entropy ignores it by default.

    >>> generator = torch.Generator().manual_seed(0)
    >>> # 2 = [CLS], 3 = [SEP]
    >>> ids = torch.tensor([[2, 10, 11, 12, 13, 14, 15, 16, 17, 3]])
    >>> masked, labels = mask_tokens(
    ...     ids,
    ...     vocab_size=20,
    ...     mask_id=4,
    ...     special_ids=[0, 1, 2, 3, 4],
    ...     p=0.5,
    ...     generator=generator,
    ... )
    >>> # labels are the originals, where predicted
    >>> bool(((labels == -100) | (labels == ids)).all())
    True
    >>> # [CLS] and [SEP] are never chosen
    >>> bool((masked[:, [0, -1]] == ids[:, [0, -1]]).all())
    True
"""

import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

# The label of a position that carries no loss (not chosen for prediction, or padding):
# the default ignore_index of torch's cross_entropy and of HF's models.
IGNORE_INDEX = -100


def _require_probability(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value}")


def mask_tokens(
    input_ids: torch.Tensor,
    vocab_size: int,
    mask_id: int,
    special_ids: Iterable[int],
    p: float = 0.15,
    split: tuple[float, float, float] = (0.8, 0.1, 0.1),
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking. Returns (masked input_ids, labels), both shaped like `input_ids`.

    Each token that is not special (never [CLS], [SEP], [PAD], [MASK], ...) is chosen
    independently with probability `p`. A chosen token becomes [MASK] with probability
    split[0], a random ordinary token with split[1], and stays itself with split[2]; its
    label is the original id. Every other label is -100. The random and unchanged cases
    keep the model from learning that only [MASK] positions matter, since at fine-tuning
    time there is no [MASK] at all.

    Call it once per batch for dynamic masking (RoBERTa), or once for the whole dataset
    for static masking.
    """
    if input_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"input_ids must be an integer tensor, got {input_ids.dtype}")
    _require_probability("p", p)
    if (
        len(split) != 3
        or any(share < 0 for share in split)
        or abs(sum(split) - 1.0) > 1e-6
    ):
        raise ValueError(
            "split must be three non-negative shares (mask, random, keep) summing to "
            f"1, got {split}"
        )
    if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= vocab_size):
        low, high = input_ids.min().item(), input_ids.max().item()
        raise ValueError(
            f"input_ids must lie in [0, vocab_size={vocab_size}), got values from "
            f"{low} to {high}"
        )
    special = torch.tensor(sorted(set(special_ids)), dtype=input_ids.dtype)
    if not 0 <= mask_id < vocab_size or mask_id not in special:
        raise ValueError(
            f"mask_id must be a special id in [0, vocab_size={vocab_size}), got "
            f"{mask_id}"
        )
    ordinary = torch.ones(vocab_size, dtype=torch.bool)
    ordinary[special] = False
    replacements = ordinary.nonzero().squeeze(1)  # the ids a "random token" may be

    def uniform() -> torch.Tensor:
        return torch.rand(input_ids.shape, generator=generator)

    chosen = (uniform() < p) & ~torch.isin(input_ids, special)
    kind = uniform()  # one draw per position decides [MASK], random or keep
    to_mask = chosen & (kind < split[0])
    to_randomise = chosen & (kind >= split[0]) & (kind < split[0] + split[1])
    random_ids = replacements[
        torch.randint(len(replacements), input_ids.shape, generator=generator)
    ]

    masked = input_ids.clone()
    masked[to_mask] = mask_id
    masked[to_randomise] = random_ids[to_randomise]
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
    return masked, labels


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences at ., ! or ? (or one inside a closing quote), then
    whitespace and a capital letter, digit or quote.

    >>> split_sentences("Profits rose 5%. Shares fell! Is it over? Mr. Smith said no.")
    ['Profits rose 5%.', 'Shares fell!', 'Is it over?', 'Mr.', 'Smith said no.']

    A rule this simple splits after abbreviations such as "Mr."; NSP only needs
    sentences that are mostly whole.
    """
    # the mark may sit inside a closing quote: ...said "Go." Then
    end = r"(?:(?<=[.!?])|(?<=[.!?][\"']))"
    pieces = re.split(end + r"\s+(?=[A-Z0-9\"'])", text.strip())
    return [piece.strip() for piece in pieces if piece.strip()]


@dataclass(frozen=True)
class SentencePair:
    input_ids: list[int]  # [CLS] A [SEP] B [SEP]
    # 0 for [CLS], A and the first [SEP]; 1 for B and the last [SEP]
    segment_ids: list[int]
    # 1 if B follows A in the corpus, 0 if B was drawn from another document
    is_next: int


def _truncate_pair(
    first: list[int], second: list[int], budget: int
) -> tuple[list[int], list[int]]:
    """Drop tokens from the end of the longer segment until both fit in
    `budget` tokens together."""
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        longer = first if len(first) >= len(second) else second
        longer.pop()
    return first, second


def sentence_pairs(
    documents: Sequence[Sequence[list[int]]],
    max_len: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
) -> list[SentencePair]:
    """NSP examples from tokenized documents (each a list of sentences, each a list of
    ids).

    Every sentence that has a successor in its document starts one pair. With
    probability 1/2, B is that successor (is_next=1); otherwise B is a random sentence
    of a different document (is_next=0). Pairs longer than `max_len` are cut from the
    end of the longer segment, so neither loses more than it must.
    """
    if max_len < 5:
        raise ValueError(
            f"max_len must be >= 5 to hold [CLS] A [SEP] B [SEP], got {max_len}"
        )
    if sum(1 for document in documents if document) < 2:
        raise ValueError(
            "documents must hold at least two non-empty documents, to draw random "
            "sentences from"
        )
    pairs = []
    for index, document in enumerate(documents):
        for position in range(len(document) - 1):
            first, is_next = document[position], int(rng.random() < 0.5)
            if is_next:
                second = document[position + 1]
            else:
                other = rng.randrange(len(documents) - 1)
                # any document but this one
                other_document = documents[other + (other >= index)]
                while not other_document:
                    other_document = documents[rng.randrange(len(documents))]
                second = rng.choice(other_document)
            first, second = _truncate_pair(first, second, max_len - 3)
            input_ids = [cls_id, *first, sep_id, *second, sep_id]
            segment_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
            pairs.append(SentencePair(input_ids, segment_ids, is_next))
    return pairs


def sentence_order_pairs(
    pairs: Sequence[SentencePair], rng: random.Random
) -> list[SentencePair]:
    """ALBERT's sentence-order prediction from NSP pairs: keep only the pairs whose B
    follows A, and swap the two segments of half of them. ``is_next`` stays "the second
    segment follows the first", so a swapped pair has is_next=0 and the NSP head and
    labels serve unchanged. Both segments always come from one document, so the topic
    gives nothing away, unlike NSP's random sentences: only the order does.
    ``sentence_pairs`` trims a too-long pair from the end of its longer segment, which
    leaves the first segment at most as long as the second; segments one token apart are
    cut to equal length here, so that length does not reveal the order.

    >>> pair = SentencePair([2, 5, 6, 3, 7, 8, 3], [0, 0, 0, 0, 1, 1, 1], is_next=1)
    >>> sentence_order_pairs([pair] * 3, random.Random(1))[0]
    SentencePair(input_ids=[2, 7, 8, 3, 5, 6, 3],
                 segment_ids=[0, 0, 0, 0, 1, 1, 1], is_next=0)
    """
    ordered = []
    for pair in pairs:
        if not pair.is_next:
            continue
        boundary = pair.segment_ids.index(1)  # [CLS] A [SEP] | B [SEP]
        cls_id, first, sep_id = (
            pair.input_ids[0],
            pair.input_ids[1 : boundary - 1],
            pair.input_ids[boundary - 1],
        )
        second = pair.input_ids[boundary:-1]
        # truncation leaves len(A) <= len(B): equal them, or the lengths alone would
        # give the order away
        if abs(len(first) - len(second)) == 1:
            first, second = first[: len(second)], second[: len(first)]
        swapped = rng.random() < 0.5
        if swapped:
            first, second = second, first
        input_ids = [cls_id, *first, sep_id, *second, sep_id]
        segment_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        ordered.append(SentencePair(input_ids, segment_ids, is_next=int(not swapped)))
    return ordered


def shared_piece_baseline(
    train: Sequence[SentencePair],
    held_out: Sequence[SentencePair],
    special_ids: Iterable[int],
) -> float:
    """How far NSP's topic cue alone goes: a random B comes from another article, so it
    tends to share fewer rare pieces with A than the true next sentence does. Score a
    pair by the ordinary pieces its two segments share, each weighted by its inverse
    document frequency over the ``train`` pairs (a shared "chelsea" says more than a
    shared "the"); predict "B follows A" at or above the threshold that scores best on
    ``train``; return the accuracy of that rule on ``held_out``. No learned weights: a
    yardstick for what a model could find.

    >>> pair = lambda a, b, is_next: SentencePair(
    ...     [2, *a, 3, *b, 3], [0] * (len(a) + 2) + [1] * (len(b) + 1), is_next
    ... )
    >>> train = [pair([5, 6], [6, 7], 1), pair([5, 8], [9, 7], 0)]
    >>> shared_piece_baseline(
    ...     train, [pair([10, 11], [11, 5], 1), pair([12], [13], 0)], special_ids=[2, 3]
    ... )
    1.0
    """
    if not train or not held_out:
        raise ValueError(
            f"need training and held-out pairs, got {len(train)} and {len(held_out)}"
        )
    special = set(special_ids)

    def segments(pair: SentencePair) -> tuple[set[int], set[int]]:
        first = {
            token
            for token, segment in zip(pair.input_ids, pair.segment_ids, strict=True)
            if segment == 0
        }
        second = {
            token
            for token, segment in zip(pair.input_ids, pair.segment_ids, strict=True)
            if segment == 1
        }
        return first - special, second - special

    document_frequency = Counter(
        token for pair in train for token in set(pair.input_ids)
    )
    # a piece no training pair holds is as rare as can be
    unseen = math.log(len(train) + 1)

    def score(pair: SentencePair) -> float:
        first, second = segments(pair)
        return sum(
            math.log(len(train) / document_frequency[token])
            if document_frequency[token]
            else unseen
            for token in first & second
        )

    # Sweep the threshold over the sorted training scores: predicting "next" from
    # position i on gets the random pairs before i and the next pairs from i right.
    ranked = sorted((score(pair), pair.is_next) for pair in train)
    next_from = [0] * (len(ranked) + 1)
    for index in range(len(ranked) - 1, -1, -1):
        next_from[index] = next_from[index + 1] + ranked[index][1]
    best_correct, threshold, random_before = next_from[0], ranked[0][0], 0
    for index in range(1, len(ranked) + 1):
        random_before += 1 - ranked[index - 1][1]
        if index < len(ranked) and ranked[index][0] == ranked[index - 1][0]:
            continue  # a threshold cannot fall between equal scores
        correct = random_before + next_from[index]
        if correct > best_correct:
            best_correct = correct
            threshold = ranked[index][0] if index < len(ranked) else math.inf
    return sum(
        (score(pair) >= threshold) == bool(pair.is_next) for pair in held_out
    ) / len(held_out)


def contiguous_blocks(
    documents: Sequence[Sequence[list[int]]], length: int, cls_id: int, sep_id: int
) -> list[list[int]]:
    """RoBERTa's input without NSP: each document's sentences joined into one token
    stream and cut into ``[CLS] text [SEP]`` blocks of ``length`` tokens; only a
    document's last block may be shorter. Blocks never cross documents, so no block
    mixes two articles.

    >>> contiguous_blocks([[[5, 6], [7, 8, 9]], [[10]]], length=5, cls_id=2, sep_id=3)
    [[2, 5, 6, 7, 3], [2, 8, 9, 3], [2, 10, 3]]
    """
    if length < 3:
        raise ValueError(
            f"length must be >= 3 to hold [CLS] a token [SEP], got {length}"
        )
    blocks = []
    for document in documents:
        stream = [token for sentence in document for token in sentence]
        for start in range(0, len(stream), length - 2):
            blocks.append([cls_id, *stream[start : start + length - 2], sep_id])
    if not blocks:
        raise ValueError("documents hold no tokens")
    return blocks


def replace_tokens(
    original_ids: torch.Tensor, mlm_labels: torch.Tensor, sampled: torch.Tensor
) -> torch.Tensor:
    """ELECTRA's corrupted input: ``original_ids`` (B, T) with the positions that carry
    an MLM label (row-major order, as ``BertForPreTraining`` returns its logits) set to
    the generator's ``sampled`` tokens (N,)."""
    labelled = mlm_labels != IGNORE_INDEX
    if sampled.shape != (int(labelled.sum()),):
        raise ValueError(
            "sampled must hold one token per labelled position, "
            f"{int(labelled.sum())}, got shape {tuple(sampled.shape)}"
        )
    corrupted = original_ids.clone()
    corrupted[labelled] = sampled
    return corrupted


def replaced_token_labels(
    original_ids: torch.Tensor, corrupted_ids: torch.Tensor
) -> torch.Tensor:
    """The discriminator's targets, (B, T) floats: 1 where the token differs from the
    original, 0 elsewhere. A sampled token that happens to equal the original counts as
    original (ELECTRA's rule): there is nothing to detect there.

    >>> original, corrupted = torch.tensor([[2, 7, 8, 3]]), torch.tensor([[2, 9, 8, 3]])
    >>> replaced_token_labels(original, corrupted)
    tensor([[0., 1., 0., 0.]])
    """
    if original_ids.shape != corrupted_ids.shape:
        raise ValueError(
            f"shapes differ: original {tuple(original_ids.shape)}, corrupted "
            f"{tuple(corrupted_ids.shape)}"
        )
    return (original_ids != corrupted_ids).float()


def pad(
    sequences: Sequence[list[int]], pad_id: int, length: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into a (B, T) tensor; returns (ids, attention_mask), the
    mask 1 on real tokens.

    >>> pad([[5, 6, 7], [8]], pad_id=0)
    (tensor([[5, 6, 7],
            [8, 0, 0]]), tensor([[1, 1, 1],
            [1, 0, 0]]))
    """
    lengths = [len(sequence) for sequence in sequences]
    length = max(lengths) if length is None else length
    if lengths and max(lengths) > length:
        raise ValueError(
            f"a sequence of {max(lengths)} ids does not fit length={length}"
        )
    # one tensor from one padded list: a small batch's time goes to per-row calls
    rows = [
        list(sequence) + [pad_id] * (length - len(sequence)) for sequence in sequences
    ]
    ids = torch.tensor(rows, dtype=torch.long).reshape(len(sequences), length)
    attention_mask = (torch.arange(length) < torch.tensor(lengths).unsqueeze(1)).long()
    return ids, attention_mask
