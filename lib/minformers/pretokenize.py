"""Pretokenization: cut text into the pieces inside which a byte-level BPE may merge.

Two steps, in this order:

1. `split_on_special` cuts out special tokens such as "<|endoftext|>", which are kept
   whole and never merged;
2. `pretokenize` cuts the text between them with GPT-2's regex, so that no merge ever
   spans a word boundary (no token "dog." next to "dog!" and "dog?"), and a leading
   space sticks to the word that follows it.

    >>> split_on_special("Hi.<|endoftext|>Bye", ["<|endoftext|>"])
    [('Hi.', False), ('<|endoftext|>', True), ('Bye', False)]
    >>> pretokenize("Bye, it's 2024!")
    ['Bye', ',', ' it', "'s", ' 2024', '!']
"""

import functools
import re
from collections.abc import Iterable

import regex

# GPT-2's pattern (Radford et al. 2019), tried left to right at each position:
#   the English contractions 's 't 're 've 'm 'll 'd;
#   an optional space followed by letters, or by digits, or by other symbols (so
#     " world" is one piece);
#   a whitespace run not followed by a non-space, so that the run's last space goes
#     with the next word;
#   any remaining whitespace.
GPT2_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)
# \p{L} (letter) and \p{N} (number) need `regex`, not `re`
GPT2_REGEX = regex.compile(GPT2_PATTERN)


def pretokenize(text: str) -> list[str]:
    """Cut `text` into GPT-2 pretokens; joined back together they give `text` again.

    >>> pretokenize("Hello  world's   end\\n")
    ['Hello', ' ', ' world', "'s", '  ', ' end', '\\n']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return GPT2_REGEX.findall(text)


def require_special_tokens(special_tokens: Iterable[str]) -> tuple[str, ...]:
    """Return `special_tokens` as a tuple of distinct, non-empty strings; raise naming
    the argument otherwise.

    >>> require_special_tokens(["<|endoftext|>"])
    ('<|endoftext|>',)
    >>> require_special_tokens("<|endoftext|>")
    Traceback (most recent call last):
    TypeError: special_tokens must be a list of str, not a single str
    """
    # iterating over it would make every character special
    if isinstance(special_tokens, str):
        raise TypeError("special_tokens must be a list of str, not a single str")
    special_tokens = tuple(special_tokens)
    for token in special_tokens:
        if not isinstance(token, str):
            raise TypeError(f"special_tokens must be str, got {type(token).__name__}")
        if not token:
            raise ValueError("special_tokens must be non-empty strings, got ''")
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens must be distinct, got {list(special_tokens)}")
    return special_tokens


@functools.lru_cache(maxsize=64)
def _special_regex(special_tokens: tuple[str, ...]) -> re.Pattern:
    # An alternation takes the first alternative that matches, so listing the longest
    # first makes the longest special token win at a given position. The one capturing
    # group makes re.split keep the separators.
    longest_first = sorted(special_tokens, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, longest_first)) + ")")


def split_on_special(
    text: str, special_tokens: Iterable[str]
) -> list[tuple[str, bool]]:
    """Cut `text` into (piece, is_special) pairs, in order, with no empty pieces.

    The text is scanned left to right; at each position the longest special token that
    matches there wins, so a declared "<s><s>" beats two "<s>":

    >>> split_on_special("a<s><s><s>b", ["<s>", "<s><s>"])
    [('a', False), ('<s><s>', True), ('<s>', True), ('b', False)]
    >>> split_on_special("no specials here", [])
    [('no specials here', False)]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    special_tokens = require_special_tokens(special_tokens)
    if not special_tokens:
        return [(text, False)] if text else []
    parts = _special_regex(special_tokens).split(text)
    # re.split alternates text, separator, text, ...: the separators (odd positions) are
    # the special tokens.
    return [(part, position % 2 == 1) for position, part in enumerate(parts) if part]
