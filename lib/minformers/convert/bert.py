"""Our BERT's configs and weights, to and from HF's BERT, ALBERT and ELECTRA."""

import torch

from minformers.bert import BertConfig
from minformers.convert import key_pattern

# Our config fields -> transformers.BertConfig's, and our activations -> HF's (their
# "gelu" is the exact erf form).
_HF_NAMES = {
    "vocab_size": "vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_len": "max_position_embeddings",
    "n_segments": "type_vocab_size", "dropout": "hidden_dropout_prob", "layer_norm_eps": "layer_norm_eps",
    "pad_id": "pad_token_id", "activation": "hidden_act",
}  # fmt: skip
_HF_ACTIVATIONS = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu"}


def hf_albert_config(config: BertConfig):
    """The same sizes as a ``transformers.AlbertConfig`` (an ALBERT-style config:
    embedding_size set); the rest keeps ALBERT's defaults."""
    import transformers  # only here: importing transformers takes seconds

    if config.embedding_size is None:
        raise ValueError(
            "hf_albert_config needs embedding_size (ALBERT's factorized embedding)"
        )
    sizes = ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len")
    return transformers.AlbertConfig(
        embedding_size=config.embedding_size,
        type_vocab_size=config.n_segments,
        **{_HF_NAMES[name]: getattr(config, name) for name in sizes},
    )


def hf_electra_config(config: BertConfig):
    """The same sizes as a ``transformers.ElectraConfig``, for a discriminator or a
    generator (whose embedding_size is the discriminator's width)."""
    import transformers  # only here: importing transformers takes seconds

    if config.share_layers:
        raise ValueError("ELECTRA does not share layers")
    return transformers.ElectraConfig(
        embedding_size=config.embedding_width, **_hf_fields(config)
    )


def bert_config_from_hf(hf_config) -> BertConfig:
    """From a ``transformers.BertConfig`` or a dict such as a checkpoint's
    config.json (absent keys: defaults)."""
    hf = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    if hf.get("hidden_dropout_prob", 0.1) != hf.get(
        "attention_probs_dropout_prob", 0.1
    ):
        raise ValueError(
            "hidden_dropout_prob and attention_probs_dropout_prob must be equal: "
            "we have one dropout"
        )
    if hf.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(
            "position_embedding_type must be 'absolute', got "
            f"{hf['position_embedding_type']!r}"
        )
    fields = {
        ours: hf[theirs]
        for ours, theirs in _HF_NAMES.items()
        if hf.get(theirs) is not None
    }
    activations = {theirs: ours for ours, theirs in _HF_ACTIVATIONS.items()} | {
        "gelu_new": "gelu_tanh"
    }
    if fields.get("activation", "gelu") not in activations:
        raise ValueError(
            f"hidden_act must be one of {sorted(activations)}, got "
            f"{fields['activation']!r}"
        )
    return BertConfig(
        **{**fields, "activation": activations[fields.get("activation", "gelu")]}
    )


def hf_bert_config(config: BertConfig):
    """The same sizes as a ``transformers.BertConfig``."""
    import transformers  # only here: importing transformers takes seconds

    if config.embedding_size is not None or config.share_layers:
        raise ValueError(
            "an ALBERT-style config (embedding_size, share_layers) has no "
            "transformers.BertConfig"
        )
    return transformers.BertConfig(**_hf_fields(config))


def _hf_fields(config: BertConfig) -> dict:
    """Every field of ``config`` under HF's BERT and ELECTRA names."""
    fields = {theirs: getattr(config, ours) for ours, theirs in _HF_NAMES.items()}
    fields["hidden_act"] = _HF_ACTIVATIONS[config.activation]
    return fields | {"attention_probs_dropout_prob": config.dropout}


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
_BERT_KEY_PATTERNS = [(key_pattern(ours), theirs) for ours, theirs in BERT_KEYS]


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
    dict of HF's class of the same name, loadable with
    ``load_state_dict(..., strict=True)``. Like ``state_dict()``, the tensors share our
    storage."""
    state = {_hf_bert_key(key): value for key, value in ours.state_dict().items()}
    # HF's MLM head holds its bias under two names
    if "cls.predictions.decoder.bias" in state:
        state["cls.predictions.bias"] = state["cls.predictions.decoder.bias"]
    return state


# ELECTRA: HF's ElectraModel is BERT's encoder under "electra.", without a pooler,
# with the factorized embedding's Linear as "embeddings_project".
# Each model names its own heads.
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
