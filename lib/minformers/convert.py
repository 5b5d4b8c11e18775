"""Copying weights from PyTorch's and Hugging Face's modules into ours, so outputs can be compared exactly.

    >>> theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> ours = load_torch_multihead_attention(MultiHeadAttention(8, 2), theirs)
"""

import re

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


# BERT <-> Hugging Face: one table, our module path -> HF's, with "{i}" for a layer index; each tensor (weight, bias)
# follows its module. Both directions name every tensor of ours through it. Both sides write the body without the
# "bert." prefix that BertForPreTraining and BertForSequenceClassification add on both sides.
BERT_KEYS = (
    ("embeddings.token_embedding", "embeddings.word_embeddings"),
    ("embeddings.segment_embedding", "embeddings.token_type_embeddings"),
    ("embeddings.position_embedding.embedding", "embeddings.position_embeddings"),
    ("embeddings.norm", "embeddings.LayerNorm"),
    ("layers.{i}.attention.q_proj", "encoder.layer.{i}.attention.self.query"),
    ("layers.{i}.attention.k_proj", "encoder.layer.{i}.attention.self.key"),
    ("layers.{i}.attention.v_proj", "encoder.layer.{i}.attention.self.value"),
    ("layers.{i}.attention.out_proj", "encoder.layer.{i}.attention.output.dense"),
    ("layers.{i}.attention_norm", "encoder.layer.{i}.attention.output.LayerNorm"),
    ("layers.{i}.feed_forward.up_proj", "encoder.layer.{i}.intermediate.dense"),
    ("layers.{i}.feed_forward.down_proj", "encoder.layer.{i}.output.dense"),
    ("layers.{i}.feed_forward_norm", "encoder.layer.{i}.output.LayerNorm"),
    ("pooler", "pooler.dense"),
    ("mlm_head.dense", "cls.predictions.transform.dense"),
    ("mlm_head.norm", "cls.predictions.transform.LayerNorm"),
    ("mlm_head.decoder", "cls.predictions.decoder"),
    ("nsp_head", "cls.seq_relationship"),
    ("classifier", "classifier"),
)
# HF checkpoints hold tied tensors under two names; a saved file may keep only one of them (the second here).
BERT_HF_TIED = (
    ("cls.predictions.decoder.weight", "embeddings.word_embeddings.weight"),
    ("cls.predictions.decoder.bias", "cls.predictions.bias"),
)
# Buffers of HF's embeddings (0..T-1 and zeros): functions of the config, not weights.
BERT_HF_IGNORED = ("embeddings.position_ids", "embeddings.token_type_ids")


def _key_pattern(template: str) -> re.Pattern:
    """"layers.{i}.attention_norm" -> a regex matching "layers.3.attention_norm.weight", capturing 3 and ".weight"."""
    return re.compile(r"(\d+)".join(map(re.escape, template.split("{i}"))) + r"(\..+)$")


_BERT_KEY_PATTERNS = [(_key_pattern(ours), theirs) for ours, theirs in BERT_KEYS]


def _hf_bert_key(key: str) -> str:
    """HF's name for one of our state-dict keys: "bert.layers.3.attention_norm.weight" ->
    "bert.encoder.layer.3.attention.output.LayerNorm.weight"."""
    body = key.startswith("bert.")
    for pattern, theirs in _BERT_KEY_PATTERNS:
        match = pattern.match(key.removeprefix("bert."))
        if match:
            *layer, rest = match.groups()
            return ("bert." if body else "") + theirs.format(i=layer[0] if layer else None) + rest
    raise KeyError(f"BERT_KEYS has no HF name for {key!r}")


