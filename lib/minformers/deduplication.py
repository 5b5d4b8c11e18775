"""Finding repeated documents in a corpus: exact copies by hashing, near
copies by MinHash.

Two documents are near copies when their sets of word n-grams ("shingles") overlap a
lot: their Jaccard similarity |A ∩ B| / |A ∪ B| is high. Comparing every pair of sets is
slow; MinHash (Broder, 1997) summarises each set by the smallest value of each of k
random hash functions over it, and the chance that two sets share that minimum is
exactly their Jaccard similarity, so the share of the k minima two documents share
estimates it. Pairs whose estimate passes a threshold are then checked with the exact
Jaccard.

    >>> texts = [
    ...     "the cat sat on the mat today",
    ...     "the cat sat on the mat today!",
    ...     "a dog ran in the park at noon",
    ... ]
    >>> exact_duplicate_groups(texts)
    [[0, 1]]
    >>> near_duplicate_pairs(texts, threshold=0.5)
    [(0, 1, 1.0)]
"""

import re
import zlib
from collections import defaultdict

import numpy as np

from minformers.support.arguments import require_size


def normalise(text: str) -> str:
    """Lower case, words only: copies that differ in case, punctuation or
    spacing become equal."""
    return " ".join(re.findall(r"\w+", text.lower()))


def exact_duplicate_groups(texts: list[str]) -> list[list[int]]:
    """Indices of the texts that are equal after ``normalise``, one list per group of
    two or more, in order."""
    groups = defaultdict(list)
    for index, text in enumerate(texts):
        groups[normalise(text)].append(index)
    return [members for members in groups.values() if len(members) > 1]


def shingles(text: str, n: int = 5) -> set[int]:
    """The text's word n-grams (after ``normalise``), each as a 32-bit CRC; a text
    shorter than n words gives its whole as one shingle."""
    words = normalise(text).split()
    grams = [" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))]
    return {zlib.crc32(gram.encode()) for gram in grams}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit changes about half the output bits, so
    the minima of k differently salted copies behave like k independent random orderings
    (a linear (a x + b) mod p does not, and its estimates stop improving with k)."""
    # uint64 arithmetic wraps around, as the finaliser intends
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def minhash_signatures(
    shingle_sets: list[set[int]], k: int = 64, seed: int = 0
) -> np.ndarray:
    """(N, k): for each set, the minimum over its shingles of each of k salted hash
    functions. Two sets agree on each minimum with probability equal to their Jaccard
    similarity."""
    require_size("k", k)
    salts = np.random.default_rng(seed).integers(0, 1 << 63, size=k, dtype=np.uint64)
    signatures = np.empty((len(shingle_sets), k), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row, values in enumerate(shingle_sets):
            # (S, 1)
            x = np.fromiter(values, dtype=np.uint64, count=len(values))[:, None]
            signatures[row] = _mix(x ^ salts).min(axis=0)  # (S, k) -> (k,)
    return signatures


def near_duplicate_pairs(
    texts: list[str], threshold: float = 0.8, n: int = 5, k: int = 64, chunk: int = 256
) -> list[tuple[int, int, float]]:
    """(i, j, exact Jaccard) for every pair i < j of texts whose shingle sets have a
    Jaccard similarity of at least ``threshold``, found through MinHash estimates (a
    pair is checked exactly when its estimate is within 0.15 of the threshold, which a
    64-hash estimate misses with a chance well under 1%)."""
    sets = [shingles(text, n) for text in texts]
    signatures = minhash_signatures(sets, k)
    pairs = []
    for start in range(0, len(texts), chunk):
        # (c, k) against all (N, k): the share of equal minima
        block = signatures[start : start + chunk]
        estimates = (block[:, None, :] == signatures[None, :, :]).mean(axis=2)
        for offset, j in zip(*np.nonzero(estimates >= threshold - 0.15), strict=True):
            i = start + offset
            if i < j and (similarity := jaccard(sets[i], sets[j])) >= threshold:
                pairs.append((int(i), int(j), similarity))
    return sorted(pairs)
