import math

import pytest
import torch

from minformers.bert import BertConfig, BertModel
from minformers.convert.bert import hf_bert_state_dict, load_hf_bert
from minformers.recipes.transfer import (
    MeanPoolClassifier,
    layer_of,
    relative_distance,
    shrink_hf_bert_state,
    snapshot,
    vocabulary_subset,
    weight_movement,
)

torch.set_num_threads(1)
SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}


def test_relative_distance_by_hand():
    initial = {"a": torch.tensor([3.0, 0.0]), "b": torch.tensor([[0.0], [4.0]])}  # ||theta_0|| = 5
    final = {"a": torch.tensor([3.0, 1.0]), "b": torch.tensor([[0.0], [4.0]]), "unused": torch.ones(3)}
    assert relative_distance(initial, final) == pytest.approx(1 / 5)
    # One norm over all the tensors together, not the mean of per-tensor ratios (which would be (1/3 + 0) / 2).
    final["b"] = torch.tensor([[0.0], [6.0]])
    assert relative_distance(initial, final) == pytest.approx(math.sqrt(1 + 4) / 5)
    assert relative_distance(initial, initial) == 0.0


def test_relative_distance_equals_torch_parameters_to_vector():
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny(vocab_size=40))
    before = snapshot(model)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    start = torch.nn.utils.parameters_to_vector(before.values()).double()
    now = torch.nn.utils.parameters_to_vector(model.parameters()).double()
    expected = ((now - start).norm() / start.norm()).item()
    assert relative_distance(before, dict(model.named_parameters())) == pytest.approx(expected, rel=1e-12)


def test_relative_distance_rejects_bad_input():
    with pytest.raises(ValueError, match="initial holds no tensors"):
        relative_distance({}, {})
    with pytest.raises(ValueError, match="final lacks tensors of initial: \\['w'\\]"):
        relative_distance({"w": torch.ones(2)}, {"v": torch.ones(2)})
    with pytest.raises(ValueError, match="w: initial has shape \\(2,\\), final \\(3,\\)"):
        relative_distance({"w": torch.ones(2)}, {"w": torch.ones(3)})
    with pytest.raises(ValueError, match="all zero"):
        relative_distance({"w": torch.zeros(2)}, {"w": torch.ones(2)})


def test_snapshot_is_a_copy():
    model = torch.nn.Linear(2, 2)
    before = snapshot(model)
    with torch.no_grad():
        model.weight.add_(1.0)
    assert not torch.equal(before["weight"], model.weight)
    assert not before["weight"].requires_grad


def test_layer_of_names_the_parts_of_a_bert():
    names = [name for name, _ in BertModel(BertConfig.tiny(vocab_size=40, n_layers=2)).named_parameters()]
    assert list(dict.fromkeys(map(layer_of, names))) == ["embeddings", "layer 1", "layer 2", "pooler"]
    assert layer_of("bert.layers.11.feed_forward.0.weight") == "layer 12"


def test_weight_movement_moves_only_the_changed_group():
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny(vocab_size=40, n_layers=2))
    before = snapshot(model)
    with torch.no_grad():
        for parameter in model.layers[1].parameters():
            parameter.mul_(1.5)  # every tensor of layer 2 moves by half its norm
    moved = weight_movement(before, dict(model.named_parameters()))
    assert list(moved) == ["embeddings", "layer 1", "layer 2", "pooler", "all"]
    assert moved["embeddings"] == moved["layer 1"] == moved["pooler"] == 0.0
    assert moved["layer 2"] == pytest.approx(0.5)
    assert 0 < moved["all"] < 0.5
    grouped = weight_movement(before, dict(model.named_parameters()), group=lambda name: "everything")
    assert grouped == {"everything": moved["all"], "all": moved["all"]}


