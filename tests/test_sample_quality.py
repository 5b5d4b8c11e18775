import pytest

from minformers.support.sample_quality import distinct_share, known_word_share, repeated_share, words


def test_words_strip_punctuation_at_the_ends_only_and_lower_case():
    assert words("KING HENRY:\nWhat, o'er the--sea? !!") == ["king", "henry", "what", "o'er", "the--sea"]
    assert words("  ... ;; ") == []


def test_known_word_share_counts_words_not_characters():
    known = {"what", "is", "love"}
    assert known_word_share("What is lovve?", known) == pytest.approx(2 / 3)
    assert known_word_share("", known) == 0.0


def test_distinct_share_is_one_for_text_without_repeats_and_falls_for_a_loop():
    assert distinct_share("abcdefg", n=3) == 1.0
    assert distinct_share("aaaaaa", n=3) == pytest.approx(1 / 4)  # 4 trigrams, all "aaa"
    with pytest.raises(ValueError, match="at least n=4"):
        distinct_share("abc", n=4)


def test_repeated_share_by_hand():
    assert repeated_share("the cat sat on the mat", n=2) == 0.0  # 5 pairs, none twice
    assert repeated_share("ha ha ha ha", n=1) == pytest.approx(3 / 4)  # every "ha" after the first repeats
    assert repeated_share("two words", n=3) == 0.0
