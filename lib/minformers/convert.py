"""Copying weights from PyTorch's and Hugging Face's modules into ours, so outputs can
be compared exactly.

>>> theirs = torch.nn.MultiheadAttention(8, 2, batch_first=True)
>>> ours = load_torch_multihead_attention(MultiHeadAttention(8, 2), theirs)
"""

import re
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


# BERT <-> Hugging Face: one table, our module path -> HF's, with "{i}" for a layer
# index; each tensor (weight, bias) follows its module. Both directions name every
# tensor of ours through it. Both sides write the body without the "bert." prefix that
# BertForPreTraining and BertForSequenceClassification add on both sides.
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
# HF checkpoints hold tied tensors under two names; a saved file may keep only one of
# them (the second here).
BERT_HF_TIED = (
    ("cls.predictions.decoder.weight", "embeddings.word_embeddings.weight"),
    ("cls.predictions.decoder.bias", "cls.predictions.bias"),
)
# Buffers of HF's embeddings (0..T-1 and zeros): functions of the config, not weights.
BERT_HF_IGNORED = ("embeddings.position_ids", "embeddings.token_type_ids")


def _key_pattern(template: str) -> re.Pattern:
    """ "layers.{i}.attention_norm" -> a regex matching
    "layers.3.attention_norm.weight", capturing 3 and ".weight"."""
    return re.compile(r"(\d+)".join(map(re.escape, template.split("{i}"))) + r"(\..+)$")


_BERT_KEY_PATTERNS = [(_key_pattern(ours), theirs) for ours, theirs in BERT_KEYS]


def _hf_bert_key(key: str) -> str:
    """HF's name for one of our state-dict keys: "bert.layers.3.attention_norm.weight"
    -> "bert.encoder.layer.3.attention.output.LayerNorm.weight"."""
    body = key.startswith("bert.")
    for pattern, theirs in _BERT_KEY_PATTERNS:
        match = pattern.match(key.removeprefix("bert."))
        if match:
            *layer, rest = match.groups()
            return (
                ("bert." if body else "")
                + theirs.format(i=layer[0] if layer else None)
                + rest
            )
    raise KeyError(f"BERT_KEYS has no HF name for {key!r}")


@torch.no_grad()
def load_hf_bert(ours, hf_state_dict: dict, strict: bool = True):
    """Copy a HF BertModel / BertForPreTraining / BertForSequenceClassification state
    dict into our model of the same kind, and return ours. HF keys may carry the "bert."
    prefix or not. ``strict=False`` skips missing and unexpected keys (e.g. MiniLM, a
    bare BertModel, into our BertForPreTraining, whose heads then stay as initialised).

    >>> from minformers.bert import BertConfig, BertModel
    >>> model = BertModel(BertConfig.tiny(vocab_size=50))
    >>> copy = load_hf_bert(BertModel(model.config), hf_bert_state_dict(model))
    >>> torch.equal(copy.pooler.weight, model.pooler.weight)
    True
    >>> load_hf_bert(model, {"pooler.dense.weight": model.pooler.weight})
    Traceback (most recent call last):
    ValueError: the HF state dict does not fit BertModel: missing ['embeddings.LayerNorm.bias', ...]; unexpected []
    """
    theirs = {key.removeprefix("bert."): value for key, value in hf_state_dict.items()}
    theirs = {key: value for key, value in theirs.items() if key not in BERT_HF_IGNORED}
    # ours -> HF
    wanted = {key: _hf_bert_key(key).removeprefix("bert.") for key in ours.state_dict()}
    tied_aliases = set()
    for name, alias in BERT_HF_TIED:
        if name not in wanted.values():
            continue
        if (
            name in theirs
            and alias in theirs
            and not torch.equal(theirs[name], theirs[alias])
        ):
            raise ValueError(f"{name} and {alias} differ, but our model ties them")
        tied_aliases.add(alias)
        if alias in theirs:
            theirs.setdefault(name, theirs[alias])
    missing = sorted(hf_key for hf_key in wanted.values() if hf_key not in theirs)
    unexpected = sorted(set(theirs) - set(wanted.values()) - tied_aliases)
    if strict and (missing or unexpected):
        raise ValueError(
            f"the HF state dict does not fit {type(ours).__name__}: missing {missing}; "
            f"unexpected {unexpected}"
        )
    state = {key: theirs[hf_key] for key, hf_key in wanted.items() if hf_key in theirs}
    own = ours.state_dict()
    for key, value in state.items():
        if value.shape != own[key].shape:
            raise ValueError(
                f"{wanted[key]} has shape {tuple(value.shape)}, but our {key} has "
                f"{tuple(own[key].shape)}"
            )
    # the checks above are stricter and name HF's keys
    ours.load_state_dict(state, strict=False)
    return ours


