"""LoRA (minformers.lora): the adapted model starts equal to the pretrained one, trains only A and B, merges
into plain linear layers that compute what the adapted ones did, and equals PEFT's LoRA on the same weights."""

import copy

import pytest
import torch
from torch import nn

from minformers.bert import BertConfig, BertForPreTraining
from minformers.convert.peft_lora import as_peft
from minformers.gpt import GPT, GPTConfig
from minformers.lora import LoRALinear, apply_lora, merge_lora, trainable_parameters
from minformers.train import TrainConfig, make_optimizer
from minformers.training_memory import training_step_bytes

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
    # every update moved, q and v too, which attention calls as modules
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


def with_random_lora(base: nn.Module, targets: list[str]) -> nn.Module:
    """A copy of ``base`` adapted by our apply_lora, B drawn at random so that the update is not zero."""
    ours = copy.deepcopy(base)
    apply_lora(ours, targets, r=4, alpha=6.0)
    with torch.no_grad():
        for module in ours.modules():
            if isinstance(module, LoRALinear):
                module.B.normal_()
    return ours


def assert_ours_equals_peft(base: nn.Module, ours: nn.Module, logits, ids: torch.Tensor, adapted: int) -> None:
    """PEFT's LoraModel of ``ours`` (the same base weights, A and B) gives our logits within float32 rounding
    (atol 1e-5; they are of order 1), the adapters move them by more than 0.1 (so a model that skipped its adapters
    could not pass), and merging leaves the same weights, ``adapted`` of them changed."""
    theirs = as_peft(ours)
    with torch.no_grad():
        torch.testing.assert_close(logits(ours, ids), logits(theirs, ids), atol=1e-5, rtol=0)
        assert (logits(ours, ids) - logits(base, ids)).abs().max() > 0.1  # the adapters do change it
        merged_theirs = theirs.merge_and_unload().state_dict()
        merged_ours = merge_lora(ours).state_dict()
    assert merged_ours.keys() == merged_theirs.keys()
    for name, weight in merged_ours.items():
        torch.testing.assert_close(weight, merged_theirs[name], atol=1e-5, rtol=0, msg=name)
    changed = [n for n, w in merged_ours.items() if not torch.equal(w, base.state_dict()[n])]
    assert len(changed) == adapted


def test_ours_equals_peft_on_a_hugging_face_llama():
    import transformers

    torch.manual_seed(3)
    config = transformers.LlamaConfig(
        vocab_size=41, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    base = transformers.LlamaForCausalLM(config).eval()
    ours = with_random_lora(base, ["q_proj", "v_proj", "down_proj"])
    ids = torch.randint(0, 41, (2, 9), generator=torch.Generator().manual_seed(4))
    # three adapted matrices per layer, two layers
    assert_ours_equals_peft(base, ours, lambda model, ids: model(ids).logits, ids, adapted=3 * 2)


def test_ours_equals_peft_on_our_gpt():
    # PEFT's LoRA layer keeps the base weight as its .weight: attention must call q_proj and v_proj, not multiply
    # their weights, for the adapters to count
    torch.manual_seed(5)
    base = GPT(GPTConfig.tiny(vocab_size=41, n_layers=2)).eval()
    ours = with_random_lora(base, ["q_proj", "v_proj", "down_proj"])
    ids = torch.randint(0, 41, (2, 9), generator=torch.Generator().manual_seed(6))
    assert_ours_equals_peft(base, ours, lambda model, ids: model(ids), ids, adapted=3 * 2)


def test_ours_equals_peft_on_our_bert():
    torch.manual_seed(7)
    base = BertForPreTraining(BertConfig.tiny(vocab_size=41)).eval()  # 2 layers
    ours = with_random_lora(base, ["q_proj", "v_proj", "up_proj"])
    ids = torch.randint(0, 41, (2, 9), generator=torch.Generator().manual_seed(8))
    assert_ours_equals_peft(base, ours, lambda model, ids: model(ids).mlm_logits, ids, adapted=3 * 2)


def test_peft_initialises_a_as_we_do_and_b_at_zero():
    """The same law, not the same draw (PEFT draws its A after a default init):
    uniform on [-1/sqrt(in), 1/sqrt(in)], the Kaiming-uniform bound with a = sqrt(5)."""
    import peft

    theirs = peft.LoraModel(nn.Sequential(nn.Linear(400, 30)), peft.LoraConfig(r=8, target_modules=["0"]), "default")
    layer, ours = theirs.model[0], LoRALinear(nn.Linear(400, 30), r=8)
    bound = 1 / 400**0.5
    for A in (layer.lora_A["default"].weight, ours.A):
        assert A.abs().max() <= bound
        # 3,200 uniform draws: their std is within 5% of bound / sqrt(3) by a wide margin
        assert abs(A.std().item() / (bound / 3**0.5) - 1) < 0.05
    assert torch.equal(layer.lora_B["default"].weight, torch.zeros(30, 8))
    assert layer.scaling["default"] == ours.scale == 1.0  # PEFT's defaults: r 8, alpha 8


def test_a_training_step_holds_adam_state_only_for_what_trains():
    pretrained, adapted = adapted_gpt(r=4)
    ids = torch.randint(0, 23, (2, 12))
    bytes_of = {}

    def next_token_loss(model):
        return nn.functional.cross_entropy(model(ids)[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

    for name, model in (("full", pretrained), ("lora", adapted)):
        model.train()
        optimizer = make_optimizer(model, TrainConfig(steps=2, warmup_steps=0))
        bytes_of[name] = training_step_bytes(model, optimizer, lambda m=model: next_token_loss(m))
    for name, model in (("full", pretrained), ("lora", adapted)):
        trained = [p for p in model.parameters() if p.requires_grad]
        # two float32 moments per trained number, and a float32 step count per tensor
        assert bytes_of[name]["optimizer state"] == 8 * sum(p.numel() for p in trained) + 4 * len(trained)
        assert bytes_of[name]["gradients"] == 4 * sum(p.numel() for p in trained)
    assert bytes_of["lora"]["weights"] > bytes_of["full"]["weights"]  # A and B come on top
    # frozen layers need not keep their inputs for a weight gradient
    assert bytes_of["lora"]["activations"] < bytes_of["full"]["activations"]
