"""Llama: parity with HF's LlamaForCausalLM (tiny random configs, both directions of weight conversion, and
SmolLM2-135M's real 4-bit weights), cached decoding, RoPE's relative-position property, GQA against plain multi-head
attention, parameter counts, and the errors on bad configs and inputs."""

import dataclasses

import pytest
import torch
import transformers
from transformers.models.llama import modeling_llama

from minformers.attention import MultiHeadAttention
from minformers.convert.llama import (
    hf_llama_config,
    hf_llama_state_dict,
    llama_config_from_hf,
    load_gguf_llama,
    load_hf_llama,
    unpermute_gguf_rope_rows,
)
from minformers.kv_cache import KVCache
from minformers.llama import (
    GroupedQueryAttention,
    LlamaConfig,
    LlamaForCausalLM,
    RMSNorm,
    apply_rope,
    count_parameters,
    rope_cos_sin,
)
from minformers.masks import causal_mask
from minformers.support import data

torch.set_num_threads(1)

# HF's own tiny test sizes: batch 13, seq 7, hidden 32; d_ff 37 is odd on purpose, so swapped gate/up/down
# projections cannot go unnoticed, and 4 query heads share 2 key/value heads.
B, T = 13, 7
HF_TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=37,
    max_position_embeddings=64,
    attn_implementation="eager",
)
TINY = LlamaConfig(vocab_size=99, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=37, max_len=64)
ATOL = 1e-5


def randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights of std 0.2 and norm weights 1 +- 0.2: HF's init (std 0.02, norms exactly 1) gives near-zero logits and
    would hide a swapped or skipped RMSNorm."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = 0.2 * torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1 + noise if "norm" in name else noise)
    return model.eval()


def random_ids(b=B, t=T, seed=1):
    return torch.randint(0, 99, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("tied", [False, True])
def test_logits_match_hf_after_loading_their_weights(tied):
    hf_config = transformers.LlamaConfig(**HF_TINY, tie_word_embeddings=tied)
    config = llama_config_from_hf(hf_config)
    assert config == LlamaConfig(**{**TINY.__dict__, "tie_embeddings": tied})
    theirs = randomise(transformers.LlamaForCausalLM(hf_config), seed=0)
    ours = load_hf_llama(LlamaForCausalLM(config), theirs.state_dict()).eval()
    assert (ours.lm_head.weight is ours.token_embedding.weight) == tied
    ids = random_ids()
    with torch.no_grad():
        expected, actual = theirs(ids).logits, ours(ids)
    assert expected.abs().max() > 1  # the comparison below is not between two near-zero tensors
    assert (actual - expected).abs().max() < ATOL


@pytest.mark.parametrize("tied", [False, True])
def test_logits_match_hf_after_exporting_our_weights(tied):
    config = LlamaConfig(**{**TINY.__dict__, "tie_embeddings": tied})
    ours = randomise(LlamaForCausalLM(config), seed=2)
    theirs = transformers.LlamaForCausalLM(hf_llama_config(config)).eval()  # HF's default attention (sdpa) this time
    theirs.load_state_dict(hf_llama_state_dict(ours), strict=True)
    assert (theirs.lm_head.weight is theirs.model.embed_tokens.weight) == tied
    ids = random_ids(seed=3)
    with torch.no_grad():
        assert (ours(ids) - theirs(ids).logits).abs().max() < ATOL


def test_a_saved_checkpoint_without_the_tied_head_loads():
    hf_config = transformers.LlamaConfig(**HF_TINY, tie_word_embeddings=True)
    theirs = randomise(transformers.LlamaForCausalLM(hf_config), seed=4)
    saved = {key: value for key, value in theirs.state_dict().items() if key != "lm_head.weight"}  # as HF saves it
    saved["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(4)  # a buffer old checkpoints kept
    ours = load_hf_llama(LlamaForCausalLM(llama_config_from_hf(hf_config)), saved)
    assert torch.equal(ours.lm_head.weight, theirs.lm_head.weight)


def test_conversion_refuses_what_does_not_fit():
    theirs = transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF_TINY)).state_dict()
    with pytest.raises(ValueError, match=r"missing \['model.norm.weight'\]; unexpected \[\]"):
        load_hf_llama(LlamaForCausalLM(TINY), {k: v for k, v in theirs.items() if k != "model.norm.weight"})
    with pytest.raises(ValueError, match=r"missing \[\]; unexpected \['extra.weight'\]"):
        load_hf_llama(LlamaForCausalLM(TINY), {**theirs, "extra.weight": torch.zeros(1)})
    tied = LlamaForCausalLM(LlamaConfig(**{**TINY.__dict__, "tie_embeddings": True}))
    with pytest.raises(ValueError, match="lm_head.weight and model.embed_tokens.weight differ"):
        load_hf_llama(tied, theirs)  # an untied checkpoint into a tied model
    wider = LlamaForCausalLM(LlamaConfig(**{**TINY.__dict__, "d_ff": 38}))
    before = wider.layers[0].attention.q_proj.weight.clone()
    with pytest.raises(ValueError, match=r"model.layers.0.mlp.gate_proj.weight has shape \(37, 32\).*\(38, 32\)"):
        load_hf_llama(wider, theirs)
    assert torch.equal(wider.layers[0].attention.q_proj.weight, before)  # refused before anything was copied


