"""Byte-level BPE written to be read: the trainer and the encoder of `minformers.bpe`,
with nothing added for speed.

`train_bpe_by_recounting` gives the same vocab and merges as `bpe.train_bpe`, and
`ReadableBPETokenizer` the same ids as `bpe.ByteBPETokenizer` (tests/test_bpe.py checks
both, on Shakespeare and on GPT-2's merges). The fast versions recount only the words a
merge touched, keep the pair counts in a heap and cache each word's ids; these recount
every pair at every step and encode each word afresh.

    >>> vocab, merges = train_bpe_by_recounting("low low low lower lowest", 258)
    >>> merges
    [(b'o', b'w'), (b'l', b'ow')]
    >>> ReadableBPETokenizer(vocab, merges).encode(" lower")
    [32, 257, 101, 114]
"""

import math
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise

from minformers.bpe import merge_pair
from minformers.pretokenize import pretokenize, split_on_special


def train_bpe_by_recounting(
    text: str, vocab_size: int, special_tokens: Iterable[str] = ()
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Merge the most frequent adjacent pair of tokens, inside pretokens, until the
    vocab (special tokens, then the 256 bytes, then one token per merge) has
    `vocab_size` tokens. Ties go to the greatest (left, right) bytes."""
    special_tokens = list(special_tokens)
    vocab = {i: token.encode("utf-8") for i, token in enumerate(special_tokens)}
    first_byte = len(vocab)
    vocab |= {first_byte + byte: bytes([byte]) for byte in range(256)}
    # each distinct pretoken once, as token ids, with the number of times it occurs
    occurrences = Counter(
        pretoken
        for piece, is_special in split_on_special(text, special_tokens)
        if not is_special
        for pretoken in pretokenize(piece)
    )
    words = [[first_byte + byte for byte in word.encode()] for word in occurrences]
    merges = []
    while len(vocab) < vocab_size:
        pair_counts = Counter()
        for word, times in zip(words, occurrences.values(), strict=True):
            for pair in pairwise(word):
                pair_counts[pair] += times
        if not pair_counts:  # every pretoken is a single token
            break
        left, right = max(
            pair_counts, key=lambda p: (pair_counts[p], vocab[p[0]], vocab[p[1]])
        )
        merges.append((vocab[left], vocab[right]))
        vocab[len(vocab)] = vocab[left] + vocab[right]
        words = [merge_pair(word, (left, right), len(vocab) - 1) for word in words]
    return vocab, merges


class ReadableBPETokenizer:
    """Token ids of text: special tokens whole; each pretoken's bytes merged, always the
    pair whose merge was learned first, until no learned pair is left.

    `bpe.ByteBPETokenizer` gives the same ids for any merges that training made; it
    also looks a whole pretoken up first, which can differ only on a hand-made merge
    list (tests/test_bpe.py shows one).
    """

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: list[tuple[bytes, bytes]],
        special_tokens: Iterable[str] = (),
    ):
        self.vocab, self.special_tokens = vocab, list(special_tokens)
        self.id_of = {token: i for i, token in vocab.items()}
        # (left id, right id) -> rank: the lower, the earlier training made the merge
        self.rank = {
            (self.id_of[a], self.id_of[b]): r for r, (a, b) in enumerate(merges)
        }

    def encode_word(self, word: bytes) -> list[int]:
        tokens = [self.id_of[bytes([byte])] for byte in word]
        while len(tokens) > 1:
            first = min(pairwise(tokens), key=lambda p: self.rank.get(p, math.inf))
            if first not in self.rank:  # no pair left that training merged
                break
            merged = self.id_of[self.vocab[first[0]] + self.vocab[first[1]]]
            tokens = merge_pair(tokens, first, merged)
        return tokens

    def encode(self, text: str) -> list[int]:
        ids = []
        for piece, is_special in split_on_special(text, self.special_tokens):
            if is_special:
                ids.append(self.id_of[piece.encode("utf-8")])
            else:
                for pretoken in pretokenize(piece):
                    ids += self.encode_word(pretoken.encode("utf-8"))
        return ids
