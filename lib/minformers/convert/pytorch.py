"""Copying weights between our modules and torch.nn's (MultiheadAttention,
TransformerEncoderLayer, Transformer), so outputs can be compared exactly.

>>> theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
>>> ours = load_torch_multihead_attention(MultiHeadAttention(8, 2), theirs)
"""

import warnings

import torch
from torch import nn

from minformers.attention import MultiHeadAttention
from minformers.blocks import TransformerBlock


def _attention_pairs(ours: MultiHeadAttention, theirs: nn.MultiheadAttention):
    """(our tensor, their tensor) pairs of one attention layer. PyTorch stacks W_Q, W_K,
    W_V row-wise in one (3C, C) ``in_proj_weight``; its chunks are views, so copying
    into them writes theirs."""
    if theirs.in_proj_weight is None:
        raise ValueError(
            "theirs must use one in_proj_weight (built with kdim = vdim = embed_dim)"
        )
    if (
        theirs.in_proj_weight.shape != (3 * ours.d_model, ours.d_model)
        or theirs.num_heads != ours.n_heads
    ):
        raise ValueError(
            f"shapes differ: theirs has embed_dim={theirs.embed_dim}, "
            f"num_heads={theirs.num_heads}; ours has d_model={ours.d_model}, "
            f"n_heads={ours.n_heads}"
        )
    projections = (ours.q_proj, ours.k_proj, ours.v_proj)
    # 3 x (C, C)
    pairs = list(
        zip(
            (p.weight for p in projections), theirs.in_proj_weight.chunk(3), strict=True
        )
    )
    if theirs.in_proj_bias is not None:
        pairs += zip(
            (p.bias for p in projections), theirs.in_proj_bias.chunk(3), strict=True
        )
    return pairs + _module_pairs(ours.out_proj, theirs.out_proj)


def _module_pairs(ours: nn.Module, theirs: nn.Module):
    """Same-named parameters of two modules of one kind (Linear, LayerNorm)."""
    mine, yours = dict(ours.named_parameters()), dict(theirs.named_parameters())
    if mine.keys() != yours.keys():
        raise ValueError(
            f"parameters differ: ours {sorted(mine)}, theirs {sorted(yours)}"
        )
    return [(mine[name], yours[name]) for name in mine]


def _block_pairs(ours, theirs):
    """An encoder block (TransformerBlock) or decoder block (transformer.DecoderBlock)
    against torch's layer."""
    if theirs.norm_first != ours.norm_first:
        raise ValueError(
            f"norm_first differs: theirs {theirs.norm_first}, ours {ours.norm_first}"
        )
    if isinstance(ours, TransformerBlock):
        attention = _attention_pairs(ours.attention, theirs.self_attn)
        norms = (ours.attention_norm, ours.feed_forward_norm)
    else:
        attention = _attention_pairs(ours.self_attention, theirs.self_attn)
        attention += _attention_pairs(ours.cross_attention, theirs.multihead_attn)
        norms = (
            ours.self_attention_norm,
            ours.cross_attention_norm,
            ours.feed_forward_norm,
        )
    pairs = attention + _module_pairs(ours.feed_forward.up_proj, theirs.linear1)
    pairs += _module_pairs(ours.feed_forward.down_proj, theirs.linear2)
    for index, norm in enumerate(norms, start=1):
        pairs += _module_pairs(norm, getattr(theirs, f"norm{index}"))
    return pairs


@torch.no_grad()
def _copy(pairs, into_ours: bool) -> None:
    for mine, yours in pairs:
        (mine.copy_(yours) if into_ours else yours.copy_(mine))


def load_torch_multihead_attention(
    ours: MultiHeadAttention, theirs: nn.MultiheadAttention
) -> MultiHeadAttention:
    """Copy `theirs` into `ours`."""
    _copy(_attention_pairs(ours, theirs), into_ours=True)
    return ours


def load_torch_encoder_layer(
    ours: TransformerBlock, theirs: nn.TransformerEncoderLayer
) -> TransformerBlock:
    """Copy a `torch.nn.TransformerEncoderLayer` into our block (same norm_first,
    activation and sizes)."""
    _copy(_block_pairs(ours, theirs), into_ours=True)
    return ours


def _transformer_pairs(ours, theirs: nn.Transformer):
    encoder, decoder = theirs.encoder, theirs.decoder
    if (len(encoder.layers), len(decoder.layers)) != (
        len(ours.encoder_layers),
        len(ours.decoder_layers),
    ):
        raise ValueError(
            f"layer counts differ: theirs {len(encoder.layers)} + "
            f"{len(decoder.layers)}, ours {len(ours.encoder_layers)} + "
            f"{len(ours.decoder_layers)}"
        )
    pairs = [
        pair
        for mine, yours in zip(ours.encoder_layers, encoder.layers, strict=True)
        for pair in _block_pairs(mine, yours)
    ]
    pairs += [
        pair
        for mine, yours in zip(ours.decoder_layers, decoder.layers, strict=True)
        for pair in _block_pairs(mine, yours)
    ]
    for mine, yours in (
        (ours.encoder_norm, encoder.norm),
        (ours.decoder_norm, decoder.norm),
    ):
        if (mine is None) != (yours is None):
            raise ValueError(
                "final norms differ: a post-LN model has none (torch.nn.Transformer "
                "always builds them; to_torch_transformer removes them)"
            )
        if mine is not None:
            pairs += _module_pairs(mine, yours)
    return pairs


def to_torch_transformer(ours) -> nn.Transformer:
    """A ``torch.nn.Transformer`` (batch_first) computing what our EncoderDecoder's
    encoder and decoder stacks compute, with our weights. Embeddings, positions and the
    output layer are not part of torch's module: feed it embedded inputs. For the
    paper's post-LN, torch's two final LayerNorms are removed (set to None)."""
    config = ours.config
    # torch notes that pre-LN layers skip its nested-tensor fast path: no matter
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="enable_nested_tensor")
        theirs = nn.Transformer(
            config.d_model,
            config.n_heads,
            config.n_encoder_layers,
            config.n_decoder_layers,
            config.d_ff,
            config.dropout,
            activation=config.activation,
            layer_norm_eps=config.layer_norm_eps,
            batch_first=True,
            norm_first=config.norm_first,
        )
    if not config.norm_first:
        theirs.encoder.norm = theirs.decoder.norm = None
    _copy(_transformer_pairs(ours, theirs), into_ours=False)
    return theirs


def load_torch_transformer(ours, theirs: nn.Transformer):
    """Copy a ``torch.nn.Transformer``'s encoder and decoder stacks into our
    EncoderDecoder (same sizes)."""
    _copy(_transformer_pairs(ours, theirs), into_ours=True)
    return ours
