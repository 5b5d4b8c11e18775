"""LoRA (minformers.lora): the adapted model starts equal to the pretrained one, trains only A and B, and merges
into plain linear layers that compute what the adapted ones did."""

import copy

import pytest
import torch
from torch import nn

from minformers.gpt import GPT, GPTConfig
from minformers.lora import LoRALinear, apply_lora, merge_lora, trainable_parameters

torch.set_num_threads(1)
TINY = GPTConfig(vocab_size=23, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_len=16, dropout=0.0)
TARGETS = ["q_proj", "v_proj", "up_proj"]


def adapted_gpt(r: int = 4, alpha: float = 8.0) -> tuple[GPT, GPT]:
    torch.manual_seed(0)
    pretrained = GPT(TINY).eval()
    adapted = copy.deepcopy(pretrained)
    apply_lora(adapted, TARGETS, r=r, alpha=alpha)
    return pretrained, adapted


def train_a_few_steps(model: nn.Module, steps: int = 5) -> None:
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    ids = torch.randint(0, 23, (4, 12), generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def trained_adapter() -> GPT:
    """The adapted tiny GPT after a few steps, in eval mode: B is no longer zero."""
    adapted = adapted_gpt()[1].train()
    train_a_few_steps(adapted)
    return adapted.eval()


def test_at_initialisation_the_adapted_model_computes_what_the_pretrained_one_did():
    pretrained, adapted = adapted_gpt()
    ids = torch.randint(0, 23, (3, 10))
    with torch.no_grad():
        assert torch.equal(adapted(ids), pretrained(ids))  # B = 0: the update adds exact zeros


def test_only_a_and_b_train_r_times_in_plus_out_per_layer():
    pretrained, adapted = adapted_gpt(r=4)
    wrapped = [m for m in adapted.modules() if isinstance(m, LoRALinear)]
    assert len(wrapped) == len(TARGETS) * TINY.n_layers
    expected = sum(4 * (m.base.in_features + m.base.out_features) for m in wrapped)
    assert trainable_parameters(adapted) == expected
    frozen = {name: p.clone() for name, p in adapted.named_parameters() if not p.requires_grad}
    adapted.train()
    train_a_few_steps(adapted)
    for name, p in adapted.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, frozen[name]), f"{name} is frozen but changed"
    # every update moved, q and v too, which attention reads through the adapted weight in its fused product
    assert all(m.B.abs().sum() > 0 for m in wrapped)


def test_the_update_is_scale_times_b_times_a():
    torch.manual_seed(2)
    layer = LoRALinear(nn.Linear(6, 5), r=3, alpha=6.0)
    with torch.no_grad():
        layer.B.normal_()
    x = torch.randn(2, 7, 6)
    assert layer.scale == 2.0
    torch.testing.assert_close(layer.delta_weight(), 2.0 * layer.B @ layer.A)
    torch.testing.assert_close(layer(x), layer.base(x) + x @ layer.delta_weight().T)


def test_merged_and_unmerged_agree_within_float32_rounding_and_unmerge_restores_the_weights():
    adapted = trained_adapter()
    ids = torch.randint(0, 23, (3, 10))
    originals = {n: m.base.weight.clone() for n, m in adapted.named_modules() if isinstance(m, LoRALinear)}
    with torch.no_grad():
        before = adapted(ids)
        for module in adapted.modules():
            if isinstance(module, LoRALinear):
                module.merge()
                module.merge()  # a second merge changes nothing
        torch.testing.assert_close(adapted(ids), before, atol=1e-5, rtol=1e-5)
        for name, module in adapted.named_modules():
            if isinstance(module, LoRALinear):
                module.unmerge()
                torch.testing.assert_close(module.base.weight, originals[name], atol=1e-6, rtol=0)
        torch.testing.assert_close(adapted(ids), before, atol=1e-5, rtol=1e-5)


def test_merge_lora_leaves_plain_linear_layers_that_compute_the_same():
    adapted = trained_adapter()
    ids = torch.randint(0, 23, (2, 9))
    with torch.no_grad():
        before = adapted(ids)
        merged = merge_lora(adapted)
        assert not any(isinstance(m, LoRALinear) for m in merged.modules())
        assert isinstance(merged.layers[0].attention.q_proj, nn.Linear)
        torch.testing.assert_close(merged(ids), before, atol=1e-5, rtol=1e-5)


def test_bad_adapters_are_refused_with_the_reason():
    with pytest.raises(ValueError, match=r"r must be in \[1, 3\]"):
        LoRALinear(nn.Linear(6, 3), r=4)
    with pytest.raises(TypeError, match="adapts an nn.Linear"):
        LoRALinear(nn.Conv1d(3, 3, 1))
    with pytest.raises(ValueError, match="no nn.Linear in the model is named"):
        apply_lora(GPT(TINY), ["c_attn"])