def hf_bert_state_dict(ours) -> dict:
    """Our BertModel / BertForPreTraining / BertForSequenceClassification as the state
    dict of HF's class of the same name, loadable with ``load_state_dict(...,
    strict=True)``. Like ``state_dict()``, the tensors share our storage."""
    state = {_hf_bert_key(key): value for key, value in ours.state_dict().items()}
    # HF's MLM head holds its bias under two names
    if "cls.predictions.decoder.bias" in state:
        state["cls.predictions.bias"] = state["cls.predictions.decoder.bias"]
    return state


# ELECTRA: HF's ElectraModel is BERT's encoder under "electra.", without a pooler, with
# the factorized embedding's Linear as "embeddings_project"; the heads are named per
# model.
ELECTRA_HEADS = {
    "discriminator": (
        ("dense", "discriminator_predictions.dense"),
        ("prediction", "discriminator_predictions.dense_prediction"),
    ),
    "generator": (
        ("mlm_head.dense", "generator_predictions.dense"),
        ("mlm_head.norm", "generator_predictions.LayerNorm"),
        ("mlm_head.decoder", "generator_lm_head"),
    ),
}


def hf_electra_state_dict(ours, part: str) -> dict:
    """An ``electra.Electra``'s ``part`` ("discriminator" or "generator") as the state
    dict of HF's ``ElectraForPreTraining`` or ``ElectraForMaskedLM``, loadable with
    ``strict=True``. The generator's embeddings are the discriminator's (shared), so
    both dicts hold the same embedding tensors."""
    if part not in ELECTRA_HEADS:
        raise ValueError(f"part must be one of {sorted(ELECTRA_HEADS)}, got {part!r}")
    model = getattr(ours, part)
    state = {}
    for key, value in model.bert.state_dict().items():
        if key.startswith("pooler."):
            continue  # ELECTRA has no pooler: its heads read every token
        name = (
            key.replace("embeddings.projection", "embeddings_project")
            if "projection" in key
            else _hf_bert_key(key)
        )
        state[f"electra.{name}"] = value
    for mine, theirs in ELECTRA_HEADS[part]:
        for tensor in ("weight", "bias"):
            state[f"{theirs}.{tensor}"] = model.get_submodule(mine).get_parameter(
                tensor
            )
    return {key: value.detach() for key, value in state.items()}


# GPT-2 <-> Hugging Face GPT2LMHeadModel, in the same form as BERT_KEYS: our module
# path -> HF's. HF keeps GPT-2's original Conv1D layers, whose weights are stored
# (in, out), the transpose of nn.Linear's (GPT2_CONV1D), and one c_attn matrix holding
# q, k and v side by side, which neither table names: ``_GPT2_QKV`` handles it.
GPT2_KEYS = (
    ("token_embedding", "transformer.wte"),
    ("position_embedding.embedding", "transformer.wpe"),
    ("layers.{i}.attention_norm", "transformer.h.{i}.ln_1"),
    ("layers.{i}.attention.out_proj", "transformer.h.{i}.attn.c_proj"),
    ("layers.{i}.feed_forward_norm", "transformer.h.{i}.ln_2"),
    ("layers.{i}.feed_forward.up_proj", "transformer.h.{i}.mlp.c_fc"),
    ("layers.{i}.feed_forward.down_proj", "transformer.h.{i}.mlp.c_proj"),
    ("final_norm", "transformer.ln_f"),
)
GPT2_CONV1D = (
    "attn.c_attn.weight",
    "attn.c_proj.weight",
    "mlp.c_fc.weight",
    "mlp.c_proj.weight",
)
_GPT2_KEY_PATTERNS = [(_key_pattern(ours), theirs) for ours, theirs in GPT2_KEYS]
_GPT2_QKV = re.compile(r"layers\.(\d+)\.attention\.([qkv])_proj\.(weight|bias)$")


