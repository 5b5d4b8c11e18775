"""Our Llama's config and weights to and from Hugging Face's (LlamaConfig,
LlamaForCausalLM), and weights from llama.cpp's GGUF files."""

import torch

from minformers.convert import key_pattern
from minformers.llama import LlamaConfig

# Our config fields -> transformers.LlamaConfig's.
# Its rope_theta sits inside the rope_parameters dict.
_HF_NAMES = {
    "vocab_size": "vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "d_ff": "intermediate_size",
    "max_len": "max_position_embeddings", "rms_norm_eps": "rms_norm_eps", "tie_embeddings": "tie_word_embeddings",
}  # fmt: skip


def llama_config_from_hf(hf_config) -> LlamaConfig:
    """From a ``transformers.LlamaConfig`` or a dict such as a checkpoint's
    config.json (absent keys: defaults)."""
    hf = hf_config if isinstance(hf_config, dict) else hf_config.to_dict()
    # older config.json: rope_theta on top
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type != "default":
        raise ValueError(
            "rope_type must be 'default' (scaled RoPE is not implemented), got "
            f"{rope_type!r}"
        )
    for flag in ("attention_bias", "mlp_bias"):
        if hf.get(flag):
            raise ValueError(f"{flag} must be False: our Llama has no biases")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(
            f"hidden_act must be 'silu' (SwiGLU), got {hf['hidden_act']!r}"
        )
    fields = {
        ours: hf[theirs]
        for ours, theirs in _HF_NAMES.items()
        if hf.get(theirs) is not None
    }
    # HF's None means no grouping
    fields.setdefault("n_kv_heads", fields.get("n_heads", LlamaConfig.n_heads))
    theta = rope.get("rope_theta", hf.get("rope_theta"))
    config = LlamaConfig(
        **fields, **({} if theta is None else {"rope_theta": float(theta)})
    )
    if hf.get("head_dim") not in (None, config.head_dim):
        expected = f"hidden_size / num_attention_heads = {config.head_dim}"
        raise ValueError(f"head_dim must be {expected}, got {hf['head_dim']}")
    return config


def hf_llama_config(config: LlamaConfig):
    """The same sizes as a ``transformers.LlamaConfig``."""
    import transformers  # only here: importing transformers takes seconds

    values = {theirs: getattr(config, ours) for ours, theirs in _HF_NAMES.items()}
    rope = {"rope_type": "default", "rope_theta": config.rope_theta}
    return transformers.LlamaConfig(
        **values, rope_parameters=rope, head_dim=config.head_dim
    )


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
_LLAMA_KEY_PATTERNS = [(key_pattern(ours), theirs) for ours, theirs in LLAMA_KEYS]


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
_GGUF_KEY_PATTERNS = [(key_pattern(theirs), ours) for ours, theirs in GGUF_LLAMA_KEYS]


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

    >>> rows = torch.tensor([[0], [4], [1], [5], [2], [6], [3], [7]])
    >>> unpermute_gguf_rope_rows(rows, n_heads=1).flatten()
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


def load_gguf_llama(path, gguf_file=None):
    """A ``LlamaForCausalLM`` with the sizes and weights of a llama.cpp GGUF file of
    architecture "llama". Quantized tensors are dequantized to float32 (Q8_0 and Q4_1 by
    ``quantization.dequantize_gguf``, others by the ``gguf`` package), so the model
    computes in float32 with the values the 4-bit file encodes. ``gguf_file``: the file
    already read (``gguf_file.read_gguf``), for a caller who also reads the tokenizer
    from it."""
    import gguf  # only here: reading GGUF files is optional
    import numpy as np

    from minformers.convert.gguf_file import read_gguf
    from minformers.llama import LlamaConfig, LlamaForCausalLM
    from minformers.quantization import BLOCK_BYTES, dequantize_gguf

    gguf_file = read_gguf(path) if gguf_file is None else gguf_file

    def field(key: str, default=None):
        return gguf_file.metadata.get(key, default)

    architecture = field("general.architecture")
    if architecture != "llama":
        raise ValueError(f"{path} holds architecture {architecture!r}, not 'llama'")
    if field("llama.rope.scaling.type", "none") != "none":
        raise ValueError(
            f"{path} uses scaled RoPE ({field('llama.rope.scaling.type')!r}), which is "
            "not implemented"
        )
    tensors = gguf_file.tensors
    vocab_size = field("llama.vocab_size") or len(field("tokenizer.ggml.tokens"))
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
    # on the meta device: no random init to overwrite, every weight is in the file
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    state = {}
    for name, tensor in tensors.items():
        key = _our_gguf_key(name)
        if key is None:
            raise ValueError(f"{path} has a tensor {name!r} that our Llama does not")
        # GGUF lists dimensions fastest first ([C, V] for the embedding); dequantize
        # returns numpy's (V, C) order.
        if tensor.ggml_type in BLOCK_BYTES:  # ours: gguf's floats, bit for bit, faster
            weight = dequantize_gguf(tensor.data, tensor.ggml_type)
        else:
            # float32 tensors come back as read-only views, which np.require copies
            values = gguf.dequantize(
                tensor.data, gguf.GGMLQuantizationType(tensor.ggml_type)
            )
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
    result = model.load_state_dict(state, strict=False, assign=True)
    if result.missing_keys:
        raise ValueError(f"{path} lacks tensors for {result.missing_keys}")
    if config.tie_embeddings:  # assign gave each key its own Parameter: one again
        model.lm_head.weight = model.token_embedding.weight
    return model
