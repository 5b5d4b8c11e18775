"""Mean pooling ignores padding; cosine similarity matches torch's and a hand example."""

import pytest
import torch
import torch.nn.functional as F

from minformers.similarity import cosine_matrix, mean_pool


def test_mean_pool_ignores_padding_so_batching_does_not_change_a_sentence():
    torch.manual_seed(0)
    alone = torch.randn(1, 3, 8)
    padded = torch.cat([alone, torch.randn(1, 4, 8)], dim=1)  # the same sentence, with 4 padding positions
    pooled_alone = mean_pool(alone, torch.ones(1, 3))
    pooled_padded = mean_pool(padded, torch.tensor([[1, 1, 1, 0, 0, 0, 0]]))
    torch.testing.assert_close(pooled_alone, pooled_padded)
    torch.testing.assert_close(pooled_alone[0], alone[0].mean(dim=0))


def test_all_padding_gives_zeros_not_nan():
    assert torch.equal(mean_pool(torch.randn(2, 3, 4), torch.zeros(2, 3)), torch.zeros(2, 4))


def test_cosine_matrix_equals_torch():
    torch.manual_seed(1)
    a, b = torch.randn(5, 7), torch.randn(3, 7)
    expected = F.cosine_similarity(a[:, None, :], b[None, :, :], dim=-1)
    torch.testing.assert_close(cosine_matrix(a, b), expected)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="attention_mask"):
        mean_pool(torch.randn(2, 3, 4), torch.ones(2, 4))
    with pytest.raises(ValueError, match="same C"):
        cosine_matrix(torch.randn(2, 3), torch.randn(2, 4))
