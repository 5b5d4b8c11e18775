"""Blocks: parity with torch.nn.TransformerEncoderLayer (pre-LN and post-LN, relu and gelu, causal)."""


import pytest
import torch
from torch import nn

from minformers import blocks
from minformers.blocks import FeedForward, TransformerBlock
from minformers.masks import causal_mask

B, T, C, H, D_FF = 2, 6, 16, 4, 32



def torch_twin(ours: TransformerBlock, activation: str) -> nn.TransformerEncoderLayer:
    theirs = nn.TransformerEncoderLayer(
        C, H, D_FF, dropout=0.0, activation=activation, batch_first=True, norm_first=ours.norm_first
    )
    attention = ours.attention
    pairs = [
        (theirs.self_attn.out_proj, attention.out_proj),
        (theirs.linear1, ours.feed_forward.up_proj),
        (theirs.linear2, ours.feed_forward.down_proj),
        (theirs.norm1, ours.attention_norm),
        (theirs.norm2, ours.feed_forward_norm),
    ]
    with torch.no_grad():
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        theirs.self_attn.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        theirs.self_attn.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        for target, source in pairs:
            target.weight.copy_(source.weight)
            target.bias.copy_(source.bias)
    return theirs.eval()


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_matches_torch_encoder_layer(norm_first, activation):
    torch.manual_seed(0)
    ours = TransformerBlock(C, H, D_FF, norm_first=norm_first, activation=activation).eval()
    with torch.no_grad():  # non-trivial LayerNorm parameters, so a swapped norm would show
        for norm in (ours.attention_norm, ours.feed_forward_norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_(0, 0.1)
    theirs = torch_twin(ours, activation)
    x = torch.randn(B, T, C)
    with torch.no_grad():
        # torch's bool src_mask means True = blocked: the inverse of ours.
        expected = theirs(x, src_mask=~causal_mask(T))
        assert torch.allclose(ours(x, mask=causal_mask(T)), expected, atol=1e-5)
        assert torch.allclose(ours(x), theirs(x), atol=1e-5)


def test_causal_block_ignores_the_future():
    torch.manual_seed(0)
    block = TransformerBlock(C, H, D_FF).eval()
    x = torch.randn(1, T, C)
    changed = x.clone()
    changed[:, -1] += 1.0
    with torch.no_grad():
        before, after = block(x, mask=causal_mask(T)), block(changed, mask=causal_mask(T))
    assert torch.equal(before[:, :-1], after[:, :-1])
    assert not torch.allclose(before[:, -1], after[:, -1])


def test_feed_forward_by_hand():
    ff = FeedForward(d_model=2, d_ff=3, activation="relu")
    with torch.no_grad():
        ff.up_proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        ff.up_proj.bias.copy_(torch.tensor([0.0, 0.0, -3.0]))
        ff.down_proj.weight.copy_(torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 2.0]]))
        ff.down_proj.bias.zero_()
        # x = [1, -2]: hidden = relu([1, -2, -4]) = [1, 0, 0] -> output [1, 0]
        # x = [2, 2]:  hidden = relu([2, 2, 1]) = [2, 2, 1]   -> output [5, 2]
        out = ff(torch.tensor([[1.0, -2.0], [2.0, 2.0]]))
    assert torch.equal(out, torch.tensor([[1.0, 0.0], [5.0, 2.0]]))


def test_activation_variants():
    x = torch.linspace(-3, 3, 7)
    assert torch.equal(blocks.ACTIVATIONS["gelu_tanh"]()(x), nn.functional.gelu(x, approximate="tanh"))
    assert torch.equal(blocks.ACTIVATIONS["gelu"]()(x), nn.functional.gelu(x))


def test_bad_sizes_are_named():
    """The block trusts its caller; the attention it builds checks the sizes a learner can get wrong."""
    with pytest.raises(ValueError, match="d_model must be divisible by n_heads"):
        TransformerBlock(10, 4, 16)
