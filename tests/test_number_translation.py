"""The number-words task: tokens round-trip, train and test numbers never overlap, ids decode back to the text."""

import pytest

from minformers.encoder_decoder import EOS, PAD
from minformers.recipes.number_translation import join_words, number_pairs, number_translation, words


def test_words_round_trip_on_both_languages():
    for english, french in number_pairs([0, 21, 80, 81, 171, 200, 1001, 71_492, 999_999]):
        assert join_words(words(english)) == english and join_words(words(french)) == french


def test_split_is_by_number_and_ids_decode_to_the_text():
    task = number_translation(n_train=300, n_test=50, limit=5_000)
    assert not set(task.train_numbers) & set(task.test_numbers)
    assert len(task.train_numbers) == 300 and len(task.test_numbers) == 50
    sources, targets = task.tensors(task.test_pairs)
    for row, (english, french) in enumerate(task.test_pairs):
        assert task.source_vocab.decode(sources[row].tolist()) == english
        assert task.target_vocab.decode(targets[row].tolist()) == french
        length = int((targets[row] != PAD).sum())
        assert targets[row, length - 1] == EOS


def test_unknown_words_and_oversized_splits_are_refused():
    task = number_translation(n_train=100, n_test=10, limit=1_000)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        task.source_vocab.encode("one million")
    with pytest.raises(ValueError, match="limit"):
        number_translation(n_train=990, n_test=20, limit=1_000)