def _hf_gpt2_key(key: str) -> str:
    """HF's name for one of our GPT's keys, other than q, k and v:
    "layers.3.attention_norm.weight" -> "transformer.h.3.ln_1.weight"."""
    for pattern, theirs in _GPT2_KEY_PATTERNS:
        match = pattern.match(key)
        if match:
            *layer, rest = match.groups()
            return theirs.format(i=layer[0] if layer else None) + rest
    raise KeyError(f"GPT2_KEYS has no HF name for {key!r}")


def _conv1d(hf_key: str, value: torch.Tensor) -> torch.Tensor:
    """Conv1D's (in, out) layout from nn.Linear's (out, in), or back: a transpose."""
    return value.T if hf_key.endswith(GPT2_CONV1D) else value


def hf_gpt2_state_dict(ours) -> dict:
    """Our pre-LN ``GPT`` as the state dict of HF's ``GPT2LMHeadModel`` (lm_head tied to
    wte, as HF ties it).

    >>> from minformers.gpt import GPT, GPTConfig
    >>> model = GPT(GPTConfig.tiny(vocab_size=50))
    >>> copy = load_hf_gpt2(GPT(model.config), hf_gpt2_state_dict(model))
    >>> torch.equal(
    ...     copy.layers[0].attention.k_proj.weight,
    ...     model.layers[0].attention.k_proj.weight,
    ... )
    True
    """
    if ours.final_norm is None:
        raise ValueError(
            "HF's GPT2 is pre-LN with a final LayerNorm; a post-LN GPT (GPT-1 style) "
            "has no equivalent"
        )
    own = ours.state_dict()
    state = {}
    for key, value in own.items():
        if not _GPT2_QKV.match(key):
            hf_key = _hf_gpt2_key(key)
            state[hf_key] = _conv1d(hf_key, value)
    for index in range(len(ours.layers)):
        prefix = f"layers.{index}.attention."
        for part in ("weight", "bias"):
            qkv = torch.cat(
                [own[f"{prefix}{p}_proj.{part}"] for p in "qkv"]
            )  # (3C, ...)
            hf_key = f"transformer.h.{index}.attn.c_attn.{part}"
            state[hf_key] = _conv1d(hf_key, qkv)
    state["lm_head.weight"] = state["transformer.wte.weight"]
    return {key: value.detach().clone() for key, value in state.items()}


@torch.no_grad()
def load_hf_gpt2(ours, hf_state_dict: dict):
    """Copy a HF ``GPT2LMHeadModel`` (or ``GPT2Model``: keys without "transformer.")
    state dict into our ``GPT``."""
    theirs = {
        key
        if key.startswith(("transformer.", "lm_head."))
        else f"transformer.{key}": value
        for key, value in hf_state_dict.items()
        if not key.endswith((".attn.bias", ".attn.masked_bias"))
    }
    expected = hf_gpt2_state_dict(ours)  # the same keys and shapes, in HF's layout
    if "lm_head.weight" in theirs and not torch.equal(
        theirs["lm_head.weight"], theirs["transformer.wte.weight"]
    ):
        raise ValueError(
            "lm_head.weight differs from transformer.wte.weight, but our GPT ties them"
        )
    theirs.setdefault("lm_head.weight", theirs.get("transformer.wte.weight"))
    missing, unexpected = (
        sorted(set(expected) - set(theirs)),
        sorted(set(theirs) - set(expected)),
    )
    if missing or unexpected:
        raise ValueError(
            f"the HF state dict does not fit this GPT: missing {missing[:5]}; "
            f"unexpected {unexpected[:5]}"
        )
    for key, value in expected.items():
        if theirs[key].shape != value.shape:
            raise ValueError(
                f"{key} has shape {tuple(theirs[key].shape)}, expected "
                f"{tuple(value.shape)}"
            )
    state = {}
    for key in ours.state_dict():
        qkv = _GPT2_QKV.match(key)
        if qkv:
            index, part, kind = qkv.groups()
            hf_key = f"transformer.h.{index}.attn.c_attn.{kind}"
            # (3C, ...) -> q, k, v
            q, k, v = _conv1d(hf_key, theirs[hf_key]).split(ours.config.d_model)
            state[key] = {"q": q, "k": k, "v": v}[part]
        else:
            hf_key = _hf_gpt2_key(key)
            state[key] = _conv1d(hf_key, theirs[hf_key])
    ours.load_state_dict(state)
    return ours


