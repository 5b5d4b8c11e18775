"""Checks for the applications: BM25 retrieval and BERT's next-token targets.

>>> def stub(input_ids, attention_mask):
...     raise NotImplementedError("shift left")
>>> check_next_token_targets(stub)
Traceback (most recent call last):
minformers.checks.CheckFailed: check_next_token_targets: not attempted yet (shift left)
"""

from collections.abc import Callable

import torch

from minformers import retrieval
from minformers.checks import (
    Case,
    run_check,
    seeded_generator,
    seeded_random,
)
from minformers.recipes import next_word


def check_bm25_scores(learner: Callable[[list, list, float, float], list]) -> None:
    """Exercise: `learner(query, documents, k1, b)` returns the BM25 score of every
    document (lists of terms) for the query, with Lucene's idf
    ln(1 + (N - n + 0.5) / (n + 0.5)) and a repeated query term counted each time, as
    retrieval.BM25(documents, k1, b).scores(query). Compared to 1e-9."""

    def as_tensor(query, documents, k1, b):
        return torch.as_tensor(learner(query, documents, k1, b), dtype=torch.float64)

    def reference(query, documents, k1, b):
        return retrieval.BM25(documents, k1=k1, b=b).scores(query)

    small = [
        ["the", "cat", "sat"],
        ["a", "dog", "sat", "on", "a", "cat", "mat"],
        ["dogs", "bark"],
    ]
    draw = seeded_random()
    vocabulary = [f"w{index}" for index in range(30)]
    # Zipf-like: a few words in most documents, most words in few, as in text
    collection = [
        draw.choices(
            vocabulary,
            weights=[1 / (rank + 1) for rank in range(30)],
            k=draw.randint(1, 25),
        )
        for _ in range(40)
    ]
    cases = [
        Case(
            "one word in 2 of 3 documents, k1 = 1.5, b = 0.75",
            (["cat"], small, 1.5, 0.75),
        ),
        Case(
            "two words; the long document holds both",
            (["cat", "mat"], small, 1.5, 0.75),
        ),
        Case("a word twice in one document", (["a"], small, 1.5, 0.75)),
        Case("a repeated query word counts twice", (["cat", "cat"], small, 1.5, 0.75)),
        Case("a word no document holds scores 0", (["zebra"], small, 1.2, 0.75)),
        Case(
            "a word in every document still scores > 0",
            (["sat", "the"], [["sat"], ["sat", "the"]], 1.5, 0.75),
        ),
        Case("b = 0: no length discount", (["cat"], small, 1.5, 0.0)),
        Case("b = 1: full length discount", (["cat", "dog"], small, 1.2, 1.0)),
        Case(
            "k1 = 0: each word counts once, only idf", (["a", "cat"], small, 0.0, 0.75)
        ),
        Case(
            "40 random documents, 4-word query",
            (draw.sample(vocabulary, 4), collection, 0.9, 0.4),
        ),
    ]
    run_check(
        "check_bm25_scores",
        as_tensor,
        reference,
        cases,
        blocked_functions=[
            retrieval.BM25.__init__,
            retrieval.BM25.scores,
            retrieval.BM25.idf,
        ],
        atol=1e-9,
    )


def check_next_token_targets(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(input_ids, attention_mask)` returns the (B, T) targets of a
    next-token loss read at every position: token t + 1 where tokens t and t + 1 are
    both real, -100 elsewhere (the last position, padding, and a left pad before the
    first real token), as next_word.next_token_targets."""

    def as_long(input_ids, attention_mask):
        return torch.as_tensor(learner(input_ids, attention_mask)).long()

    draw = seeded_generator()
    lengths = torch.randint(1, 13, (6,), generator=draw)
    # (6, 12), right-padded
    random_mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
    random_ids = torch.randint(5, 3000, (6, 12), generator=draw).masked_fill(
        random_mask == 0, 0
    )
    right = torch.tensor([[2, 40, 41, 42, 3], [2, 50, 3, 0, 0], [2, 3, 0, 0, 0]])
    left = torch.tensor([[0, 0, 2, 60, 3], [2, 61, 62, 63, 3]])
    cases = [
        Case(
            "one block, no padding",
            (torch.tensor([[2, 17, 18, 19, 3]]), torch.ones(1, 5, dtype=torch.long)),
        ),
        Case("right padding: rows of 5, 3 and 2 tokens", (right, (right != 0).long())),
        Case(
            "left padding: a pad before the first real token predicts nothing",
            (left, (left != 0).long()),
        ),
        Case("a bool attention mask", (right, right != 0)),
        Case(
            "one token: nothing to predict", (torch.tensor([[7]]), torch.tensor([[1]]))
        ),
        Case(
            "a row of padding only",
            (torch.zeros(2, 4, dtype=torch.long), torch.tensor([[0] * 4, [0] * 4])),
        ),
        Case("6 random blocks of up to 12 tokens", (random_ids, random_mask)),
    ]
    run_check(
        "check_next_token_targets",
        as_long,
        next_word.next_token_targets,
        cases,
        blocked_functions=[next_word.next_token_targets],
    )
