"""Skip-gram with negative sampling (word2vec, Mikolov et al. 2013): one static
vector per word.

Each word w has two vectors: v_w when it is the centre word and u_w when it is a context
word. For a (centre c, context o) pair seen in the text and K words k drawn from a noise
distribution, the model minimises -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c): seen pairs
score high, random pairs low. Words that occur in similar contexts end up with similar
v, whatever sentence they are in.

    >>> vocab = build_vocab([tokenize("The cat sat. The dog sat!")], min_count=2)
    >>> # "cat" is rarer than min_count
    >>> vocab.words, vocab.counts, vocab.encode(["the", "cat", "sat"])
    (('sat', 'the'), (2, 2), [1, 0])
    >>> # (centre, context) ids
    >>> skipgram_pairs([[1, 0, 1]], window=1).tolist()
    [[1, 0], [0, 1], [0, 1], [1, 0]]
"""

import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

from minformers.similarity import cosine_matrix
from minformers.support.arguments import require_size


def tokenize(text: str) -> list[str]:
    """Lowercased words (letters, with an inner apostrophe):
    "Bank's 2 rates, up!" -> ["bank's", "rates", "up"]."""
    return re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())


@dataclass(frozen=True)
class Vocabulary:
    # most frequent first (ties alphabetical), so the ids are reproducible
    words: tuple[str, ...]
    # corpus count of each word, same order: subsampling and the noise
    # distribution use them
    counts: tuple[int, ...]

    @cached_property
    def ids(self) -> dict[str, int]:
        return {word: index for index, word in enumerate(self.words)}

    def encode(self, words: list[str]) -> list[int]:
        """Ids of the words in the vocabulary; the others are dropped, as word2vec drops
        rare words before windowing."""
        return [self.ids[word] for word in words if word in self.ids]


def build_vocab(documents: list[list[str]], min_count: int = 5) -> Vocabulary:
    """Every word seen at least ``min_count`` times in ``documents``
    (lists of words), commonest first."""
    require_size("min_count", min_count)
    counts = Counter(word for document in documents for word in document)
    kept = sorted(
        (word for word, n in counts.items() if n >= min_count),
        key=lambda word: (-counts[word], word),
    )
    if not kept:
        raise ValueError(
            f"documents has no word seen min_count={min_count} times (corpus of "
            f"{counts.total()} words)"
        )
    return Vocabulary(tuple(kept), tuple(counts[word] for word in kept))