def test_vocabulary_subset_keeps_used_and_special_ids_in_order():
    ids = [torch.tensor([[2, 30, 7, 3, 0]]), torch.tensor([2, 7, 12, 3])]
    kept, lookup = vocabulary_subset(ids, 40, SPECIAL)
    assert kept.tolist() == [0, 1, 2, 3, 4, 7, 12, 30]
    assert torch.equal(lookup[kept], torch.arange(len(kept)))
    assert lookup[5].item() == lookup[1].item() == 1  # never seen: [UNK]
    assert lookup.shape == (40,)


def test_vocabulary_subset_rejects_bad_input():
    with pytest.raises(ValueError, match="must name 'pad' and 'unk'"):
        vocabulary_subset([torch.tensor([1])], 10, {"pad": 0})
    with pytest.raises(ValueError, match=r"ids must lie in \[0, vocab_size=10\)"):
        vocabulary_subset([torch.tensor([3, 10])], 10, SPECIAL)
    with pytest.raises(ValueError, match=r"\[PAD\] must stay id 0"):
        vocabulary_subset([torch.tensor([1, 2])], 10, {"pad": 5, "unk": 1})


def test_shrunk_model_computes_the_full_models_hidden_states():
    torch.manual_seed(0)
    full = BertModel(BertConfig.tiny(vocab_size=60, n_layers=3, max_len=16)).eval()
    ids = torch.tensor([[2, 17, 42, 9, 3, 0], [2, 55, 3, 0, 0, 0]])
    mask = (ids != 0).long()
    kept, lookup = vocabulary_subset([ids], 60, SPECIAL)
    state = shrink_hf_bert_state(hf_bert_state_dict(full), n_layers=2, kept=kept, max_len=8)
    small = BertModel(BertConfig.tiny(vocab_size=len(kept), n_layers=2, max_len=8))
    load_hf_bert(small, state).eval()  # strict: every tensor the small model needs is there, and nothing else
    with torch.no_grad():
        expected = full(ids, attention_mask=mask, return_all_hidden_states=True).all_hidden_states[2]
        got = small(lookup[ids], attention_mask=mask).hidden_states
    torch.testing.assert_close(got, expected)
    assert state["embeddings.word_embeddings.weight"].shape == (len(kept), 128)
    assert state["embeddings.position_embeddings.weight"].shape == (8, 128)


def test_shrink_hf_bert_state_rejects_bad_input():
    state = hf_bert_state_dict(BertModel(BertConfig.tiny(vocab_size=20, n_layers=2, max_len=16)))
    kept = torch.arange(10)
    with pytest.raises(ValueError, match="n_layers must be at most the 2 layers"):
        shrink_hf_bert_state(state, 3, kept, 8)
    with pytest.raises(ValueError, match="max_len must be at most the 16 positions"):
        shrink_hf_bert_state(state, 1, kept, 17)
    with pytest.raises(ValueError, match=r"kept must be a non-empty 1-D tensor of ids in \[0, 20\)"):
        shrink_hf_bert_state(state, 1, torch.tensor([3, 20]), 8)
    with pytest.raises(ValueError, match="must be a HF BERT state dict"):
        shrink_hf_bert_state({"bert." + key: value for key, value in state.items()}, 1, kept, 8)


def test_mean_pool_classifier_ignores_padding_and_trains_the_body():
    torch.manual_seed(0)
    classifier = MeanPoolClassifier(BertModel(BertConfig.tiny(vocab_size=50)), n_classes=2).eval()
    short = classifier(torch.tensor([[2, 7, 9, 3]]), torch.tensor([[1, 1, 1, 1]]))
    padded = classifier(torch.tensor([[2, 7, 9, 3, 0, 0]]), torch.tensor([[1, 1, 1, 1, 0, 0]]))
    torch.testing.assert_close(short, padded)
    classifier(torch.tensor([[2, 7, 3]]), torch.tensor([[1, 1, 1]])).sum().backward()
    assert classifier.bert.layers[0].feed_forward.up_proj.weight.grad.abs().sum() > 0
    assert classifier.bert.pooler.weight.grad is None  # the pooled [CLS] is never read
    with pytest.raises(TypeError, match="bert must be a BertModel"):
        MeanPoolClassifier(torch.nn.Linear(2, 2), n_classes=2)