# Llama <-> Hugging Face LlamaForCausalLM, in the same form as BERT_KEYS: our module
# path -> HF's.
LLAMA_KEYS = (
    ("token_embedding", "model.embed_tokens"),
    ("layers.{i}.attention_norm", "model.layers.{i}.input_layernorm"),
    ("layers.{i}.attention.q_proj", "model.layers.{i}.self_attn.q_proj"),
    ("layers.{i}.attention.k_proj", "model.layers.{i}.self_attn.k_proj"),
    ("layers.{i}.attention.v_proj", "model.layers.{i}.self_attn.v_proj"),
    ("layers.{i}.attention.out_proj", "model.layers.{i}.self_attn.o_proj"),
    ("layers.{i}.feed_forward_norm", "model.layers.{i}.post_attention_layernorm"),
    ("layers.{i}.feed_forward.gate_proj", "model.layers.{i}.mlp.gate_proj"),
    ("layers.{i}.feed_forward.up_proj", "model.layers.{i}.mlp.up_proj"),
    ("layers.{i}.feed_forward.down_proj", "model.layers.{i}.mlp.down_proj"),
    ("norm", "model.norm"),
    ("lm_head", "lm_head"),
)
_LLAMA_KEY_PATTERNS = [(_key_pattern(ours), theirs) for ours, theirs in LLAMA_KEYS]


def _hf_llama_key(key: str) -> str:
    """ "layers.3.attention.out_proj.weight" ->
    "model.layers.3.self_attn.o_proj.weight"."""
    for pattern, theirs in _LLAMA_KEY_PATTERNS:
        match = pattern.match(key)
        if match:
            *layer, rest = match.groups()
            return theirs.format(i=layer[0] if layer else None) + rest
    raise KeyError(f"LLAMA_KEYS has no HF name for {key!r}")


@torch.no_grad()
def load_hf_llama(ours, hf_state_dict: dict):
    """Copy the state dict of a HF ``LlamaForCausalLM`` into our ``LlamaForCausalLM`` of
    the same sizes; return ours.

    With tied embeddings the file may omit "lm_head.weight" (HF saves tied tensors
    once); if it is there, it must equal the embedding. RoPE frequencies that old
    checkpoints stored ("rotary_emb.inv_freq") are skipped: we compute them.

    >>> from minformers.llama import LlamaConfig, LlamaForCausalLM
    >>> model = LlamaForCausalLM(LlamaConfig.tiny(vocab_size=50))
    >>> copy = load_hf_llama(LlamaForCausalLM(model.config), hf_llama_state_dict(model))
    >>> torch.equal(
    ...     copy.layers[1].attention.k_proj.weight,
    ...     model.layers[1].attention.k_proj.weight,
    ... )
    True
    """
    theirs = {
        key: value
        for key, value in hf_state_dict.items()
        if not key.endswith("rotary_emb.inv_freq")
    }
    wanted = {key: _hf_llama_key(key) for key in ours.state_dict()}  # ours -> HF
    if ours.config.tie_embeddings:
        embedding = theirs.get("model.embed_tokens.weight")
        head = theirs.setdefault("lm_head.weight", embedding)
        if (
            head is not None
            and embedding is not None
            and not torch.equal(head, embedding)
        ):
            raise ValueError(
                "lm_head.weight and model.embed_tokens.weight differ, but our model "
                "ties them"
            )
    missing = sorted(key for key in wanted.values() if theirs.get(key) is None)
    unexpected = sorted(set(theirs) - set(wanted.values()))
    if missing or unexpected:
        raise ValueError(
            f"the HF state dict does not fit our Llama: missing {missing}; unexpected "
            f"{unexpected}"
        )
    own = ours.state_dict()
    # every shape first, so a refused dict leaves our model untouched
    for key, hf_key in wanted.items():
        if theirs[hf_key].shape != own[key].shape:
            shapes = f"{tuple(theirs[hf_key].shape)}, but our {key} has {tuple(own[key].shape)}"
            raise ValueError(f"{hf_key} has shape {shapes}")
    for key, hf_key in wanted.items():
        own[key].copy_(theirs[hf_key])  # in place, so a tied matrix stays one Parameter
    return ours