def test_cached_decoding_equals_the_full_forward():
    torch.manual_seed(0)
    model = randomise(LlamaForCausalLM(TINY), seed=5)
    ids = random_ids(b=3, t=12, seed=6)
    cache = KVCache(TINY.n_layers)
    with torch.no_grad():
        full = model(ids)  # (B, T, V) in one pass
        steps = [model(ids[:, :5], cache)]  # the prompt, then one token at a time
        steps += [model(ids[:, t : t + 1], cache) for t in range(5, 12)]
    assert (torch.cat(steps, dim=1) - full).abs().max() < ATOL
    # The cache holds H_kv = 2 heads, not H = 4: GQA's saving. Its keys are stored after RoPE, at absolute positions.
    assert cache.keys[0].shape == (3, TINY.n_kv_heads, 12, TINY.head_dim) and cache.length == 12
    layer = model.layers[0]
    with torch.no_grad():
        x = layer.attention_norm(model.token_embedding(ids))
        k = layer.attention.k_proj(x).view(3, 12, TINY.n_kv_heads, TINY.head_dim).transpose(1, 2)
        _, k_turned = apply_rope(k, k, torch.arange(12), TINY.rope_theta)
    assert (cache.keys[0] - k_turned).abs().max() < ATOL


def test_rope_scores_depend_only_on_the_distance():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(p_query: int, p_key: int) -> float:
        q_turned, _ = apply_rope(q, q, torch.tensor([p_query]), theta=10000.0)
        _, k_turned = apply_rope(k, k, torch.tensor([p_key]), theta=10000.0)
        return float((q_turned * k_turned).sum())

    for distance in (0, 1, 5, 37):
        scores = [score(start + distance, start) for start in (0, 3, 100, 1000)]
        assert max(scores) - min(scores) < 1e-4, (distance, scores)
    assert abs(score(5, 0) - score(6, 0)) > 1e-2  # and the distance does change the score
    turned, _ = apply_rope(q, q, torch.tensor([123]), theta=10000.0)
    torch.testing.assert_close(turned.norm(), q.norm())  # a rotation: lengths are kept


