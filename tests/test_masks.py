"""Masks: hand-written expected matrices for tiny sizes (1 = may attend); errors name the argument."""

import pytest
import torch

from minformers.masks import causal_mask, combine_masks, local_global_mask, padding_mask, sliding_window_mask


def as_bool(rows):
    return torch.tensor(rows, dtype=torch.bool)



def test_causal_square():
    expected = as_bool([[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert torch.equal(causal_mask(3), expected)


def test_causal_with_cache_queries_are_the_last_positions():
    # 5 keys, 2 queries at absolute positions 3 and 4.
    expected = as_bool([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    assert torch.equal(causal_mask(2, t_k=5), expected)
    # One new token against a cache sees everything.
    assert torch.equal(causal_mask(1, t_k=4), as_bool([[1, 1, 1, 1]]))


def test_sliding_window_causal():
    # p - 2 < j <= p: two keys, the query itself and the one before.
    expected = as_bool([[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]])
    assert torch.equal(sliding_window_mask(4, window=2), expected)


def test_sliding_window_with_cache():
    # queries at positions 3, 4 of 5; window 2 -> keys {2, 3} and {3, 4}.
    expected = as_bool([[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])
    assert torch.equal(sliding_window_mask(2, window=2, t_k=5), expected)


def test_sliding_window_bidirectional():
    # |p - j| <= 1
    expected = as_bool([[1, 1, 0, 0], [1, 1, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1]])
    assert torch.equal(sliding_window_mask(4, window=1, causal=False), expected)


def test_sliding_window_wider_than_sequence_is_causal():
    assert torch.equal(sliding_window_mask(5, window=5), causal_mask(5))
    assert torch.equal(sliding_window_mask(5, window=1), torch.eye(5, dtype=torch.bool))


def test_padding():
    mask = padding_mask(torch.tensor([2, 3]))
    assert mask.shape == (2, 1, 1, 3)
    assert torch.equal(mask[:, 0, 0], as_bool([[1, 1, 0], [1, 1, 1]]))
    wider = padding_mask(torch.tensor([2, 3]), max_len=4)
    assert torch.equal(wider[:, 0, 0], as_bool([[1, 1, 0, 0], [1, 1, 1, 0]]))
    assert torch.equal(padding_mask(torch.tensor([0, 1]), max_len=2)[:, 0, 0], as_bool([[0, 0], [1, 0]]))


def test_combine_padding_and_causal():
    combined = combine_masks(padding_mask(torch.tensor([2, 3])), None, causal_mask(3))
    assert combined.shape == (2, 1, 3, 3)
    expected = as_bool([[[1, 0, 0], [1, 1, 0], [1, 1, 0]], [[1, 0, 0], [1, 1, 0], [1, 1, 1]]])
    assert torch.equal(combined[:, 0], expected)


def test_combine_nothing_is_none():
    assert combine_masks() is None
    assert combine_masks(None, None) is None
    single = causal_mask(2)
    assert torch.equal(combine_masks(None, single), single)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: causal_mask(0), ValueError, "t_q must be >= 1"),
        (lambda: causal_mask(2.0), TypeError, "t_q must be an int"),
        (lambda: causal_mask(3, t_k=2), ValueError, "t_k must be >= t_q=3"),
        (lambda: sliding_window_mask(4, window=0), ValueError, "window must be >= 1"),
        (lambda: padding_mask(torch.tensor([2, 5]), max_len=4), ValueError, "lengths must be <= max_len=4"),
        (lambda: padding_mask(torch.tensor([-1, 2])), ValueError, "lengths must be >= 0"),
        (lambda: padding_mask(torch.tensor([1.0, 2.0])), TypeError, "lengths must be an integer tensor"),
        (lambda: padding_mask(torch.tensor([[1, 2]])), ValueError, r"lengths must have shape \(B,\)"),
        (lambda: padding_mask(torch.tensor([0, 0])), ValueError, "max_len must be >= 1"),
        (
            lambda: combine_masks(causal_mask(2), torch.ones(2, 2)),
            TypeError,
            "masks must be bool.*position 1",
        ),
        (lambda: combine_masks(causal_mask(2), causal_mask(3)), ValueError, "do not broadcast"),
    ],
)
def test_bad_arguments_are_named(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_local_global_with_two_global_tokens():
    # Window 1 on each side; tokens 0 and 5 are global (their rows and columns are all True).
    expected = as_bool(
        [
            [1, 1, 1, 1, 1, 1],
            [1, 1, 1, 0, 0, 1],
            [1, 1, 1, 1, 0, 1],
            [1, 0, 1, 1, 1, 1],
            [1, 0, 0, 1, 1, 1],
            [1, 1, 1, 1, 1, 1],
        ]
    )
    assert torch.equal(local_global_mask(6, window=1, global_positions=[0, 5]), expected)


@pytest.mark.parametrize("bad", [[6], [-1], [1.0], [True]])
def test_local_global_rejects_positions_outside_the_sequence(bad):
    with pytest.raises(ValueError, match=r"global_positions must be ints in \[0, t=6\)"):
        local_global_mask(6, window=1, global_positions=bad)