def hf_llama_state_dict(ours) -> dict:
    """Our ``LlamaForCausalLM`` as the state dict of HF's, loadable with
    ``load_state_dict(..., strict=True)``. Like ``state_dict()``, the tensors share our
    storage (and a tied head appears under both names, as in HF's)."""
    return {_hf_llama_key(key): value for key, value in ours.state_dict().items()}


# llama.cpp's GGUF files name a Llama's tensors the same way whatever model it is: our
# module path -> GGUF's.
GGUF_LLAMA_KEYS = (
    ("token_embedding", "token_embd"),
    ("layers.{i}.attention_norm", "blk.{i}.attn_norm"),
    ("layers.{i}.attention.q_proj", "blk.{i}.attn_q"),
    ("layers.{i}.attention.k_proj", "blk.{i}.attn_k"),
    ("layers.{i}.attention.v_proj", "blk.{i}.attn_v"),
    ("layers.{i}.attention.out_proj", "blk.{i}.attn_output"),
    ("layers.{i}.feed_forward_norm", "blk.{i}.ffn_norm"),
    ("layers.{i}.feed_forward.gate_proj", "blk.{i}.ffn_gate"),
    ("layers.{i}.feed_forward.up_proj", "blk.{i}.ffn_up"),
    ("layers.{i}.feed_forward.down_proj", "blk.{i}.ffn_down"),
    ("norm", "output_norm"),
    ("lm_head", "output"),
)
_GGUF_KEY_PATTERNS = [(_key_pattern(theirs), ours) for ours, theirs in GGUF_LLAMA_KEYS]


def _our_gguf_key(name: str) -> str | None:
    """ "blk.3.attn_output.weight" -> "layers.3.attention.out_proj.weight"; None for a
    name GGUF_LLAMA_KEYS lacks."""
    for pattern, ours in _GGUF_KEY_PATTERNS:
        match = pattern.match(name)
        if match:
            *layer, rest = match.groups()
            return ours.format(i=layer[0] if layer else None) + rest
    return None


