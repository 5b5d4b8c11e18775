"""Retrieval for retrieval-augmented generation: BM25 over words, dense vectors from an
encoder, and the measures of a ranking (recall@k, MRR).

Sparse (BM25) and dense retrieval, their metrics and reranking form one pipeline, which
the RAG page runs end to end.

BM25 (Robertson and Zaragoza, 2009) scores a document d for a query q as a sum over the
query's terms t:

    score(q, d) = sum_t idf(t) * f(t, d) * (k1 + 1)
                        / (f(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))

with f(t, d) the count of t in d, |d| the length of d in terms, avgdl the mean length, N
the number of documents and n(t) how many contain t. k1 sets how fast repeats of a term
stop adding score; b how much a long document is penalised. This idf is Lucene's: never
negative, so a term in most documents adds little rather than subtracting.

    >>> documents = [
    ...     tokenize("The cat sat."),
    ...     tokenize("A dog sat on a cat mat."),
    ...     tokenize("Dogs bark."),
    ... ]
    >>> index = BM25(documents)
    >>> # "cat" is in 2 of the 3 documents; the shorter one wins
    >>> index.scores(tokenize("cat")).round(decimals=4).tolist()
    [0.5296, 0.3514, 0.0]
    >>> ranking = index.scores(tokenize("dog mat")).argsort(descending=True).tolist()
    >>> (
    ...     ranking,
    ...     recall_at_k([ranking], [{1}], k=1),
    ...     mean_reciprocal_rank([[2, 1, 0]], [{1}]),
    ... )
    ([1, 0, 2], 1.0, 0.5)
"""

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bert import BertConfig, BertModel, init_bert_weights
from minformers.finetuning import encode_sentences, sentence_features
from minformers.objectives import pad
from minformers.similarity import cosine_matrix
from minformers.support.arguments import require_size

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """BM25's terms: lowercase runs of letters and digits; everything
    else separates them.

    >>> tokenize("Profits rose 5.6% to £1,200m in 2004!")
    ['profits', 'rose', '5', '6', 'to', '1', '200m', 'in', '2004']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return _WORD.findall(text.lower())


class BM25:
    """A BM25 index over tokenized documents (lists of terms). ``scores(query)`` gives
    every document's score."""

    def __init__(
        self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75
    ):
        if isinstance(documents, str) or not documents:
            raise ValueError("documents must be a non-empty list of token lists")
        if not all(isinstance(document, list | tuple) for document in documents):
            raise TypeError(
                "each document must be a list of terms (use tokenize(text))"
            )
        # written this way round, NaN fails too
        if not (isinstance(k1, int | float) and k1 >= 0):
            raise ValueError(f"k1 must be a number >= 0, got {k1}")
        if not (isinstance(b, int | float) and 0 <= b <= 1):
            raise ValueError(f"b must be in [0, 1], got {b}")
        self.k1, self.b = float(k1), float(b)
        self.n_documents = len(documents)
        # |d|
        self.lengths = torch.tensor(
            [len(document) for document in documents], dtype=torch.float64
        )
        # avgdl; all-empty documents score 0 anyway
        self.average_length = max(self.lengths.mean().item(), 1e-12)
        # The inverted index: term -> (ids of the documents holding it, its count in
        # each), so a query touches only the documents that share a term with it.
        postings: dict[str, dict[int, int]] = {}
        for index, document in enumerate(documents):
            for term, count in Counter(document).items():
                postings.setdefault(term, {})[index] = count
        self.postings = {
            term: (
                torch.tensor(list(counts)),
                torch.tensor(list(counts.values()), dtype=torch.float64),
            )
            for term, counts in postings.items()
        }

    def idf(self, term: str) -> float:
        """ln(1 + (N - n + 0.5) / (n + 0.5)), n the number of documents
        that hold ``term``."""
        n = len(self.postings[term][0]) if term in self.postings else 0
        return math.log(1 + (self.n_documents - n + 0.5) / (n + 0.5))

    def scores(self, query: Sequence[str]) -> torch.Tensor:
        """(N,) float64 scores of every document for ``query`` (a list of terms; a
        repeated term counts each time, as in Lucene). A term that no document holds
        adds nothing."""
        if isinstance(query, str):
            raise TypeError(
                "query must be a list of terms (use tokenize(text)), not a str"
            )
        total = torch.zeros(self.n_documents, dtype=torch.float64)
        # Per document, the length part of the denominator:
        # k1 * (1 - b + b * |d| / avgdl).
        length_norm = self.k1 * (
            1 - self.b + self.b * self.lengths / self.average_length
        )
        for term in query:
            if term not in self.postings:
                continue
            documents, counts = self.postings[term]
            saturated = counts * (self.k1 + 1) / (counts + length_norm[documents])
            total[documents] += self.idf(term) * saturated
        return total

    def search(self, query: Sequence[str], k: int) -> list[int]:
        """Ids of the ``k`` best documents, best first; ties go to the lower id, so
        rankings are reproducible."""
        return top_k(self.scores(query)[None], k)[0]


