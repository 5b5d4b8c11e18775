"""Copying weights from PyTorch's and Hugging Face's modules into ours, so outputs can be compared exactly.

    >>> theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> ours = load_torch_multihead_attention(MultiHeadAttention(8, 2), theirs)
"""

import torch
from torch import nn

from minformers.attention import MultiHeadAttention
from minformers.blocks import TransformerBlock


@torch.no_grad()
def load_torch_multihead_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy `theirs` into `ours`. PyTorch stacks W_Q, W_K, W_V row-wise in one (3C, C) `in_proj_weight`."""
    if theirs.in_proj_weight is None:
        raise ValueError("theirs must use one in_proj_weight (built with kdim = vdim = embed_dim)")
    if theirs.in_proj_weight.shape != (3 * ours.d_model, ours.d_model) or theirs.num_heads != ours.n_heads:
        raise ValueError(
            f"shapes differ: theirs has embed_dim={theirs.embed_dim}, num_heads={theirs.num_heads}; "
            f"ours has d_model={ours.d_model}, n_heads={ours.n_heads}"
        )
    weights = theirs.in_proj_weight.chunk(3)  # (3C, C) -> 3 x (C, C)
    biases = theirs.in_proj_bias.chunk(3) if theirs.in_proj_bias is not None else (None,) * 3
    for projection, weight, bias in zip((ours.q_proj, ours.k_proj, ours.v_proj), weights, biases, strict=True):
        projection.weight.copy_(weight)
        if bias is not None:
            projection.bias.copy_(bias)
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())
    return ours


@torch.no_grad()
def load_torch_encoder_layer(ours: TransformerBlock, theirs: nn.TransformerEncoderLayer) -> TransformerBlock:
    """Copy a `torch.nn.TransformerEncoderLayer` into our block (same norm_first, activation and sizes)."""
    if theirs.norm_first != ours.norm_first:
        raise ValueError(f"norm_first differs: theirs {theirs.norm_first}, ours {ours.norm_first}")
    load_torch_multihead_attention(ours.attention, theirs.self_attn)
    ours.attention_norm.load_state_dict(theirs.norm1.state_dict())
    ours.feed_forward_norm.load_state_dict(theirs.norm2.state_dict())
    ours.feed_forward.up_proj.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.down_proj.load_state_dict(theirs.linear2.state_dict())
    return ours
