"""WordPiece, BERT's tokenizer: split text into words, then each word into the longest
pieces of a fixed vocabulary.

BERT's basic tokenizer (cleaning, accents, CJK, punctuation), the greedy split and a
trainer live together here, each checked against HF's.

Three steps turn a text into tokens, as in BERT (Devlin et al., 2019)
and HF's ``BertTokenizer``:

1. special tokens written in the text, such as ``[MASK]``, are kept whole;
2. the basic tokenizer cleans the text, spaces out CJK ideographs, lowercases, strips
   accents, and splits on whitespace and on punctuation;
3. greedy longest-match-first WordPiece splits each word; ``##`` marks a piece that
   continues a word.

    >>> basic_tokenize("Héllo, WORLD!")
    ['hello', ',', 'world', '!']
    >>> specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocab = specials + ["hello", ",", "!", "wor", "##ld"]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> tokenizer.tokenize("Hello, [MASK] world!")
    ['hello', ',', '[MASK]', 'wor', '##ld', '!']
    >>> tokenizer.encode("Hello world", add_special_tokens=True)
    [2, 5, 8, 9, 3]
    >>> tokenizer.decode([2, 5, 8, 9, 3], skip_special_tokens=True)
    'hello world'

``train_wordpiece`` learns such a vocabulary from a corpus.
"""

import heapq
import json
import operator
import os
import re
import string
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import groupby
from pathlib import Path

from minformers.support.arguments import require_size

# The blocks whose ideographs BERT treats as one word each, since Chinese is written
# without spaces. Japanese kana and Korean Hangul are not in them, so they stay
# inside their words.
CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF),  # CJK Unified Ideographs and extension A
    (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),  # extensions B, C, D
    (0x2B820, 0x2CEAF),  # extension E
    (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),  # the compatibility blocks
)  # fmt: skip

# The roles a WordPieceTokenizer knows, besides unk, with BERT's tokens as defaults.
DEFAULT_SPECIAL_TOKENS = {
    "cls": "[CLS]",
    "sep": "[SEP]",
    "pad": "[PAD]",
    "mask": "[MASK]",
}


def is_punctuation(char: str) -> bool:
    """Unicode punctuation (categories P*), plus every ASCII symbol:
    ``$ + < = > ^ ` | ~`` are filed by Unicode as symbols (S*), but BERT splits them off
    like ``.`` and ``,``.

    >>> [c for c in "a$b-c€d¿" if is_punctuation(c)]
    ['$', '-', '¿']
    """
    return char in string.punctuation or unicodedata.category(char).startswith("P")


# What _is_noise and the whitespace rule do to ASCII: controls are dropped, tab, newline
# and carriage return become spaces.
_ASCII_CLEANUP = {code: None for code in [*range(32), 127]} | {
    ord(char): " " for char in "\t\n\r"
}


def _is_noise(char: str) -> bool:
    # Controls (Cc, NUL among them, but tab, newline and carriage return are
    # whitespace), format characters (Cf, such as a zero-width space or a byte-order
    # mark), private-use characters (Co) and lone surrogates (Cs) carry no text, and
    # U+FFFD marks bytes that failed to decode. Unassigned code points (Cn) are kept,
    # and become [UNK], as in HF's BertTokenizer (Google's BERT and HF's older Python
    # tokenizer drop them).
    if " " <= char <= "~":
        # printable ASCII, most of any English text: skip the Unicode lookup
        return False
    category = unicodedata.category(char)
    return char == "\ufffd" or (
        category in ("Cc", "Cf", "Co", "Cs") and char not in "\t\n\r"
    )


def _is_cjk(char: str) -> bool:
    code = ord(char)
    # 0x3400: the lowest block
    return code >= 0x3400 and any(low <= code <= high for low, high in CJK_RANGES)