def top_k(scores: torch.Tensor, k: int) -> list[list[int]]:
    """For (Q, N) scores, each row's ``k`` best column ids, best first; equal scores
    keep the lower id first.

    >>> top_k(torch.tensor([[0.1, 0.9, 0.9, 0.3]]), k=3)
    [[1, 2, 3]]
    """
    if scores.dim() != 2:
        raise ValueError(f"scores must be (Q, N), got shape {tuple(scores.shape)}")
    require_size("k", k)
    # stable: ties stay in id order
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    return order[:, :k].tolist()


@torch.no_grad()
def embed_texts(
    encoder, tokenizer, texts: Sequence[str], max_len: int = 128, batch_size: int = 32
) -> torch.Tensor:
    """Unit-length sentence vectors (N, C): each text as ``[CLS] pieces [SEP]`` (cut to
    ``max_len``), through the encoder, mean-pooled over its real tokens, as
    sentence-transformers models such as MiniLM are trained for."""
    ids, attention_mask = encode_sentences(tokenizer, texts, max_len)
    vectors = sentence_features(
        encoder, ids, attention_mask, pooling="mean", batch_size=batch_size
    )
    return vectors / vectors.norm(dim=1, keepdim=True).clamp(min=1e-12)


def dense_scores(
    query_vectors: torch.Tensor, passage_vectors: torch.Tensor
) -> torch.Tensor:
    """(Q, N) cosine similarities of every query vector with every passage vector."""
    return cosine_matrix(query_vectors, passage_vectors)


def _require_rankings(
    rankings: Sequence[Sequence[int]], relevant: Sequence[set[int]]
) -> None:
    if len(rankings) != len(relevant) or not rankings:
        raise ValueError(
            "rankings and relevant must be non-empty and of equal length, got "
            f"{len(rankings)} and {len(relevant)}"
        )
    if any(
        not isinstance(wanted, set | frozenset) or not wanted for wanted in relevant
    ):
        raise ValueError(
            "each entry of relevant must be a non-empty set of document ids"
        )


def recall_at_k(
    rankings: Sequence[Sequence[int]], relevant: Sequence[set[int]], k: int
) -> float:
    """Mean over queries of the share of a query's relevant documents found among its
    first ``k`` ranked.

    >>> # query 1 finds 1 of its 1 relevant documents, query 2 finds 0 of its 2
    >>> recall_at_k([[4, 2, 7], [1, 3, 5]], [{2}, {5, 9}], k=2)
    0.5
    """
    _require_rankings(rankings, relevant)
    require_size("k", k)
    return sum(
        len(set(ranking[:k]) & wanted) / len(wanted)
        for ranking, wanted in zip(rankings, relevant, strict=True)
    ) / len(rankings)


def first_relevant_rank(ranking: Sequence[int], relevant: set[int]) -> int | None:
    """1-based rank of the first relevant document in ``ranking``, or None if
    none is there.

    >>> first_relevant_rank([4, 2, 7], {7, 2})
    2
    """
    return next(
        (
            rank
            for rank, document in enumerate(ranking, start=1)
            if document in relevant
        ),
        None,
    )


def mean_reciprocal_rank(
    rankings: Sequence[Sequence[int]], relevant: Sequence[set[int]]
) -> float:
    """MRR: mean over queries of 1 / (rank of the first relevant document), counting 0
    when the ranking (however long it is: a top-k list) holds none.

    >>> # (1/2 + 1 + 0) / 3
    >>> mean_reciprocal_rank([[4, 2, 7], [1, 3, 5], [6]], [{2}, {1}, {8}])
    0.5
    """
    _require_rankings(rankings, relevant)
    ranks = [
        first_relevant_rank(ranking, wanted)
        for ranking, wanted in zip(rankings, relevant, strict=True)
    ]
    return sum(0.0 if rank is None else 1.0 / rank for rank in ranks) / len(ranks)


# A cross-encoder reranker: question and passage read together by one small BERT.

