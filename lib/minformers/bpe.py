"""Byte-level BPE (Sennrich et al. 2016, on bytes as in GPT-2): training, encoding,
decoding, saving, GPT-2's files.

This is the complete tokenizer (special tokens, streaming, saving, GPT-2's files) and
its fast trainer; the version written to be read is bpe_simple.

Text becomes UTF-8 bytes, so the 256 single bytes spell any string and no token is ever
unknown. Training starts from those bytes and repeatedly merges the most frequent
adjacent pair into a new token; encoding replays the merges in the order they were
learned, inside each pretoken (see `minformers.pretokenize`).

    >>> vocab, merges = train_bpe("low low low lower lowest", vocab_size=258)
    >>> merges
    [(b'o', b'w'), (b'l', b'ow')]
    >>> tokenizer = ByteBPETokenizer(vocab, merges)
    >>> tokenizer.encode(" lower")
    [32, 257, 101, 114]
    >>> tokenizer.decode([32, 257, 101, 114])
    ' lower'
"""

import heapq
import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from itertools import pairwise
from pathlib import Path

from minformers.pretokenize import pretokenize, require_special_tokens, split_on_special
from minformers.support.arguments import require_size

Pair = tuple[int, int]  # two adjacent token ids
FORMAT = "minformers.ByteBPETokenizer/1"  # written by save, checked by load


def merge_pair(ids: list[int], pair: Pair, new_id: int) -> list[int]:
    """Replace each occurrence of `pair` in `ids` with `new_id`, left to right,
    occurrences not overlapping.

    >>> merge_pair([1, 2, 3, 1, 2], pair=(1, 2), new_id=4)
    [4, 3, 4]
    >>> merge_pair([1, 1, 1], pair=(1, 1), new_id=5)  # the third 1 has no partner left
    [5, 1]
    """
    merged = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def _require_bpe_special_tokens(special_tokens: Iterable[str]) -> tuple[str, ...]:
    special_tokens = require_special_tokens(special_tokens)
    for token in special_tokens:
        # its bytes would be the byte token's too, so decoding could not tell
        if len(token.encode("utf-8")) == 1:
            raise ValueError(
                f"special_tokens must be at least 2 bytes long in UTF-8, got {token!r}"
            )
    return special_tokens


_REVERSED_BYTES = bytes(range(255, -1, -1))  # byte b -> 255 - b, for bytes.translate


def _greatest_first(token: bytes) -> str:
    """A sort key under which tokens come in descending byte order, so that heapq
    (smallest first) pops the greatest.

    Each byte b becomes the character 255 - b, and an end mark above them all puts a
    token after the longer tokens it begins (b"a" < b"ab", so b"ab" must come first). A
    plain str, so the heap compares keys without calling Python.

    >>> sorted([b"a", b"ab", b"b", b"a\\x00"], key=_greatest_first)
    [b'b', b'ab', b'a\\x00', b'a']
    """
    return token.translate(_REVERSED_BYTES).decode("latin-1") + "\u0100"