def basic_tokenize(text: str, lowercase: bool = True) -> list[str]:
    """Split ``text`` into words and punctuation marks, BERT's step before WordPiece.

    >>> basic_tokenize("Zürich\\u200b's 東京!\\tDon't")
    ['zurich', "'", 's', '東', '京', '!', 'don', "'", 't']
    >>> basic_tokenize("Zürich", lowercase=False)
    ['Zürich']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    # the fast path, with the same result: no CJK, no accents, no odd lowercasing
    if text.isascii():
        text = text.translate(_ASCII_CLEANUP)
        return _split_punctuation(text.lower() if lowercase else text)
    text = "".join(
        " " if char.isspace() else char for char in text if not _is_noise(char)
    )
    text = "".join(f" {char} " if _is_cjk(char) else char for char in text)
    if lowercase:
        # NFD splits "é" into "e" and a nonspacing mark (category Mn), which we drop.
        # Then we lowercase character by character, as HF's BertTokenizer does:
        # str.lower() on the whole text would turn a word-final Σ into ς.
        text = "".join(
            char
            for char in unicodedata.normalize("NFD", text)
            if unicodedata.category(char) != "Mn"
        )
        text = "".join(char.lower() for char in text)
    return _split_punctuation(text)


def _split_punctuation(text: str) -> list[str]:
    words = []
    for word in text.split():
        # letters and digits only (no punctuation is alphanumeric): nothing to split
        if word.isalnum():
            words.append(word)
            continue
        # A run of punctuation gives one token per mark; a run of anything else
        # stays one word.
        for punctuation, run in groupby(word, key=is_punctuation):
            run_text = "".join(run)
            words += list(run_text) if punctuation else [run_text]
    return words


def wordpiece_split(
    word: str,
    vocab: Mapping[str, int],
    unk_token: str = "[UNK]",
    max_chars_per_word: int = 100,
) -> list[str]:
    """Split one word greedily: the longest prefix in ``vocab``, then the longest ``##``
    continuation, and so on.

    A word that cannot be built entirely from the vocab, or is longer than
    ``max_chars_per_word``, becomes ``[unk_token]``: BERT never emits half a word.

    >>> vocab = {"un": 0, "##aff": 1, "##able": 2, "[UNK]": 3}
    >>> wordpiece_split("unaffable", vocab)
    ['un', '##aff', '##able']
    >>> wordpiece_split("unable", vocab), wordpiece_split("unaffx", vocab)
    (['un', '##able'], ['[UNK]'])
    """
    if len(word) > max_chars_per_word:
        return [unk_token]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):  # longest candidate first
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk_token]  # not even one character matched here
        pieces.append(piece)
        start = end
    return pieces


def _tokens_in_id_order(vocab) -> list[str]:
    """The tokens of a list (id = position) or of a {token: id} dict whose ids are
    0, 1, ..., n - 1."""
    if isinstance(vocab, str) or not isinstance(vocab, Mapping | Sequence):
        raise TypeError(
            f"vocab must be a dict {{token: id}} or a list of tokens, got "
            f"{type(vocab).__name__}"
        )
    if isinstance(vocab, Mapping) and set(vocab.values()) != set(range(len(vocab))):
        raise ValueError(
            "vocab ids must be the ints 0, 1, ..., len(vocab) - 1, each used once"
        )
    tokens = (
        sorted(vocab, key=vocab.__getitem__)
        if isinstance(vocab, Mapping)
        else list(vocab)
    )
    duplicates = sorted(token for token, count in Counter(tokens).items() if count > 1)
    if not tokens or duplicates or not all(isinstance(token, str) for token in tokens):
        raise ValueError(
            "vocab must hold distinct str tokens, at least one; duplicates: "
            f"{duplicates[:5]}"
        )
    return tokens


class WordPieceTokenizer:
    """BERT's tokenizer over a fixed vocab: ``vocab`` is a list of tokens
    (id = position) or a {token: id} dict.

    ``special_tokens`` overrides the defaults
    {"cls": "[CLS]", "sep": "[SEP]", "pad": "[PAD]", "mask": "[MASK]"}; every special
    token, and ``unk_token``, must be in the vocab; ``special_ids`` gives their ids.

    >>> specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> tokenizer = WordPieceTokenizer([*specials, "a", "b", "##b"])
    >>> tokenizer.encode_pair("a", "bb")
    ([2, 5, 3, 6, 7, 3], [0, 0, 0, 1, 1, 1])
    >>> tokenizer.special_ids["mask"], tokenizer.vocab_size
    (4, 8)
    >>> WordPieceTokenizer(["[UNK]", "a"], special_tokens={"bos": "<s>"})
    Traceback (most recent call last):
    ValueError: special_tokens has unknown names ['bos']; the names are cls, sep, pad, mask (and unk_token)
    """

    def __init__(
        self,
        vocab,
        lowercase=True,
        unk_token="[UNK]",
        special_tokens=None,
        max_chars_per_word=100,
    ):
        self.id_to_token = _tokens_in_id_order(vocab)
        self.vocab = {token: index for index, token in enumerate(self.id_to_token)}
        if not isinstance(lowercase, bool):
            raise TypeError(f"lowercase must be a bool, got {type(lowercase).__name__}")
        self.lowercase = lowercase
        self.max_chars_per_word = require_size("max_chars_per_word", max_chars_per_word)
        special_tokens = dict(special_tokens or {})
        unknown = sorted(set(special_tokens) - set(DEFAULT_SPECIAL_TOKENS))
        if unknown:
            names = ", ".join(DEFAULT_SPECIAL_TOKENS)
            raise ValueError(
                f"special_tokens has unknown names {unknown}; the names are {names} "
                "(and unk_token)"
            )
        self.special_tokens = {
            "unk": unk_token,
            **DEFAULT_SPECIAL_TOKENS,
            **special_tokens,
        }
        missing = {
            role: token
            for role, token in self.special_tokens.items()
            if token not in self.vocab
        }
        if missing:
            raise ValueError(f"special tokens {missing} are not in the vocab")
        self.special_ids = {
            role: self.vocab[token] for role, token in self.special_tokens.items()
        }
        # Longest first, so that where two special tokens start at the same place, the
        # longer one wins.
        alternatives = sorted(set(self.special_tokens.values()), key=len, reverse=True)
        self._special_pattern = re.compile(
            "(" + "|".join(map(re.escape, alternatives)) + ")"
        )
        self._split_word = self._word_splitter()

    def _word_splitter(self):
        # Words repeat (a news corpus has ~40 tokens per distinct word), so each word is
        # split once. A tuple, so no caller can change what the cache holds.
        return lru_cache(maxsize=1 << 16)(
            lambda word: tuple(
                wordpiece_split(
                    word,
                    self.vocab,
                    self.special_tokens["unk"],
                    self.max_chars_per_word,
                )
            )
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        # a cache around a closure does not pickle: the copy (in a worker process)
        # builds its own
        del state["_split_word"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._split_word = self._word_splitter()

    @classmethod
    def from_vocab_file(cls, path, **options) -> "WordPieceTokenizer":
        """Read BERT's vocab.txt: one token per line, its id the line number from 0."""
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        if lines[-1] == "":
            lines.pop()  # the newline that ends the last token
        return cls(lines, **options)

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    def tokenize(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        tokens = []
        # Special tokens written in the raw text stay whole, as in HF, so "Paris is the
        # [MASK] of France." holds a real mask. Splitting on a pattern with one group
        # puts the special tokens at the odd positions.
        for position, chunk in enumerate(self._special_pattern.split(text)):
            if position % 2:
                tokens.append(chunk)
                continue
            for word in basic_tokenize(chunk, self.lowercase):
                tokens += self._split_word(word)
        return tokens

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens``, framed as
        [CLS] text [SEP]."""
        ids = [self.vocab[token] for token in self.tokenize(text)]
        if add_special_tokens:
            return [self.special_ids["cls"], *ids, self.special_ids["sep"]]
        return ids

    def encode_pair(self, first: str, second: str) -> tuple[list[int], list[int]]:
        """[CLS] first [SEP] second [SEP], and the segment of each token
        (0 for first, 1 for second)."""
        first_ids = self.encode(first, add_special_tokens=True)
        second_ids = [*self.encode(second), self.special_ids["sep"]]
        return first_ids + second_ids, [0] * len(first_ids) + [1] * len(second_ids)

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        """Tokens joined by spaces, each ``##`` piece glued to the one before.
        Lowercasing, accents and the spacing around punctuation are lost, so this
        inverts ``encode`` only for text already in that form."""
        tokens = []
        for token_id in ids:
            # ints, numpy or torch ints
            if isinstance(token_id, bool) or not hasattr(token_id, "__index__"):
                raise TypeError(f"ids must be ints, got {type(token_id).__name__}")
            token_id = operator.index(token_id)
            if not 0 <= token_id < self.vocab_size:
                raise ValueError(
                    f"ids must be in [0, vocab_size={self.vocab_size}), got {token_id}"
                )
            tokens.append(self.id_to_token[token_id])
        if skip_special_tokens:  # all of them, [UNK] and [MASK] included, as HF does
            special = set(self.special_tokens.values())
            tokens = [token for token in tokens if token not in special]
        return " ".join(tokens).replace(" ##", "")

    def save(self, path) -> None:
        """Write the vocab and every option to a JSON file that ``load`` reads back into
        an equal tokenizer."""
        state = {
            "vocab": self.id_to_token,
            "lowercase": self.lowercase,
            "unk_token": self.special_tokens["unk"],
            "special_tokens": {
                role: self.special_tokens[role] for role in DEFAULT_SPECIAL_TOKENS
            },
            "max_chars_per_word": self.max_chars_per_word,
        }
        Path(path).write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path) -> "WordPieceTokenizer":
        return cls(**json.loads(Path(path).read_text(encoding="utf-8")))


def _merge(symbols: list[str], first: str, second: str) -> list[str]:
    """Replace each adjacent (first, second), left to right:
    (["t", "##h", "##e"], "t", "##h") -> ["th", "##e"]."""
    merged, index = [], 0
    while index < len(symbols):
        if symbols[index] == first and symbols[index + 1 : index + 2] == [second]:
            merged.append(first + second.removeprefix("##"))
            index += 2
        else:
            merged.append(symbols[index])
            index += 1
    return merged


def train_wordpiece(
    text_or_path,
    vocab_size: int,
    special_tokens: Sequence[str] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
    lowercase: bool = True,
    score: str = "likelihood",
) -> list[str]:
    """Learn a WordPiece vocab of at most ``vocab_size`` tokens from a corpus: a str, or
    a ``pathlib.Path`` to a UTF-8 file. Returns the tokens in id order:
    ``special_tokens``, the initial symbols sorted, then the merges.

    Each word of ``basic_tokenize(corpus)`` starts as its characters, the first plain
    and the rest marked ``##``. Each step merges the adjacent pair (a, b) with the
    highest score freq(ab) / (freq(a) * freq(b)), counted in the current segmentation,
    each word weighted by its count. This is the likelihood-based criterion described
    for WordPiece (Google never published its trainer; Schuster and Nakajima, 2012, pick
    the merge that most raises the likelihood of the corpus). The log of the score is,
    up to a constant, the pointwise mutual information of a and b: how much more often
    they occur together than they would if independent. So it prefers pairs whose parts
    rarely appear apart, where BPE takes the most frequent pair, often made of common
    parts. Ties go to the more frequent pair, then to the pair (a, b) that sorts first
    as strings. Training stops once every word is one token.

    Below, "q" + "##u" scores 1/(1*1) = 1 and is merged first, while "t" + "##h", five
    times as frequent, scores 5/(5*5) = 1/5; next come "##at" (2/(2*2)) and
    "##is" (3/(4*3)).

    >>> train_wordpiece("this this this that that quiz", vocab_size=17)[5:]
    ['##a', '##h', '##i', '##s', '##t', '##u', '##z', 'q', 't', 'qu', '##at', '##is']

    ``score="frequency"`` merges the most frequent pair instead, as BPE does; HF's
    ``WordPieceTrainer`` is built that way (a BPE trainer with the "##" prefix). On a
    small corpus the likelihood score spends most of a small vocabulary on rare words
    whose letters always occur together, while frequency builds the common words first.
    Below "t" + "##h" (5 times) comes first; then "th" + "##i" and "##i" + "##s" tie
    at 3, and "##i" sorts first:

    >>> text = "this this this that that quiz"
    >>> train_wordpiece(text, vocab_size=17, score="frequency")[-5:]
    ['q', 't', 'th', '##is', 'this']
    """
    if score not in ("likelihood", "frequency"):
        raise ValueError(f"score must be 'likelihood' or 'frequency', got {score!r}")
    require_size("vocab_size", vocab_size)
    if isinstance(text_or_path, os.PathLike):
        text_or_path = Path(text_or_path).read_text(encoding="utf-8")
    elif not isinstance(text_or_path, str):
        raise TypeError(
            "text_or_path must be a str (the text) or a pathlib.Path, got "
            f"{type(text_or_path).__name__}"
        )
    if isinstance(special_tokens, str) or not all(
        isinstance(token, str) for token in special_tokens
    ):
        raise TypeError(
            "special_tokens must be a sequence of str tokens, such as ('[PAD]', "
            "'[UNK]')"
        )
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens has duplicates: {list(special_tokens)}")
    # Line by line gives the same words (a newline separates words) and lets most lines
    # take the ASCII fast path.
    word_counts = Counter(
        word
        for line in text_or_path.splitlines()
        for word in basic_tokenize(line, lowercase)
    )
    if not word_counts:
        raise ValueError("text_or_path has no words to train on")

    words = [[word[0]] + ["##" + char for char in word[1:]] for word in word_counts]
    counts = list(word_counts.values())
    alphabet = sorted(
        {symbol for word in words for symbol in word} - set(special_tokens)
    )
    vocab = [*special_tokens, *alphabet]
    if vocab_size < len(vocab):
        raise ValueError(
            f"vocab_size must be >= {len(vocab)} ({len(special_tokens)} special tokens "
            f"+ {len(alphabet)} initial symbols), got {vocab_size}"
        )

    # Running totals, updated only for the words a merge touches, instead of recounting
    # the corpus at every step.
    pair_freq, symbol_freq, words_with = Counter(), Counter(), defaultdict(set)
    # symbol -> the pairs it is part of: their scores move when its count does
    pairs_of = defaultdict(set)
    # pairs whose rank may have moved since the heap last heard of them
    changed: set[tuple[str, str]] = set()

    def count(index: int, sign: int) -> None:
        """Add (sign 1) or remove (sign -1) the symbols and adjacent pairs
        of word ``index``."""
        word, weight = words[index], sign * counts[index]
        for symbol in word:
            symbol_freq[symbol] += weight
        for pair in zip(word, word[1:], strict=False):
            pair_freq[pair] += weight
            changed.add(pair)
            if pair_freq[pair] == 0:
                del pair_freq[pair]  # only pairs still in the corpus compete
                pairs_of[pair[0]].discard(pair)
                pairs_of[pair[1]].discard(pair)
            elif sign > 0:
                words_with[pair].add(index)
                pairs_of[pair[0]].add(pair)
                pairs_of[pair[1]].add(pair)

    def rank(pair: tuple[str, str]) -> tuple:
        """Smallest first: the best score, then the more frequent pair, then the pair
        that sorts first."""
        if score == "frequency":
            return -pair_freq[pair], pair
        return (
            -pair_freq[pair] / (symbol_freq[pair[0]] * symbol_freq[pair[1]]),
            -pair_freq[pair],
            pair,
        )

    # A heap of (rank, pair) entries, as in BPE. After a merge only some pairs are
    # re-ranked and pushed again: those whose count changed and, for the likelihood
    # score, those sharing a symbol with the merged pair (that symbol's count fell). An
    # entry whose rank is no longer its pair's current rank is outdated and skipped.
    heap: list[tuple[tuple, tuple[str, str]]] = []

    def best_pair() -> tuple[str, str]:
        for pair in changed:
            if pair in pair_freq:
                heapq.heappush(heap, (rank(pair), pair))
        changed.clear()
        while True:
            entry_rank, pair = heapq.heappop(heap)
            if pair in pair_freq and rank(pair) == entry_rank:
                return pair

    for index in range(len(words)):
        count(index, +1)
    known = set(vocab)
    while len(vocab) < vocab_size and pair_freq:
        first, second = best_pair()
        for index in words_with.pop((first, second)):
            count(index, -1)
            words[index] = _merge(words[index], first, second)
            count(index, +1)
        if score == "likelihood":
            changed.update(pairs_of[first] | pairs_of[second])
        # the second symbol of a pair always continues the word
        new_token = first + second.removeprefix("##")
        # "##a" + "##bc" and "##ab" + "##c" build the same token
        if new_token not in known:
            vocab.append(new_token)
            known.add(new_token)
    return vocab
