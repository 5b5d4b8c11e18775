"""Rough scores for generated text, the ones the decoder pages read samples with: are
the words real, is the text varied, does it loop? None of them is a judgement of
quality; each catches one way a sample fails.

    >>> words("O Romeo, Romeo! 'tis -- well.")
    ['o', 'romeo', 'romeo', 'tis', 'well']
    >>> known_word_share("O Romeo, Rumeo!", {"o", "romeo"})  # 2 of 3 words known
    0.6666666666666666
    >>> distinct_share("abababab", n=2)  # 7 pairs, 2 distinct ("ab", "ba")
    0.2857142857142857
    >>> # "to be", "be or", "or not" come back: 3 of 7 pairs
    >>> repeated_share("to be or not to be or not", n=2)
    0.42857142857142855
"""

import string

from minformers.support.arguments import require_size


def words(text: str) -> list[str]:
    """The whitespace-separated words of ``text``, lower-cased, with punctuation
    stripped from their ends; pieces that are only punctuation are dropped."""
    stripped = (piece.strip(string.punctuation).lower() for piece in text.split())
    return [word for word in stripped if word]


def known_word_share(text: str, known: set[str]) -> float:
    """The share of ``words(text)`` found in ``known`` (say, the words of the training
    text); 0 for no words."""
    found = words(text)
    return sum(word in known for word in found) / len(found) if found else 0.0


def distinct_share(text: str, n: int = 4) -> float:
    """Distinct character n-grams over all n-grams: near 1 for varied text, low for
    text that loops."""
    require_size("n", n)
    grams = [text[i : i + n] for i in range(len(text) - n + 1)]
    if not grams:
        raise ValueError(
            f"text must be at least n={n} characters long, got {len(text)}"
        )
    return len(set(grams)) / len(grams)


def repeated_share(text: str, n: int = 3) -> float:
    """The share of word n-grams that already occurred earlier in the same text: 0 for
    no repeats, near 1 for a loop. 0 for a text of fewer than n words."""
    require_size("n", n)
    found = words(text)
    seen, repeats, total = set(), 0, 0
    for i in range(len(found) - n + 1):
        gram = tuple(found[i : i + n])
        repeats += gram in seen
        seen.add(gram)
        total += 1
    return repeats / total if total else 0.0