def keep_probabilities(counts: torch.Tensor, threshold: float = 1e-4) -> torch.Tensor:
    """Chance of keeping each occurrence of a word with relative frequency f:
    min(1, sqrt(threshold / f)).

    Frequent words ("the", "of") carry little information about their neighbours and
    would dominate the pairs; Mikolov et al. discard each occurrence with probability
    1 - sqrt(t / f).

    >>> # f = 0.96, 0.03, 0.01
    >>> keep_probabilities(torch.tensor([96.0, 3.0, 1.0]), threshold=0.01)
    tensor([0.1021, 0.5774, 1.0000])
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if counts.dim() != 1 or not (counts > 0).all():
        raise ValueError(
            "counts must be a 1-D tensor of positive counts, got shape "
            f"{tuple(counts.shape)}"
        )
    frequency = counts.double() / counts.sum()
    return (threshold / frequency).sqrt().clamp(max=1.0).float()


def subsample(
    documents: list[list[int]], keep: torch.Tensor, seed: int = 0
) -> list[list[int]]:
    """Drop each occurrence of word id w with probability 1 - keep[w] (once, seeded;
    word2vec redraws every epoch)."""
    generator = torch.Generator().manual_seed(seed)
    kept = []
    for ids in documents:
        ids = torch.tensor(ids, dtype=torch.long)
        kept.append(ids[torch.rand(len(ids), generator=generator) < keep[ids]].tolist())
    return kept


def skipgram_pairs(documents: list[list[int]], window: int) -> torch.Tensor:
    """Every (centre, context) pair at distance 1..window inside one document: (N, 2)
    ids, never across documents.

    [[5, 6, 7]], window=1 -> [[5, 6], [6, 7], [6, 5], [7, 6]]: offset by offset,
    left-to-right pairs then their mirrors.
    """
    require_size("window", window)
    pairs = []
    for ids in documents:
        ids = torch.tensor(ids, dtype=torch.long)
        for offset in range(1, min(window, len(ids) - 1) + 1):
            left, right = ids[:-offset], ids[offset:]  # the words `offset` apart
            # (2n, 2)
            pairs.append(
                torch.stack([torch.cat([left, right]), torch.cat([right, left])], dim=1)
            )
    if not pairs:
        raise ValueError(
            "documents must hold at least one document of two or more words"
        )
    return torch.cat(pairs)


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """Probabilities ∝ count^power for drawing negatives: 0.75 lifts rare words above
    their unigram share.

    >>> # 1, 8, 27, 64 out of 100
    >>> noise_distribution(torch.tensor([1.0, 16.0, 81.0, 256.0]))
    tensor([0.0100, 0.0800, 0.2700, 0.6400])
    """
    if counts.dim() != 1 or not (counts > 0).all():
        raise ValueError(
            "counts must be a 1-D tensor of positive counts, got shape "
            f"{tuple(counts.shape)}"
        )
    weights = counts.double() ** power
    return (weights / weights.sum()).float()


def sgns_loss(
    center: torch.Tensor, context: torch.Tensor, negatives: torch.Tensor
) -> torch.Tensor:
    """Mean over the batch of -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c).

    center v_c (B, C), context u_o (B, C), negatives u_k (B, K, C). With all vectors
    zero every score is 0 and the loss is (1 + K) log 2: one pair, two negatives
    -> 3 * 0.6931 = 2.0794.

    >>> loss = sgns_loss(torch.zeros(1, 4), torch.zeros(1, 4), torch.zeros(1, 2, 4))
    >>> round(loss.item(), 4)
    2.0794
    """
    if center.dim() != 2 or context.shape != center.shape:
        shapes = f"{tuple(center.shape)} and {tuple(context.shape)}"
        raise ValueError(f"center and context must both be (B, C), got {shapes}")
    if (
        negatives.dim() != 3
        or negatives.shape[0] != center.shape[0]
        or negatives.shape[2] != center.shape[1]
    ):
        raise ValueError(
            f"negatives must be (B, K, C) = ({center.shape[0]}, K, {center.shape[1]}), "
            f"got {tuple(negatives.shape)}"
        )
    positive = (center * context).sum(dim=-1)  # (B,) u_o·v_c
    # (B, K, C) * (B, 1, C) -> (B, K) u_k·v_c
    negative = (negatives * center[:, None, :]).sum(dim=-1)
    per_pair = -nn.functional.logsigmoid(positive) - nn.functional.logsigmoid(
        -negative
    ).sum(dim=-1)
    return per_pair.mean()


class SkipGram(nn.Module):
    """Two tables, as in word2vec: centre vectors (the word vectors one keeps)
    and context vectors."""

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        require_size("vocab_size", vocab_size)
        require_size("dim", dim)
        self.center = nn.Embedding(vocab_size, dim)
        self.context = nn.Embedding(vocab_size, dim)
        # word2vec's start: small random centres and zero contexts, so every first
        # score is 0 and every σ is 1/2
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.context.weight)

    def forward(
        self, centers: torch.Tensor, contexts: torch.Tensor, negatives: torch.Tensor
    ) -> torch.Tensor:
        """The SGNS loss of a batch of ids: centers (B,), contexts (B,),
        negatives (B, K)."""
        # (B, 1 + K, C): one lookup, one gradient table for the context vectors
        both = self.context(torch.cat([contexts[:, None], negatives], dim=1))
        return sgns_loss(self.center(centers), both[:, 0], both[:, 1:])


def pair_batches(
    pairs: torch.Tensor, noise: torch.Tensor, batch_size: int, negatives: int
):
    """A ``batch_for_step`` for ``train.train``: step s draws batch_size pairs and their
    negatives, seeded by s.

    Returns (centers (B,), contexts (B,), negatives (B, K)), the
    arguments of ``SkipGram.forward``.
    """
    require_size("batch_size", batch_size)
    require_size("negatives", negatives)
    if pairs.dim() != 2 or pairs.shape[1] != 2 or len(pairs) == 0:
        raise ValueError(
            "pairs must be a non-empty (N, 2) tensor of ids, got shape "
            f"{tuple(pairs.shape)}"
        )

    def batch_for_step(step: int):
        generator = torch.Generator().manual_seed(step)
        rows = torch.randint(len(pairs), (batch_size,), generator=generator)
        drawn = torch.multinomial(
            noise, batch_size * negatives, replacement=True, generator=generator
        )
        # (B,), (B,), (B, K)
        return pairs[rows, 0], pairs[rows, 1], drawn.view(batch_size, negatives)

    return batch_for_step


def nearest_words(
    vectors: torch.Tensor, vocab: Vocabulary, word: str, k: int = 5
) -> list[tuple[str, float]]:
    """The k words whose vectors have the highest cosine similarity with ``word``'s (the
    word itself left out)."""
    require_size("k", k)
    if word not in vocab.ids:
        raise ValueError(
            f"word {word!r} is not in the vocabulary of {len(vocab.words)} words"
        )
    scores = cosine_matrix(vectors[vocab.ids[word]][None], vectors)[0]  # (V,)
    scores[vocab.ids[word]] = -2.0  # below any cosine
    top = scores.topk(k)
    return [
        (vocab.words[i], round(s, 4))
        for i, s in zip(top.indices.tolist(), top.values.tolist(), strict=True)
    ]
