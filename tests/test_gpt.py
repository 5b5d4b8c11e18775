"""GPT: parity with HF's GPT2LMHeadModel both ways, the presets' parameter counts against HF's own models, the tied
output, causality, and the errors on bad input."""

import pytest
import torch
import transformers

from minformers.convert.gpt2 import gpt_config_from_hf, hf_gpt2_config, hf_gpt2_state_dict, load_hf_gpt2
from minformers.gpt import GPT, GPTConfig, count_parameters, language_model_loss

torch.set_num_threads(1)
# d_ff 37 is odd on purpose, so a swapped up/down projection cannot go unnoticed.
TINY = GPTConfig(vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=16, dropout=0.0)
ATOL = 1e-5


def _hf_tiny():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(hf_gpt2_config(TINY)).eval()


def test_logits_equal_hf_gpt2_with_their_weights():
    theirs = _hf_tiny()
    ours = load_hf_gpt2(GPT(gpt_config_from_hf(theirs.config)), theirs.state_dict()).eval()
    ids = torch.randint(0, 99, (3, 16))
    with torch.no_grad():
        gap = (ours(ids) - theirs(ids).logits).abs().max().item()
    assert gap < ATOL, gap


def test_hf_gpt2_equals_ours_with_our_weights():
    torch.manual_seed(1)
    ours = GPT(TINY).eval()
    theirs = transformers.GPT2LMHeadModel(hf_gpt2_config(TINY)).eval()
    theirs.load_state_dict(hf_gpt2_state_dict(ours), strict=False)  # strict=False: HF's causal-mask buffers
    ids = torch.randint(0, 99, (2, 9))
    with torch.no_grad():
        assert (ours(ids) - theirs(ids).logits).abs().max().item() < ATOL


def test_config_round_trips_through_hf():
    assert gpt_config_from_hf(hf_gpt2_config(TINY)) == TINY
    with pytest.raises(ValueError, match="post-LN"):
        hf_gpt2_config(GPTConfig.gpt1())


@pytest.mark.parametrize("size, hf_sizes", [
    ("small", dict(n_embd=768, n_layer=12, n_head=12)),
    ("medium", dict(n_embd=1024, n_layer=24, n_head=16)),
])  # fmt: skip
def test_gpt2_counts_equal_hf_models_of_the_same_size(size, hf_sizes):
    """Counted on the meta device on both sides: HF builds the model, nothing is allocated."""
    with torch.device("meta"):
        theirs = transformers.GPT2LMHeadModel(transformers.GPT2Config(**hf_sizes))
    assert count_parameters(GPTConfig.gpt2(size)) == sum(p.numel() for p in theirs.parameters())


def test_gpt1_count_by_hand():
    """GPT-1: embeddings V x C and 512 x C; per layer 4 C^2 + 4 C (attention), 2 x 4 C^2 + 4 C + C (MLP), 4 C
    (two LayerNorms); no final norm; the output is tied."""
    V, C, L = 40478, 768, 12
    per_layer = (4 * C * C + 4 * C) + (8 * C * C + 5 * C) + 4 * C
    assert count_parameters(GPTConfig.gpt1()) == V * C + 512 * C + L * per_layer == 116_534_784


def test_output_is_tied_and_causal():
    model = GPT(TINY).eval()
    ids = torch.randint(0, 99, (1, 10))
    with torch.no_grad():  # the logits are the hidden states read through W_e^T, and there is no other V x C matrix
        torch.testing.assert_close(model(ids), model.hidden_states(ids) @ model.token_embedding.weight.T)
    assert sum(p.numel() for p in model.parameters() if p.shape == model.token_embedding.weight.shape) == 99 * 32
    changed = ids.clone()
    changed[0, 6] = (ids[0, 6] + 1) % 99
    with torch.no_grad():
        before, after = model(ids), model(changed)
    assert torch.equal(before[0, :6], after[0, :6])  # earlier positions never see a later token
    assert not torch.allclose(before[0, 6:], after[0, 6:])


def test_post_ln_variant_runs_and_has_no_final_norm():
    model = GPT(GPTConfig.tiny(vocab_size=20, norm_first=False))
    assert model.final_norm is None and model(torch.tensor([[1, 2]])).shape == (1, 2, 20)


def test_language_model_loss_shifts_by_one():
    logits = torch.full((1, 3, 4), -1e9)
    logits[0, 0, 2] = logits[0, 1, 3] = 0.0  # position 0 predicts token 2, position 1 predicts token 3
    assert language_model_loss(logits, torch.tensor([[0, 2, 3]])).item() == pytest.approx(0.0)


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m(torch.tensor([[1, 2, 99]])), ValueError, "vocab_size=99"),
    (lambda m: m(torch.zeros(1, 17, dtype=torch.long)), ValueError, "max_len=16"),
    (lambda m: m(torch.tensor([[1.0, 2.0]])), TypeError, "must be an integer tensor"),
    (lambda m: GPTConfig(d_model=30, n_heads=4), ValueError, "divisible"),
    (lambda m: GPTConfig.gpt2("huge"), ValueError, "size must be one of"),
    (lambda m: GPTConfig(activation="swish"), ValueError, r"activation must be one of \['gelu', 'gelu_tanh', 'relu'\]"),
    (lambda m: language_model_loss(torch.zeros(2, 1, 4), torch.zeros(2, 1, dtype=torch.long)), ValueError,
     r"T >= 2, got \(2, 1, 4\) and \(2, 1\)"),  # no token to predict: it was NaN
    (lambda m: language_model_loss(torch.zeros(2, 5, 4), torch.zeros(2, 4, dtype=torch.long)), ValueError,
     r"needs logits \(B, T, V\) and input_ids \(B, T\)"),  # targets shifted by the caller as well
])  # fmt: skip
def test_bad_input_gets_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call(GPT(TINY))
