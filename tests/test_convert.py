"""Weights copied from PyTorch's modules into ours give the same outputs; mismatched modules are refused."""

import pytest
import torch
from torch import nn

from minformers.attention import MultiHeadAttention
from minformers.blocks import TransformerBlock
from minformers.convert.pytorch import (
    load_torch_encoder_layer,
    load_torch_multihead_attention,
)
from minformers.masks import causal_mask


def test_multihead_attention_loaded_from_torch_matches_it():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = load_torch_multihead_attention(MultiHeadAttention(16, 4), theirs).eval()
    query, memory = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    with torch.no_grad():
        expected = theirs(query, memory, memory)[0]
        torch.testing.assert_close(ours(query, memory), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_loaded_from_torch_matches_it(norm_first, activation):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    ).eval()
    ours = TransformerBlock(16, 4, 32, norm_first=norm_first, activation=activation)
    ours = load_torch_encoder_layer(ours, theirs).eval()
    x = torch.randn(3, 7, 16)
    with torch.no_grad():
        expected = theirs(x, src_mask=~causal_mask(7))  # torch: True = blocked
        torch.testing.assert_close(ours(x, mask=causal_mask(7)), expected, atol=1e-5, rtol=0)


def test_mismatched_sizes_are_refused():
    with pytest.raises(ValueError, match="embed_dim=16, num_heads=4.*d_model=16, n_heads=2"):
        load_torch_multihead_attention(MultiHeadAttention(16, 2), nn.MultiheadAttention(16, 4))


def test_mismatched_norm_placement_is_refused():
    theirs = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=False)
    with pytest.raises(ValueError, match="norm_first differs"):
        load_torch_encoder_layer(TransformerBlock(16, 4, 32, norm_first=True), theirs)