@torch.no_grad()
def load_hf_bert(ours, hf_state_dict: dict, strict: bool = True):
    """Copy a HF BertModel / BertForPreTraining / BertForSequenceClassification state dict into our model of the same
    kind, and return ours. HF keys may carry the "bert." prefix or not. ``strict=False`` skips missing and unexpected
    keys (e.g. MiniLM, a bare BertModel, into our BertForPreTraining, whose heads then stay as initialised).

    >>> from minformers.bert import BertConfig, BertModel
    >>> model = BertModel(BertConfig.tiny(vocab_size=50))
    >>> copy = load_hf_bert(BertModel(model.config), hf_bert_state_dict(model))
    >>> torch.equal(copy.pooler.weight, model.pooler.weight)
    True
    >>> load_hf_bert(model, {"pooler.dense.weight": model.pooler.weight})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: the HF state dict does not fit BertModel: missing ['embeddings.LayerNorm.bias', ...]; unexpected []
    """
    theirs = {key.removeprefix("bert."): value for key, value in hf_state_dict.items()}
    theirs = {key: value for key, value in theirs.items() if key not in BERT_HF_IGNORED}
    wanted = {key: _hf_bert_key(key).removeprefix("bert.") for key in ours.state_dict()}  # ours -> HF
    tied_aliases = set()
    for name, alias in BERT_HF_TIED:
        if name not in wanted.values():
            continue
        if name in theirs and alias in theirs and not torch.equal(theirs[name], theirs[alias]):
            raise ValueError(f"{name} and {alias} differ, but our model ties them")
        tied_aliases.add(alias)
        if alias in theirs:
            theirs.setdefault(name, theirs[alias])
    missing = sorted(hf_key for hf_key in wanted.values() if hf_key not in theirs)
    unexpected = sorted(set(theirs) - set(wanted.values()) - tied_aliases)
    if strict and (missing or unexpected):
        raise ValueError(
            f"the HF state dict does not fit {type(ours).__name__}: missing {missing}; unexpected {unexpected}"
        )
    state = {key: theirs[hf_key] for key, hf_key in wanted.items() if hf_key in theirs}
    own = ours.state_dict()
    for key, value in state.items():
        if value.shape != own[key].shape:
            raise ValueError(f"{wanted[key]} has shape {tuple(value.shape)}, but our {key} has {tuple(own[key].shape)}")
    ours.load_state_dict(state, strict=False)  # the checks above are stricter and name HF's keys
    return ours


def hf_bert_state_dict(ours) -> dict:
    """Our BertModel / BertForPreTraining / BertForSequenceClassification as the state dict of HF's class of the same
    name, loadable with ``load_state_dict(..., strict=True)``. Like ``state_dict()``, the tensors share our storage."""
    state = {_hf_bert_key(key): value for key, value in ours.state_dict().items()}
    if "cls.predictions.decoder.bias" in state:  # HF's MLM head holds its bias under two names
        state["cls.predictions.bias"] = state["cls.predictions.decoder.bias"]
    return state


# GPT-2: HF keeps GPT-2's original Conv1D layers, whose weights are stored (in, out), the transpose of nn.Linear's,
# and one c_attn matrix holding q, k and v side by side.
def hf_gpt2_state_dict(ours) -> dict:
    """Our pre-LN ``GPT`` as the state dict of HF's ``GPT2LMHeadModel`` (lm_head tied to wte, as HF ties it).

    >>> from minformers.gpt import GPT, GPTConfig
    >>> model = GPT(GPTConfig.tiny(vocab_size=50))
    >>> copy = load_hf_gpt2(GPT(model.config), hf_gpt2_state_dict(model))
    >>> torch.equal(copy.layers[0].attention.k_proj.weight, model.layers[0].attention.k_proj.weight)
    True
    """
    if ours.final_norm is None:
        raise ValueError("HF's GPT2 is pre-LN with a final LayerNorm; a post-LN GPT (GPT-1 style) has no equivalent")
    state = {"transformer.wte.weight": ours.token_embedding.weight,
             "transformer.wpe.weight": ours.position_embedding.embedding.weight,
             "transformer.ln_f.weight": ours.final_norm.weight, "transformer.ln_f.bias": ours.final_norm.bias,
             "lm_head.weight": ours.token_embedding.weight}
    for index, layer in enumerate(ours.layers):
        attention, feed_forward, prefix = layer.attention, layer.feed_forward, f"transformer.h.{index}."
        projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        state |= {
            prefix + "ln_1.weight": layer.attention_norm.weight, prefix + "ln_1.bias": layer.attention_norm.bias,
            prefix + "attn.c_attn.weight": torch.cat([p.weight for p in projections]).T,  # (C, 3C)
            prefix + "attn.c_attn.bias": torch.cat([p.bias for p in projections]),
            prefix + "attn.c_proj.weight": attention.out_proj.weight.T,
            prefix + "attn.c_proj.bias": attention.out_proj.bias,
            prefix + "ln_2.weight": layer.feed_forward_norm.weight, prefix + "ln_2.bias": layer.feed_forward_norm.bias,
            prefix + "mlp.c_fc.weight": feed_forward.up_proj.weight.T,
            prefix + "mlp.c_fc.bias": feed_forward.up_proj.bias,
            prefix + "mlp.c_proj.weight": feed_forward.down_proj.weight.T,
            prefix + "mlp.c_proj.bias": feed_forward.down_proj.bias,
        }  # fmt: skip
    return {key: value.detach().clone() for key, value in state.items()}