# Segment ids of a (question, passage) pair with the match hint: the segment says which
# side a token is on and whether the same token also occurs on the other side (the
# "exact match" feature of DrQA, Chen et al. 2017).
QUESTION, PASSAGE, QUESTION_MATCHED, PASSAGE_MATCHED = 0, 1, 2, 3


def pair_inputs(
    question: Sequence[int],
    passages: Sequence[Sequence[int]],
    special_ids: dict[str, int],
    max_len: int = 128,
    match_hint: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[CLS] question [SEP] passage [SEP]`` for each passage (token ids in, the
    passage cut to fit ``max_len``), as (ids, segment_ids, attention_mask), each (N, T).
    With ``match_hint``, a token found on both sides gets segment 2 (question) or 3
    (passage) instead of 0 or 1.

    >>> ids, segments, mask = pair_inputs(
    ...     [7, 8], [[8, 9, 9]], {"cls": 1, "sep": 2, "pad": 0}
    ... )
    >>> ids.tolist(), segments.tolist()
    ([[1, 7, 8, 2, 8, 9, 9, 2]], [[0, 0, 2, 0, 3, 1, 1, 1]])
    """
    require_size("max_len", max_len, minimum=8)
    # a question keeps at most half the room
    question = list(question)[: max_len // 2 - 2]
    cls, sep = special_ids["cls"], special_ids["sep"]
    rows, segments = [], []
    for passage in passages:
        passage = list(passage)[: max_len - len(question) - 3]
        shared = set(question) & set(passage) if match_hint else set()
        rows.append([cls, *question, sep, *passage, sep])
        segments.append(
            [QUESTION]
            + [QUESTION_MATCHED if token in shared else QUESTION for token in question]
            + [QUESTION]
            + [PASSAGE_MATCHED if token in shared else PASSAGE for token in passage]
            + [PASSAGE]
        )
    ids, attention_mask = pad(rows, special_ids["pad"])
    return ids, pad(segments, 0)[0], attention_mask


class CrossEncoder(nn.Module):
    """A BERT over a (question, passage) pair and a Linear on the final [CLS] vector:
    one relevance score per pair.

    Unlike a bi-encoder, which squeezes question and passage into one vector each before
    they meet, every layer here attends across both: it can check the question's words
    against the passage's.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        if config.n_segments != 4:
            raise ValueError(
                "a CrossEncoder needs n_segments=4 (two sides x matched or not), got "
                f"{config.n_segments}"
            )
        self.config = config
        self.bert = BertModel(config)
        self.score = nn.Linear(config.d_model, 1)
        init_bert_weights(self.score)

    @classmethod
    def on_embeddings(
        cls,
        encoder: BertModel,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 2,
        max_len: int = 128,
    ) -> "CrossEncoder":
        """A small cross-encoder that reads words through ``encoder``'s embedding layer
        (its token and position tables, frozen, and its LayerNorm), then a Linear down
        to ``d_model`` (ALBERT's factorized embedding) and ``n_layers`` new blocks.
        Segments 2 and 3 start as copies of the encoder's segments 0 and 1."""
        source = encoder.config
        config = BertConfig(
            vocab_size=source.vocab_size,
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            d_ff=4 * d_model,
            max_len=min(max_len, source.max_len),
            n_segments=4,
            dropout=0.0,
            layer_norm_eps=source.layer_norm_eps,
            pad_id=source.pad_id,
            embedding_size=source.embedding_width,
        )
        model = cls(config)
        ours, theirs = model.bert.embeddings, encoder.embeddings
        with torch.no_grad():
            ours.token_embedding.weight.copy_(theirs.token_embedding.weight)
            ours.position_embedding.embedding.weight.copy_(
                theirs.position_embedding.embedding.weight[: config.max_len]
            )
            ours.segment_embedding.weight.copy_(
                theirs.segment_embedding.weight[[0, 1, 0, 1]]
            )
            ours.norm.load_state_dict(theirs.norm.state_dict())
        ours.token_embedding.weight.requires_grad_(False)
        ours.position_embedding.embedding.weight.requires_grad_(False)
        return model

    def forward(self, input_ids, segment_ids, attention_mask) -> torch.Tensor:
        """(B, T) pairs -> (B,) scores; higher means more relevant."""
        # (B, T, C)
        hidden = self.bert(input_ids, segment_ids, attention_mask).hidden_states
        return self.score(hidden[:, 0]).squeeze(-1)  # [CLS]: (B, C) -> (B, 1) -> (B,)


@dataclass(frozen=True)
class RerankingData:
    """Training questions for a reranker, with the first stage's candidates to draw
    hard negatives from."""

    questions: list[list[int]]  # token ids of each question
    passages: list[list[int]]  # token ids of each passage
    relevant: list[set[int]]  # per question, the passages that answer it
    # per question, the first stage's ranking (relevant ones are skipped as negatives)
    candidates: list[list[int]]


def reranking_batches(
    data: RerankingData,
    special_ids: dict[str, int],
    group_size: int = 4,
    questions_per_step: int = 8,
    hard_negatives: int = 1,
    max_len: int = 128,
    match_hint: bool = True,
) -> Callable[[int], tuple]:
    """``batch_for_step(step)`` for ``train``: ``questions_per_step`` groups of
    ``group_size`` pairs, each one relevant passage then ``hard_negatives`` drawn from
    the question's candidates (high-scoring but wrong) and the rest drawn from all
    passages. Seeded by the step."""
    require_size("group_size", group_size, minimum=2)
    require_size("questions_per_step", questions_per_step)
    require_size("hard_negatives", hard_negatives, minimum=0)
    if hard_negatives > group_size - 1:
        raise ValueError(
            f"hard_negatives must be <= group_size - 1 = {group_size - 1}, got "
            f"{hard_negatives}"
        )
    if len(data.passages) < group_size + max(map(len, data.relevant)):
        raise ValueError(
            f"{len(data.passages)} passages are too few for groups of {group_size}"
        )

    def batch_for_step(step: int):
        draw = random.Random(step)
        groups = []
        for index in draw.sample(
            range(len(data.questions)), min(questions_per_step, len(data.questions))
        ):
            relevant = data.relevant[index]
            hard = [
                passage for passage in data.candidates[index] if passage not in relevant
            ]
            chosen = draw.sample(hard, min(hard_negatives, len(hard)))
            while len(chosen) < group_size - 1:
                passage = draw.randrange(len(data.passages))
                if passage not in relevant and passage not in chosen:
                    chosen.append(passage)
            group = [draw.choice(sorted(relevant)), *chosen]
            groups.append(
                pair_inputs(
                    data.questions[index],
                    [data.passages[p] for p in group],
                    special_ids,
                    max_len,
                    match_hint,
                )
            )
        # pad every group to the longest pair of the step
        width = max(ids.shape[1] for ids, _, _ in groups)
        return tuple(
            torch.cat(
                [F.pad(part[i], (0, width - part[i].shape[1])) for part in groups]
            )
            for i in range(3)
        )

    batch_for_step.group_size = group_size
    return batch_for_step


def listwise_loss(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    """For (Q, G) scores of groups whose column 0 is the relevant passage: the
    cross-entropy of picking it among its group (a softmax over the group), and how
    often it scores highest.

    >>> # right in group 1, wrong in group 2
    >>> losses = listwise_loss(torch.tensor([[2.0, 0.0], [0.0, 1.0]]))
    >>> # (-log σ(2) - log σ(-1)) / 2
    >>> losses["accuracy"].item(), round(losses["loss"].item(), 4)
    (0.5, 0.7201)
    """
    target = torch.zeros(len(scores), dtype=torch.long)
    return {
        "loss": F.cross_entropy(scores, target),
        "accuracy": (scores.argmax(dim=1) == 0).float().mean(),
    }


def reranking_loss(group_size: int) -> Callable:
    """``loss_for_batch(model, batch)`` for ``train``, for batches from
    ``reranking_batches`` with ``group_size``."""

    def loss_for_batch(model: CrossEncoder, batch) -> dict[str, torch.Tensor]:
        return listwise_loss(model(*batch).view(-1, group_size))  # (Q * G,) -> (Q, G)

    return loss_for_batch


@torch.no_grad()
def rerank(
    model: CrossEncoder,
    question: Sequence[int],
    candidates: Sequence[int],
    passages: Sequence[Sequence[int]],
    special_ids: dict[str, int],
    max_len: int = 128,
    match_hint: bool = True,
) -> list[int]:
    """``candidates`` (passage ids) reordered by the cross-encoder's score, best first;
    ties keep the first stage's order."""
    model.eval()
    scores = model(
        *pair_inputs(
            question,
            [passages[p] for p in candidates],
            special_ids,
            max_len,
            match_hint,
        )
    )
    order = torch.sort(scores, descending=True, stable=True).indices.tolist()
    return [candidates[i] for i in order]
