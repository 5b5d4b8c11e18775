import pytest
import torch

from minformers.attention_patterns import PATTERNS, head_profile, head_table, uniform_causal_weights


def test_each_layer_and_head_gets_its_own_profile():
    T = 6
    reads_itself = torch.eye(T)  # (T, T)
    reads_first = torch.zeros(T, T)
    reads_first[:, 0] = 1
    weights = torch.stack([torch.stack([reads_itself, reads_first]),  # layer 1: heads 1 and 2
                           torch.stack([reads_first, reads_itself])])[:, None]  # (L=2, B=1, H=2, T, T)
    ids = torch.tensor([[0, 1, 1, 1, 1, 1]])  # a break only at position 0
    profile = head_profile(weights, ids, break_ids=[0])
    assert torch.equal(profile["same token"], torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    assert torch.equal(profile["last word break"], torch.tensor([[1 / 6, 1.0], [1.0, 1 / 6]]))  # query 0 is the break
    assert torch.allclose(profile["distance"], torch.tensor([[0.0, 3.0], [3.0, 0.0]]))  # mean of 1..5
    assert torch.equal(profile["previous token"][0], torch.tensor([0.0, 0.2]))  # only query 1's previous is key 0


def test_uniform_weights_are_causal_and_sum_to_one():
    weights = uniform_causal_weights(2, 3, 4, 5)
    assert weights.shape == (2, 3, 4, 5, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 4, 5))
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))
    assert set(head_profile(weights, torch.zeros(3, 5, dtype=torch.long), [0])) == set(PATTERNS)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match=r"\(L, B, H, T, T\)"):
        head_profile(torch.zeros(1, 4, 4), torch.zeros(1, 4, dtype=torch.long), [0])
    with pytest.raises(ValueError, match="input_ids must be"):
        head_profile(uniform_causal_weights(1, 1, 1, 4), torch.zeros(1, 5, dtype=torch.long), [0])


def test_head_table_has_a_row_per_head_then_the_even_spread():
    # 2 layers of 1 head: the reading-itself head, then the reading-the-first-token head.
    T = 4
    reads_first = torch.zeros(T, T)
    reads_first[:, 0] = 1
    weights = torch.stack([torch.eye(T), reads_first])[:, None, None]  # (L=2, B=1, H=1, T, T)
    ids = torch.tensor([[5, 0, 6, 7]])
    profile = head_profile(weights, ids, break_ids=[0])
    even = head_profile(uniform_causal_weights(1, 1, 1, T), ids, break_ids=[0])
    lines = head_table(profile, even, ["before", "self", "break", "back"]).data.splitlines()
    assert lines == [
        "| head | before | self | break | back |",
        "| --- | --- | --- | --- | --- |",
        "| layer 1, head 1 | 0.00 | 1.00 | 0.33 | 0.0 |",
        "| layer 2, head 1 | 0.33 | 0.00 | 0.00 | 2.0 |",
        "| even spread over the past | 0.36 | 0.36 | 0.36 | 1.0 |",
    ]
