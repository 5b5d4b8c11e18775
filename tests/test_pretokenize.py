"""Pretokenization: GPT-2's regex on hand-checked strings, and special tokens kept whole, longest first."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minformers.pretokenize import pretokenize, split_on_special

EOT = "<|endoftext|>"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello world", ["Hello", " world"]),
        # Contractions split off; "'S" is not one of them (the pattern is case-sensitive), so it goes as punctuation.
        ("it's they'll I'm we'd you've we're don't She'S", ["it", "'s", " they", "'ll", " I", "'m", " we", "'d",
                                                           " you", "'ve", " we", "'re", " don", "'t", " She", "'",
                                                           "S"]),
        # A run of spaces keeps its last space for the next word; a run at the end stays whole.
        ("a   b  ", ["a", "  ", " b", "  "]),
        ("x\n\n  y", ["x", "\n\n ", " y"]),
        # Letters, digits and other symbols never share a pretoken; only one space may lead each.
        ("abc123!? 45 ... é", ["abc", "123", "!?", " 45", " ...", " é"]),
        ("", []),
    ],
)
def test_gpt2_pretokens(text, expected):
    assert pretokenize(text) == expected


def test_special_tokens_are_cut_out_whole():
    assert split_on_special(f"a{EOT}b{EOT}", [EOT]) == [("a", False), (EOT, True), ("b", False), (EOT, True)]
    assert split_on_special(EOT + EOT, [EOT]) == [(EOT, True), (EOT, True)]
    assert split_on_special("<|endof", [EOT]) == [("<|endof", False)]
    assert split_on_special("", [EOT]) == []


def test_longest_special_token_wins():
    double = EOT + EOT
    pieces = split_on_special(f"x{EOT}{EOT}{EOT}y", [EOT, double])
    assert pieces == [("x", False), (double, True), (EOT, True), ("y", False)]
    # The order in which the special tokens are declared does not matter.
    assert split_on_special(f"x{EOT}{EOT}{EOT}y", [double, EOT]) == pieces


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=6), st.sampled_from([EOT, "<|", "|>", " ", "\n"])), max_size=8))
def test_pieces_join_back_to_the_text(parts):
    text = "".join(parts)
    assert "".join(pretokenize(text)) == text
    pieces = split_on_special(text, [EOT])
    assert "".join(piece for piece, _ in pieces) == text
    assert all(piece for piece, _ in pieces)
    assert all((piece == EOT) == is_special for piece, is_special in pieces)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: pretokenize(b"bytes"), TypeError, "text must be a str"),
        (lambda: split_on_special("a", EOT), TypeError, "special_tokens must be a list of str"),
        (lambda: split_on_special("a", [""]), ValueError, "special_tokens must be non-empty"),
        (lambda: split_on_special("a", [EOT, EOT]), ValueError, "special_tokens must be distinct"),
        (lambda: split_on_special("a", [1]), TypeError, "special_tokens must be str"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()