def train_bpe(
    text_or_path: str | os.PathLike, vocab_size: int, special_tokens: Iterable[str] = ()
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn merges from a corpus until the vocab has `vocab_size` tokens (a str is the
    text; a Path, a UTF-8 file).

    Returns (vocab, merges). vocab maps id -> bytes: the special tokens (ids 0..k-1),
    the 256 single bytes in byte order (ids k..k+255), then one token per merge. merges
    lists (left, right) bytes in the order learned. Special tokens are cut out of the
    text first and never take part in a merge. Each step merges the pair that occurs
    most often inside pretokens; ties go to the greatest (left, right) bytes, so
    training is deterministic. Pairs seen once are merged too; training stops early,
    with fewer merges, only when no adjacent pair is left.

    >>> vocab, merges = train_bpe(
    ...     "ab ab<|endoftext|>ab", vocab_size=258, special_tokens=["<|endoftext|>"]
    ... )
    >>> merges, vocab[0], vocab[1 + ord("a")], vocab[257]
    ([(b'a', b'b')], b'<|endoftext|>', b'a', b'ab')
    """
    if isinstance(text_or_path, os.PathLike):
        text = Path(text_or_path).read_text(encoding="utf-8")
    elif isinstance(text_or_path, str):
        text = text_or_path
    else:
        raise TypeError(
            f"text_or_path must be a str or a path, got {type(text_or_path).__name__}"
        )
    special_tokens = _require_bpe_special_tokens(special_tokens)
    first_byte_id = len(special_tokens)
    require_size("vocab_size", vocab_size, minimum=256 + first_byte_id)
    pieces = split_on_special(text, special_tokens)
    # English repeats a few thousand words: count each distinct pretoken once, weighted
    # by how often it occurs.
    frequency = Counter(
        pretoken
        for piece, special in pieces
        if not special
        for pretoken in pretokenize(piece)
    )
    if not frequency:
        raise ValueError(
            "text_or_path must contain text besides special tokens, got none"
        )

    vocab = {i: token.encode("utf-8") for i, token in enumerate(special_tokens)}
    vocab |= {first_byte_id + byte: bytes([byte]) for byte in range(256)}
    words = [
        [first_byte_id + byte for byte in pretoken.encode("utf-8")]
        for pretoken in frequency
    ]
    weights = list(frequency.values())
    pair_counts = defaultdict(int)  # pair -> occurrences in the corpus
    # pair -> indices of the words holding it, so a merge touches only those words.
    # Entries may go stale (the word lost the pair to an earlier merge); merge_pair then
    # changes nothing and the word is skipped.
    words_with = defaultdict(set)
    for index, (word, weight) in enumerate(zip(words, weights, strict=True)):
        for pair in pairwise(word):
            pair_counts[pair] += weight
            words_with[pair].add(index)
    # The most frequent pair, greatest bytes first among ties, is on top of a heap of
    # (-count, key of left, key of right, pair). A count change pushes a new entry
    # rather than updating the old one, so entries whose count no longer matches are
    # skipped when popped.
    sort_key = [_greatest_first(vocab[token_id]) for token_id in range(len(vocab))]
    heap = [
        (-count, sort_key[left], sort_key[right], (left, right))
        for (left, right), count in pair_counts.items()
    ]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < vocab_size:
        while heap and -heap[0][0] != pair_counts[heap[0][3]]:
            heapq.heappop(heap)
        if not heap:  # no adjacent pair is left: every pretoken is a single token
            break
        pair = heapq.heappop(heap)[3]
        new_id = len(vocab)
        merges.append((vocab[pair[0]], vocab[pair[1]]))
        vocab[new_id] = vocab[pair[0]] + vocab[pair[1]]
        sort_key.append(_greatest_first(vocab[new_id]))
        change = defaultdict(int)  # pair -> how much this merge changes its count
        for index in words_with.pop(pair):
            word, merged = words[index], merge_pair(words[index], pair, new_id)
            if len(merged) == len(word):
                continue
            for old_pair in pairwise(word):
                change[old_pair] -= weights[index]
            for new_pair in pairwise(merged):
                change[new_pair] += weights[index]
                # the word's other pairs were already there, and already indexed
                if new_id in new_pair:
                    words_with[new_pair].add(index)
            words[index] = merged
        # Most pairs of a changed word are in it before and after the merge (a change
        # of 0): they keep their entry.
        for (left, right), delta in change.items():
            if delta:
                count = pair_counts[left, right] = pair_counts[left, right] + delta
                # a pair that no longer occurs (the merged one, at least)
                # must never be popped
                if count > 0:
                    heapq.heappush(
                        heap, (-count, sort_key[left], sort_key[right], (left, right))
                    )
    return vocab, merges


# GPT-2's files spell each byte as one printable character. Bytes that print as
# themselves (33-126, 161-172, 174-255) keep their code point; the other 68 (controls,
# space, DEL, no-break space, soft hyphen) become chr(256), chr(257), ... in byte order,
# so b" " is spelled "Ġ" and b"\n" is spelled "Ċ".
_PRINTABLE_BYTES = [*range(33, 127), *range(161, 173), *range(174, 256)]
_SHIFTED_BYTES = [byte for byte in range(256) if byte not in _PRINTABLE_BYTES]
GPT2_CHAR_TO_BYTE = {chr(byte): byte for byte in _PRINTABLE_BYTES}
GPT2_CHAR_TO_BYTE |= {chr(256 + n): byte for n, byte in enumerate(_SHIFTED_BYTES)}


def gpt2_token_bytes(token: str) -> bytes:
    """The bytes of a token as GPT-2's encoder.json and vocab.bpe spell it.

    >>> gpt2_token_bytes("Ġworld"), gpt2_token_bytes("ĊĊ"), gpt2_token_bytes("Ã©")
    (b' world', b'\\n\\n', b'\\xc3\\xa9')
    """
    return bytes(GPT2_CHAR_TO_BYTE[char] for char in token)


class ByteBPETokenizer:
    """Encode text to ids and back with a byte-level BPE: a vocab (id -> bytes),
    merges, special tokens.

    Any id layout works, so GPT-2's files load with GPT-2's ids: a merge's rank is its
    position in `merges`, and the token it makes has the id that `vocab` gives its
    bytes. Special tokens are kept whole (the longest wins where they overlap) and never
    merge with their neighbours.

    >>> vocab, merges = train_bpe(
    ...     "low low low lower", vocab_size=259, special_tokens=["<|endoftext|>"]
    ... )
    >>> tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=["<|endoftext|>"])
    >>> tokenizer.encode("low<|endoftext|>low")
    [258, 0, 258]
    >>> tokenizer.vocab[258], tokenizer.vocab_size
    (b'low', 259)
    """

    # pretoken encodings kept; the cache starts over when full, so memory stays bounded
    cache_size = 100_000

    def __init__(
        self,
        vocab: dict[int, bytes],
        merges: Iterable[tuple[bytes, bytes]],
        special_tokens: Iterable[str] = (),
    ):
        self.special_tokens = _require_bpe_special_tokens(special_tokens)
        self.vocab = dict(vocab)
        self.merges = [tuple(merge) for merge in merges]
        for token_id, token in self.vocab.items():
            if (
                isinstance(token_id, bool)
                or not isinstance(token_id, int)
                or not isinstance(token, bytes)
            ):
                raise TypeError(
                    f"vocab must map int ids to bytes, got {token_id!r}: {token!r}"
                )
        for merge in self.merges:
            if len(merge) != 2 or not all(isinstance(part, bytes) for part in merge):
                raise TypeError(f"merges must be (bytes, bytes) pairs, got {merge!r}")
        id_of = {token: token_id for token_id, token in self.vocab.items()}
        if len(id_of) != len(self.vocab):
            raise ValueError("vocab must give each id different bytes")
        needed = [bytes([byte]) for byte in range(256)] + [
            token.encode("utf-8") for token in self.special_tokens
        ]
        needed += [
            token
            for left, right in self.merges
            for token in (left, right, left + right)
        ]
        missing = next((token for token in needed if token not in id_of), None)
        if missing is not None:
            raise ValueError(
                f"vocab has no token {missing!r}, which the bytes, merges or "
                "special_tokens need"
            )

        single_bytes = [bytes([byte]) for byte in range(256)]
        self._byte_ids = [id_of[token] for token in single_bytes]
        # (left id, right id) -> rank, the merge's position in `merges`: the lowest was
        # learned first and applies first
        self._ranks = {
            (id_of[a], id_of[b]): rank for rank, (a, b) in enumerate(self.merges)
        }
        if len(self._ranks) != len(self.merges):
            raise ValueError("merges must be distinct pairs")
        # rank -> (pair, merged id)
        self._merged = [((id_of[a], id_of[b]), id_of[a + b]) for a, b in self.merges]
        # bytes -> id, for the single bytes and the tokens that merges make: a pretoken
        # spelled by one of them is it
        made_by_merges = [left + right for left, right in self.merges]
        self._whole_tokens = {
            token: id_of[token] for token in single_bytes + made_by_merges
        }
        self._special_ids = {
            token: id_of[token.encode("utf-8")] for token in self.special_tokens
        }
        # For encode_iterable: the text at the end of a chunk might be the start of
        # a special token.
        self._special_prefixes = {
            token[:n] for token in self.special_tokens for n in range(1, len(token))
        }
        self._longest_special = max(map(len, self.special_tokens), default=0)
        # piece (pretoken or special token) -> its ids
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __eq__(self, other) -> bool:
        if not isinstance(other, ByteBPETokenizer):
            return NotImplemented
        return (self.vocab, self.merges, self.special_tokens) == (
            other.vocab,
            other.merges,
            other.special_tokens,
        )

    def __repr__(self) -> str:
        return f"ByteBPETokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)}, {self.special_tokens=})"

    def _encode_pretoken(self, pretoken: str) -> list[int]:
        """Ids of one pretoken: its bytes, merged in the order the
        merges were learned."""
        data = pretoken.encode("utf-8")
        # About half the distinct words of English prose are one GPT-2 token, so look
        # the whole word up first (as tiktoken does). Replaying the merges ends at that
        # same token whenever training made it: a token is born inside a word from
        # merges of its own bytes alone, which rebuild it when its bytes stand alone
        # (the tests check every token of GPT-2 and of train_bpe). Only a hand-made
        # merge list could differ; the whole token wins.
        whole = self._whole_tokens.get(data)
        if whole is not None:
            return [whole]
        ids = [self._byte_ids[byte] for byte in data]
        while len(ids) > 1:
            # Training made the merges in rank order, so replay them in that order: the
            # lowest rank present first.
            rank = min([self._ranks.get(pair, math.inf) for pair in pairwise(ids)])
            if rank == math.inf:
                break
            pair, new_id = self._merged[rank]
            ids = merge_pair(ids, pair, new_id)
        return ids

    def _encode_pieces(self, pieces: list[str]) -> list[int]:
        """Ids of special tokens and pretokens. A pretoken never equals a special token:
        split_on_special took every occurrence of those out of the text before
        pretokenizing, so one cache can hold both."""
        ids = []
        # most words of a text occur many times: each is encoded once
        cache = self._cache
        for piece in pieces:
            piece_ids = cache.get(piece)
            if piece_ids is None:
                special_id = self._special_ids.get(piece)
                piece_ids = (
                    self._encode_pretoken(piece) if special_id is None else [special_id]
                )
                if len(cache) >= self.cache_size:
                    cache.clear()
                cache[piece] = piece_ids
            ids += piece_ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` (see the class docstring for an example)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        pieces = []
        for piece, is_special in split_on_special(text, self.special_tokens):
            pieces += [piece] if is_special else pretokenize(piece)
        return self._encode_pieces(pieces)

    def encode_iterable(self, chunks: Iterable[str]) -> Iterator[int]:
        """Yield the ids of "".join(chunks) lazily, e.g. from the lines of a file too
        big for memory.

        The ids are those of encode("".join(chunks)) however the text is cut, even
        inside a word, a run of spaces or a special token; only a short tail of text is
        held back between chunks.

        >>> vocab, merges = train_bpe("low lower", 257)
        >>> tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=[])
        >>> ids = tokenizer.encode_iterable(["lo", "w lo", "wer"])
        >>> list(ids) == tokenizer.encode("low lower")
        True
        """
        tail = ""
        for chunk in chunks:
            if not isinstance(chunk, str):
                raise TypeError(f"chunks must be str, got {type(chunk).__name__}")
            final, tail = self._split_final(tail + chunk)
            yield from self._encode_pieces(final)
        yield from self.encode(tail)

    def _split_final(self, text: str) -> tuple[list[str], str]:
        """Cut `text` into (the pieces that no continuation of it can change, the tail
        to carry over).

        Two things at the end of `text` may change when more arrives. GPT-2's regex
        looks ahead: "x'l" + "l" is "x", "'ll" (not "x", "'", "l"), and "a  " + "b" is
        "a", " ", " b". To end a pretoken the regex never looks past the pretoken that
        follows, so all but the last two pretokens are final. And the end may be the
        start of a special token, as in "<|endof" + "text|>", so all from the first
        place where one could begin is held back.
        """
        final, start = [], 0
        for piece, is_special in split_on_special(text, self.special_tokens):
            end = start + len(piece)
            # Where text[i:] is a special token's start but not all of it; a special
            # token that reaches the end could still grow into a longer one, e.g.
            # "<s>" into "<s><s>".
            starts = range(
                max(start, len(text) - self._longest_special + 1),
                start + 1 if is_special else end,
            )
            partial = next(
                (i for i in starts if text[i:] in self._special_prefixes), None
            )
            if partial is None and is_special:
                final.append(piece)
            # a special token follows, so this text is complete
            elif partial is None and end < len(text):
                final += pretokenize(piece)
            else:
                kept = pretokenize(
                    text[start : len(text) if partial is None else partial]
                )[:-2]
                return final + kept, text[start + sum(map(len, kept)) :]
            start = end
        return final, ""

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` (a list, or a 1-D tensor); bytes that are not valid UTF-8
        (e.g. half a character) become U+FFFD.

        >>> tokenizer = ByteBPETokenizer(*train_bpe("no merges, only bytes", 256))
        >>> (
        ...     tokenizer.encode("é"),
        ...     tokenizer.decode([0xC3]),
        ...     tokenizer.decode([0xC3, 0xA9]),
        ... )
        ([195, 169], '�', 'é')
        """
        # a tensor's items are 0-d tensors, not the vocab's int keys
        if hasattr(ids, "tolist"):
            shape, dtype = tuple(ids.shape), ids.dtype
            ids = ids.tolist()
            if not isinstance(ids, list) or not all(
                isinstance(token_id, int) for token_id in ids
            ):
                raise ValueError(
                    f"ids must be a 1-D tensor of integer ids, got shape {shape} and "
                    f"dtype {dtype}; decode a batch one row at a time: "
                    "[tokenizer.decode(row) for row in ids]"
                )
        try:
            data = b"".join(self.vocab[token_id] for token_id in ids)
        except KeyError as error:
            raise ValueError(
                f"ids must be in the vocab (size {self.vocab_size}); got "
                f"{error.args[0]!r}"
            ) from None
        return data.decode("utf-8", errors="replace")

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer to `path` as JSON; bytes are stored as hex ("6c6f77" is
        b"low"), so any byte survives."""
        state = {
            "format": FORMAT,
            "special_tokens": list(self.special_tokens),
            "vocab": {
                str(token_id): token.hex() for token_id, token in self.vocab.items()
            },
            "merges": [[left.hex(), right.hex()] for left, right in self.merges],
        }
        Path(path).write_text(json.dumps(state), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ByteBPETokenizer":
        """Read a tokenizer written by `save`; it equals the one saved."""
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ValueError(
                f"path must be a file written by ByteBPETokenizer.save ({FORMAT}), got "
                f"{path}"
            )
        vocab = {
            int(token_id): bytes.fromhex(token)
            for token_id, token in state["vocab"].items()
        }
        merges = [
            (bytes.fromhex(left), bytes.fromhex(right))
            for left, right in state["merges"]
        ]
        return cls(vocab, merges, state["special_tokens"])

    @classmethod
    def from_gpt2(
        cls, encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike
    ) -> "ByteBPETokenizer":
        """GPT-2's tokenizer, with GPT-2's ids, from encoder.json (token -> id) and
        vocab.bpe (merges, rank 0 first).

        >>> tokenizer = ByteBPETokenizer.from_gpt2(*gpt2_bpe_files())  # doctest: +SKIP
        >>> tokenizer.encode("Hello world<|endoftext|>")  # doctest: +SKIP
        [15496, 995, 50256]
        """
        encoder = json.loads(Path(encoder_json).read_text(encoding="utf-8"))
        vocab = {
            token_id: gpt2_token_bytes(token) for token, token_id in encoder.items()
        }
        # spelled bytes hold no "\n" or " "
        header, *lines = Path(vocab_bpe).read_text(encoding="utf-8").split("\n")
        if not header.startswith("#version"):
            raise ValueError(
                f"vocab_bpe must start with a '#version' line, got {header[:40]!r}"
            )
        merges = [
            tuple(map(gpt2_token_bytes, line.split(" "))) for line in lines if line
        ]
        return cls(vocab, merges, special_tokens=["<|endoftext|>"])