def test_rope_matches_hf_rotary_embedding():
    hf_config = transformers.LlamaConfig(**HF_TINY, rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    positions = torch.arange(5, 12)  # an offset, as after a cached prompt
    cos, sin = modeling_llama.LlamaRotaryEmbedding(hf_config)(torch.zeros(1), positions[None])
    our_cos, our_sin = rope_cos_sin(positions, head_dim=8, theta=500.0)
    assert torch.equal(our_cos, cos[0]) and torch.equal(our_sin, sin[0])
    q, k = torch.randn(2, 4, 7, 8), torch.randn(2, 2, 7, 8)
    theirs = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    for mine, hers in zip(apply_rope(q, k, positions, 500.0), theirs, strict=True):
        assert torch.equal(mine, hers)


def llama_cpp_permute(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """What llama.cpp's converter does to q_proj and k_proj: each head's rows (i, i + D/2) become rows (2i, 2i + 1)."""
    rows, C = weight.shape
    return weight.reshape(n_heads, 2, rows // n_heads // 2, C).transpose(1, 2).reshape(rows, C)


def interleaved_rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Meta's and llama.cpp's RoPE: channels (2i, 2i + 1) form the complex number turned by p * theta^(-2i / D)."""
    D = x.shape[-1]
    angles = positions[:, None].double() * theta ** (-torch.arange(0, D, 2).double() / D)  # (T, D/2)
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2))  # (..., T, D/2) complex
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_gguf_rope_permutation_is_undone():
    torch.manual_seed(0)
    H, D, C = 3, 8, 12
    w_q, w_k, x = torch.randn(H * D, C), torch.randn(H * D, C), torch.randn(5, C)
    assert torch.equal(unpermute_gguf_rope_rows(llama_cpp_permute(w_q, H), H), w_q)
    positions = torch.arange(5)
    # Interleaved RoPE on llama.cpp's rows gives the scores our rotate-half RoPE gives on HF's rows.
    q_ours, k_ours = apply_rope((x @ w_q.T).view(5, H, D).transpose(0, 1), (x @ w_k.T).view(5, H, D).transpose(0, 1),
                                positions, theta=10000.0)  # (H, T, D)
    q_cpp = interleaved_rope((x @ llama_cpp_permute(w_q, H).T).view(5, H, D).transpose(0, 1), positions, 10000.0)
    k_cpp = interleaved_rope((x @ llama_cpp_permute(w_k, H).T).view(5, H, D).transpose(0, 1), positions, 10000.0)
    torch.testing.assert_close((q_cpp @ k_cpp.transpose(-1, -2)).float(), q_ours @ k_ours.transpose(-1, -2))
    with pytest.raises(ValueError, match="weight has 9 rows, not n_heads=3 heads of an even number of rows"):
        unpermute_gguf_rope_rows(torch.zeros(9, 2), n_heads=3)


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_grouped_query_attention_is_multi_head_attention_with_shared_keys_and_values(n_kv_heads):
    """At position 0 RoPE is the identity, so with all positions 0 GQA must equal plain causal multi-head attention
    whose key/value projections repeat each of the n_kv_heads heads for its G = H / H_kv consecutive query heads."""
    torch.manual_seed(0)
    config = LlamaConfig(**{**TINY.__dict__, "n_kv_heads": n_kv_heads})
    ours, plain = GroupedQueryAttention(config), MultiHeadAttention(32, 4, bias=False)
    G, D = 4 // n_kv_heads, config.head_dim
    with torch.no_grad():
        plain.q_proj.weight.copy_(ours.q_proj.weight)
        plain.out_proj.weight.copy_(ours.out_proj.weight)
        for theirs, mine in ((plain.k_proj, ours.k_proj), (plain.v_proj, ours.v_proj)):
            theirs.weight.copy_(mine.weight.view(n_kv_heads, D, 32).repeat_interleave(G, dim=0).view(32, 32))
        x = torch.randn(3, T, 32)
        expected = plain(x, mask=causal_mask(T))
        actual = ours(x, torch.zeros(T, dtype=torch.long), causal_mask(T))
    assert (actual - expected).abs().max() < 1e-6


def test_rms_norm_matches_torch_and_hf():
    torch.manual_seed(0)
    x, weight = 3 * torch.randn(4, 5, 16), torch.randn(16)
    ours, theirs = RMSNorm(16, eps=1e-5), modeling_llama.LlamaRMSNorm(16, eps=1e-5)
    with torch.no_grad():
        ours.weight.copy_(weight), theirs.weight.copy_(weight)
        torch.testing.assert_close(ours(x), torch.nn.functional.rms_norm(x, (16,), weight, eps=1e-5))
        assert torch.equal(ours(x), theirs(x))
    assert torch.equal(RMSNorm(3)(torch.zeros(1, 3)), torch.zeros(1, 3))  # eps keeps zeros finite


def test_smollm2_has_135_million_parameters_as_hf_counts_them():
    config = LlamaConfig.smollm2_135m()
    V, C, L, F, H, H_kv, D = 49152, 576, 30, 1536, 9, 3, 64
    attention = C * H * D + 2 * C * H_kv * D + H * D * C  # q, k, v, out: no biases; k and v have 3 heads, not 9
    layer = attention + 3 * C * F + 2 * C  # SwiGLU's three matrices, two RMSNorm weights
    assert V * C + L * layer + C == 134_515_008  # embedding (tied: the head adds nothing), layers, final norm
    assert count_parameters(config) == 134_515_008
    untied = LlamaConfig.smollm2_135m(tie_embeddings=False)
    assert count_parameters(untied) == 134_515_008 + V * C
    with torch.device("meta"):
        assert transformers.LlamaForCausalLM(hf_llama_config(config)).num_parameters() == 134_515_008
        assert transformers.LlamaForCausalLM(hf_llama_config(untied)).num_parameters() == 134_515_008 + V * C


def test_config_converts_to_and_from_hf():
    for config in (TINY, LlamaConfig(), LlamaConfig.smollm2_135m(), LlamaConfig.tiny(vocab_size=500)):
        assert llama_config_from_hf(hf_llama_config(config)) == config
        assert llama_config_from_hf(hf_llama_config(config).to_dict()) == config
    # A config.json as older transformers wrote it: rope_theta at the top level, rope_scaling null, no head count for
    # keys and values (= no grouping).
    old = {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500.0, "rope_scaling": None, "vocab_size": 10}
    expected = LlamaConfig(vocab_size=10, d_model=64, n_heads=4, n_kv_heads=4, rope_theta=500.0)
    assert llama_config_from_hf(old) == expected
    assert LlamaConfig.tiny(vocab_size=10).n_kv_heads == 2 and LlamaConfig.smollm2_135m(n_layers=2).n_layers == 2
    hf = hf_llama_config(TINY).to_dict()
    for changes, message in [
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}, "rope_type must be 'default'"),
        ({"attention_bias": True}, "attention_bias must be False"),
        ({"mlp_bias": True}, "mlp_bias must be False"),
        ({"hidden_act": "gelu"}, "hidden_act must be 'silu'"),
        ({"head_dim": 16}, "head_dim must be hidden_size / num_attention_heads = 8, got 16"),
    ]:
        with pytest.raises(ValueError, match=message):
            llama_config_from_hf({**hf, **changes})


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"d_model": 30}, ValueError, "d_model must be divisible by n_heads, got 30 and 4"),
        ({"n_kv_heads": 3}, ValueError, "n_heads must be divisible by n_kv_heads, got 4 and 3"),
        ({"d_model": 12}, ValueError, r"d_model / n_heads must be even \(RoPE turns pairs of channels\), got 3"),
        ({"vocab_size": 0}, ValueError, "vocab_size must be >= 1, got 0"),
        ({"n_layers": 2.0}, TypeError, "n_layers must be an int"),
        ({"rope_theta": 1.0}, ValueError, "rope_theta must be > 1, got 1.0"),
        ({"rms_norm_eps": 0.0}, ValueError, "rms_norm_eps must be > 0, got 0.0"),
    ],
)
def test_bad_config_fields_are_refused_by_name(changes, error, message):
    with pytest.raises(error, match=message):
        LlamaConfig(**{**TINY.__dict__, **changes})


def test_bad_and_too_long_inputs_are_refused():
    model = LlamaForCausalLM(TINY).eval()
    assert model(torch.zeros(1, 64, dtype=torch.long)).shape == (1, 64, 99)  # exactly max_len fits
    with pytest.raises(ValueError, match="input_ids has length 65, more than max_len=64"):
        model(torch.zeros(1, 65, dtype=torch.long))
    cache = KVCache(TINY.n_layers)
    model(torch.zeros(1, 60, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="length 5 after 60 cached tokens need 65 positions, more than max_len=64"):
        model(torch.zeros(1, 5, dtype=torch.long), cache)
    assert cache.length == 60  # the refused call left the cache as it was
    assert model(torch.zeros(1, 4, dtype=torch.long), cache).shape == (1, 4, 99)
    with pytest.raises(TypeError, match="input_ids must be an integer tensor, got torch.float32"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, vocab_size=99\), got \[-1, 99\]"):
        model(torch.tensor([[3, 99, -1]]))
    with pytest.raises(ValueError, match=r"input_ids must have shape \(B, T\), got \(3,\)"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="cache has 3 layers, but the model has n_layers=2"):
        model(torch.tensor([[1]]), KVCache(3))


@pytest.mark.slow
def test_smollm2_real_weights_match_hf():
    """SmolLM2-135M-Instruct's 4-bit GGUF file: our loader against HF's own GGUF reader.

    HF's ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`` refuses to run without ``accelerate``, which the
    course does not install. So the reference is the path that call takes inside: HF's ``load_gguf_checkpoint``
    (HF's names, HF's undoing of llama.cpp's q/k row order, the gguf package's dequantization) into a plain
    ``transformers.LlamaForCausalLM`` built from the config HF reads from the same file.
    """
    import gguf
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = data.smollm2_gguf()
    ours = load_gguf_llama(path).eval()
    assert ours.config == LlamaConfig.smollm2_135m()
    with torch.device("meta"):  # only HF's parameter names are needed to map the GGUF tensors
        names = transformers.LlamaForCausalLM(hf_llama_config(ours.config))
    checkpoint = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=names)
    hf_config = transformers.LlamaConfig(**{k: v for k, v in checkpoint["config"].items() if k != "model_type"})
    # HF keeps the file's float32 epsilon as is (9.99999975e-06); we keep its shortest decimal, the same float32.
    assert torch.tensor(hf_config.rms_norm_eps, dtype=torch.float32) == torch.tensor(1e-5, dtype=torch.float32)
    assert dataclasses.replace(llama_config_from_hf(hf_config), rms_norm_eps=1e-5) == ours.config
    theirs = transformers.LlamaForCausalLM(hf_config).eval()
    assert theirs.load_state_dict(checkpoint["tensors"], strict=False).missing_keys == ["lm_head.weight"]  # tied
    # The same dequantized weights, bit for bit: names, row order and tying all agree.
    mine = hf_llama_state_dict(ours)
    assert sorted(mine) == sorted(theirs.state_dict())
    assert all(torch.equal(mine[key], value) for key, value in theirs.state_dict().items())

    tokens = gguf.GGUFReader(str(path)).fields["tokenizer.ggml.tokens"]
    token = lambda i: bytes(tokens.parts[tokens.data[i]]).decode()  # noqa: E731
    ids = torch.tensor([[504, 3575, 282, 4649, 314]])  # the GGUF tokenizer's ids; "Ġ" is GPT-2's byte-level space
    assert "".join(token(i) for i in ids[0]).replace("Ġ", " ") == "The capital of France is"
    with torch.no_grad():
        actual, expected = ours(ids)[0, -1], theirs(ids).logits[0, -1]
    # Same weights and inputs, so only float32 rounding differs (their sdpa kernel and repeated keys against our
    # written-out attention with broadcast keys): about 1e-7 relative per operation, compounded over 30 layers; 3e-5
    # measured on logits of size about 20. Any real error (a head, a norm, a row order) moves them by far more than
    # 1e-3, and the top two logits are 2.5 apart, so 1e-3 leaves room for other BLAS builds without hiding anything.
    assert (actual - expected).abs().max() < 1e-3
    assert actual.argmax() == expected.argmax() and token(int(actual.argmax())) == "ĠParis"
