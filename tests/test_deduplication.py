"""Finding copies: normalised exact copies, shingles, MinHash estimates whose error shrinks like a binomial share,
and near-copy pairs equal to a brute-force search."""

import itertools
import math
import random

import numpy as np
import pytest

from minformers import deduplication


def test_exact_copies_ignore_case_punctuation_and_spacing():
    texts = ["Hello, world!", "hello world", "Hello  World.", "goodbye world", "Goodbye, world"]
    assert deduplication.exact_duplicate_groups(texts) == [[0, 1, 2], [3, 4]]


def test_shingles_of_short_and_long_texts():
    assert len(deduplication.shingles("one two three", n=5)) == 1  # shorter than n: the whole text
    assert len(deduplication.shingles("a b c d e f g", n=5)) == 3  # 7 words: 3 five-word windows


def test_minhash_estimates_jaccard_within_its_binomial_error():
    a, b = set(range(0, 1000)), set(range(250, 1250))  # J = 750 / 1250 = 0.6
    for k in (64, 1024):
        signatures = deduplication.minhash_signatures([a, b], k=k, seed=1)
        estimate = (signatures[0] == signatures[1]).mean()
        assert abs(estimate - 0.6) < 4 * math.sqrt(0.6 * 0.4 / k)


def test_minhash_error_shrinks_with_k():
    rng = random.Random(0)
    pairs = []
    for _ in range(40):
        shared = set(rng.sample(range(10**6), 300))
        pairs.append((shared | set(rng.sample(range(10**6, 2 * 10**6), 100)),
                      shared | set(rng.sample(range(2 * 10**6, 3 * 10**6), 100))))  # J = 300 / 500
    def mean_error(k):
        return np.mean([abs((s[0] == s[1]).mean() - 0.6) for s in
                        (deduplication.minhash_signatures(list(pair), k=k) for pair in pairs)])
    assert mean_error(256) < mean_error(16) / 2.5  # binomial: a quarter of the error for 16 x the hashes


def test_near_copies_match_brute_force():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    base = [" ".join(rng.choices(words, k=60)) for _ in range(30)]
    texts = base + [text.replace("w1 ", "w2 ", 1) for text in base[:10]]  # ten near copies
    brute = sorted((i, j, deduplication.jaccard(deduplication.shingles(texts[i]), deduplication.shingles(texts[j])))
                   for i, j in itertools.combinations(range(len(texts)), 2))
    expected = [(i, j, similarity) for i, j, similarity in brute if similarity >= 0.8]
    assert len(expected) >= 5 and deduplication.near_duplicate_pairs(texts, threshold=0.8) == expected


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        deduplication.minhash_signatures([{1}], k=0)
