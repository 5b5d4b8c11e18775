"""Character-level data: the tokenizer round-trips and refuses unseen characters; windows are real slices."""

import pytest
import torch

from minformers.language_modeling import CharTokenizer, random_windows


def test_char_tokenizer_round_trip_and_closed_vocabulary():
    tokenizer = CharTokenizer("to be or not")
    assert tokenizer.id_to_char == sorted(set("to be or not"))
    assert tokenizer.decode(tokenizer.encode("not to be")) == "not to be"
    with pytest.raises(ValueError, match=r"\['x'\]"):
        tokenizer.encode("box")
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer("")


def test_windows_are_consecutive_slices_and_reach_the_end():
    ids = torch.arange(10)
    windows = random_windows(ids, block_size=4, batch_size=500, generator=torch.Generator().manual_seed(0))
    assert windows.shape == (500, 4)
    assert ((windows[:, 1:] - windows[:, :-1]) == 1).all()  # consecutive tokens
    assert windows[:, 0].min() == 0 and windows[:, -1].max() == 9  # every start, the last one included
    with pytest.raises(ValueError, match="block_size"):
        random_windows(ids, block_size=11, batch_size=1, generator=torch.Generator())
