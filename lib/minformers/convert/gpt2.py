"""Our GPT's config and weights to and from Hugging Face's
GPT-2 (GPT2Config, GPT2LMHeadModel)."""

import re

import torch

from minformers.convert import key_pattern
from minformers.gpt import GPTConfig

# Our config fields -> transformers.GPT2Config's, and our activations -> HF's names.
_HF_NAMES = {
    "vocab_size": "vocab_size", "d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head", "d_ff": "n_inner",
    "max_len": "n_positions", "dropout": "resid_pdrop", "layer_norm_eps": "layer_norm_epsilon",
}  # fmt: skip
_HF_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def hf_gpt2_config(config: GPTConfig):
    """The same sizes as a ``transformers.GPT2Config`` (pre-LN only: HF's GPT-2 has
    no post-LN option)."""
    import transformers  # only here: importing transformers takes seconds

    if not config.norm_first:
        raise ValueError(
            "HF's GPT2 is pre-LN; a post-LN (GPT-1 style) config has no GPT2Config "
            "equivalent"
        )
    values = {theirs: getattr(config, ours) for ours, theirs in _HF_NAMES.items()}
    # GPT-2's <|endoftext|> is its last token (50256)
    end_of_text = config.vocab_size - 1
    return transformers.GPT2Config(
        **values,
        embd_pdrop=config.dropout,
        attn_pdrop=config.dropout,
        activation_function=_HF_ACTIVATIONS[config.activation],
        bos_token_id=end_of_text,
        eos_token_id=end_of_text,
    )


def gpt_config_from_hf(hf_config) -> GPTConfig:
    """From a ``transformers.GPT2Config`` whose three dropouts agree (we have one)."""
    hf = hf_config.to_dict()
    if not hf["resid_pdrop"] == hf["embd_pdrop"] == hf["attn_pdrop"]:
        raise ValueError(
            "resid_pdrop, embd_pdrop and attn_pdrop must be equal: we have one dropout"
        )
    fields = {
        ours: hf[theirs]
        for ours, theirs in _HF_NAMES.items()
        if hf.get(theirs) is not None
    }
    fields.setdefault("d_ff", 4 * hf["n_embd"])  # n_inner None means 4 x n_embd
    activations = {theirs: ours for ours, theirs in _HF_ACTIVATIONS.items()} | {
        "gelu_pytorch_tanh": "gelu_tanh"
    }
    if hf["activation_function"] not in activations:
        raise ValueError(f"activation_function must be one of {sorted(activations)}")
    return GPTConfig(**fields, activation=activations[hf["activation_function"]])


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
_GPT2_KEY_PATTERNS = [(key_pattern(ours), theirs) for ours, theirs in GPT2_KEYS]
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