def unpermute_gguf_rope_rows(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's reordering of a q_proj or k_proj weight (H * D, C), ``n_heads``
    heads of D rows each.

    llama.cpp's RoPE turns neighbouring channels (2i, 2i + 1) together, ours and HF's
    turn (i, i + D/2). So its converter interleaves the two halves of each head: GGUF
    row 2i + j of a head is our row j * D/2 + i. Undoing that gives the same attention
    scores, since q and k are reordered alike and a dot product ignores the channels'
    order.

    >>> unpermute_gguf_rope_rows(
    ...     torch.tensor([[0], [4], [1], [5], [2], [6], [3], [7]]), n_heads=1
    ... ).flatten()
    tensor([0, 1, 2, 3, 4, 5, 6, 7])
    """
    rows, C = weight.shape
    if rows % (2 * n_heads):
        raise ValueError(
            f"weight has {rows} rows, not n_heads={n_heads} heads of an even number of "
            "rows"
        )
    D = rows // n_heads
    # GGUF row 2i + j of head h -> [h, i, j]
    per_head = weight.reshape(n_heads, D // 2, 2, C)
    # (H, D/2, 2, C) -> (H, 2, D/2, C) -> (H * D, C): row j * D/2 + i
    return per_head.transpose(1, 2).reshape(rows, C)


def load_gguf_llama(path, reader=None):
    """A ``LlamaForCausalLM`` with the sizes and weights of a llama.cpp GGUF file of
    architecture "llama". Quantized tensors (Q4_1, Q8_0, ...) are dequantized to float32
    by the ``gguf`` package, so the model computes in float32 with the values the 4-bit
    file encodes. ``reader``: a ``gguf.GGUFReader`` already open on ``path``, so that a
    caller who also reads the tokenizer parses the file once (parsing its 49k-token
    vocabulary takes seconds)."""
    import gguf  # only here: reading GGUF files is optional
    import numpy as np

    from minformers.llama import LlamaConfig, LlamaForCausalLM

    reader = gguf.GGUFReader(str(path)) if reader is None else reader

    def field(key: str, default=None):
        return reader.fields[key].contents() if key in reader.fields else default

    architecture = field("general.architecture")
    if architecture != "llama":
        raise ValueError(f"{path} holds architecture {architecture!r}, not 'llama'")
    if field("llama.rope.scaling.type", "none") != "none":
        raise ValueError(
            f"{path} uses scaled RoPE ({field('llama.rope.scaling.type')!r}), which is "
            "not implemented"
        )
    tensors = {tensor.name: tensor for tensor in reader.tensors}
    vocab_size = field("llama.vocab_size") or len(
        reader.fields["tokenizer.ggml.tokens"].data
    )
    config = LlamaConfig(
        vocab_size=vocab_size,
        d_model=field("llama.embedding_length"),
        n_layers=field("llama.block_count"),
        n_heads=field("llama.attention.head_count"),
        n_kv_heads=field(
            "llama.attention.head_count_kv", field("llama.attention.head_count")
        ),
        d_ff=field("llama.feed_forward_length"),
        max_len=field("llama.context_length"),
        rope_theta=field("llama.rope.freq_base", 10000.0),
        # Stored as float32 (1e-5 reads back as 9.99999975e-06): keep the shortest
        # decimal that float32 rounds to it.
        rms_norm_eps=float(
            str(np.float32(field("llama.attention.layer_norm_rms_epsilon")))
        ),
        # no separate head: the embedding matrix serves both
        tie_embeddings="output.weight" not in tensors,
    )
    if field("llama.rope.dimension_count", config.head_dim) != config.head_dim:
        turned = field("llama.rope.dimension_count")
        raise ValueError(
            f"{path}: RoPE turns {turned} channels of each head, not all "
            f"D={config.head_dim}"
        )
    model = LlamaForCausalLM(config)
    state = {}
    for name, tensor in tensors.items():
        key = _our_gguf_key(name)
        if key is None:
            raise ValueError(f"{path} has a tensor {name!r} that our Llama does not")
        # GGUF lists dimensions fastest first ([C, V] for the embedding); dequantize
        # returns numpy's (V, C) order. float32 tensors come back as read-only views
        values = gguf.dequantize(tensor.data, tensor.tensor_type)
        weight = torch.from_numpy(
            np.require(values, np.float32, requirements=["C", "W"])
        )
        if key.endswith("attention.q_proj.weight"):
            weight = unpermute_gguf_rope_rows(weight, config.n_heads)
        elif key.endswith("attention.k_proj.weight"):
            weight = unpermute_gguf_rope_rows(weight, config.n_kv_heads)
        state[key] = weight
    if config.tie_embeddings:
        state["lm_head.weight"] = state["token_embedding.weight"]
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys:
        raise ValueError(f"{path} lacks tensors for {result.missing_keys}")
    return model