@torch.no_grad()
def load_hf_gpt2(ours, hf_state_dict: dict):
    """Copy a HF ``GPT2LMHeadModel`` (or ``GPT2Model``: keys without "transformer.") state dict into our ``GPT``."""
    theirs = {key if key.startswith(("transformer.", "lm_head.")) else f"transformer.{key}": value
              for key, value in hf_state_dict.items() if not key.endswith((".attn.bias", ".attn.masked_bias"))}
    expected = hf_gpt2_state_dict(ours)  # the same keys and shapes, in HF's layout
    if "lm_head.weight" in theirs and not torch.equal(theirs["lm_head.weight"], theirs["transformer.wte.weight"]):
        raise ValueError("lm_head.weight differs from transformer.wte.weight, but our GPT ties them")
    theirs.setdefault("lm_head.weight", theirs.get("transformer.wte.weight"))
    missing, unexpected = sorted(set(expected) - set(theirs)), sorted(set(theirs) - set(expected))
    if missing or unexpected:
        raise ValueError(f"the HF state dict does not fit this GPT: missing {missing[:5]}; unexpected {unexpected[:5]}")
    for key, value in expected.items():
        if theirs[key].shape != value.shape:
            raise ValueError(f"{key} has shape {tuple(theirs[key].shape)}, expected {tuple(value.shape)}")
    d_model = ours.config.d_model
    ours.token_embedding.weight.copy_(theirs["transformer.wte.weight"])
    ours.position_embedding.embedding.weight.copy_(theirs["transformer.wpe.weight"])
    ours.final_norm.weight.copy_(theirs["transformer.ln_f.weight"])
    ours.final_norm.bias.copy_(theirs["transformer.ln_f.bias"])
    for index, layer in enumerate(ours.layers):
        attention, feed_forward, prefix = layer.attention, layer.feed_forward, f"transformer.h.{index}."
        qkv_weight = theirs[prefix + "attn.c_attn.weight"].T.split(d_model)  # (3C, C) -> three (C, C)
        qkv_bias = theirs[prefix + "attn.c_attn.bias"].split(d_model)
        for projection, weight, bias in zip((attention.q_proj, attention.k_proj, attention.v_proj), qkv_weight,
                                            qkv_bias, strict=True):
            projection.weight.copy_(weight)
            projection.bias.copy_(bias)
        pairs = [(attention.out_proj, "attn.c_proj"), (feed_forward.up_proj, "mlp.c_fc"),
                 (feed_forward.down_proj, "mlp.c_proj")]
        for linear, name in pairs:
            linear.weight.copy_(theirs[f"{prefix}{name}.weight"].T)  # Conv1D (in, out) -> Linear (out, in)
            linear.bias.copy_(theirs[f"{prefix}{name}.bias"])
        for norm, name in [(layer.attention_norm, "ln_1"), (layer.feed_forward_norm, "ln_2")]:
            norm.weight.copy_(theirs[f"{prefix}{name}.weight"])
            norm.bias.copy_(theirs[f"{prefix}{name}.bias"])
    return ours
