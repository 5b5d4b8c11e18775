"""Training memory: the saved-tensor count on a hand-countable network, checkpointing's equal gradients for less
memory, and the ZeRO formula against the ZeRO paper's worked example."""

import pytest
import torch
from torch import nn

from minformers import training_memory
from minformers.gpt import GPT, GPTConfig, language_model_loss


def test_saved_bytes_of_a_hand_countable_network():
    # y = relu(x W^T): autograd keeps x for W's gradient and relu's output for its own backward; W itself is a
    # parameter and is not counted. x: 8 x 16 floats, the output 8 x 32 floats, 4 bytes each.
    layer, x = nn.Linear(16, 32, bias=False), torch.randn(8, 16)
    saved = training_memory.saved_activation_bytes(layer, lambda: torch.relu(layer(x)).sum())
    assert saved == 4 * (8 * 16 + 8 * 32)


def test_checkpointing_keeps_less_and_gives_the_same_gradients():
    torch.manual_seed(0)
    model, ids = GPT(GPTConfig.tiny(vocab_size=20, n_layers=3)), torch.randint(0, 20, (4, 16))
    checkpointed = training_memory.checkpoint_layers(model)
    assert isinstance(checkpointed.layers[0], training_memory.Checkpointed)
    assert not isinstance(model.layers[0], training_memory.Checkpointed)
    whole = training_memory.saved_activation_bytes(model, lambda: language_model_loss(model(ids), ids))
    kept = training_memory.saved_activation_bytes(checkpointed, lambda: language_model_loss(checkpointed(ids), ids))
    assert kept < whole / 3
    language_model_loss(model(ids), ids).backward()
    language_model_loss(checkpointed(ids), ids).backward()
    theirs = dict(model.named_parameters())
    for name, parameter in checkpointed.named_parameters():
        torch.testing.assert_close(parameter.grad, theirs[name.replace(".layer.", ".")].grad, rtol=0, atol=0)


def test_zero_stages_give_the_papers_worked_example():
    # Rajbhandari et al. (2020), figure 1: 7.5 B parameters, 64 devices, K = 12: 120, 31.4, 16.6 and 1.9 GB.
    expected = {"DDP": 120.0, "ZeRO-1": 31.4, "ZeRO-2": 16.6, "ZeRO-3": 1.9}
    for stage, gigabytes in expected.items():
        total = sum(training_memory.zero_bytes_per_rank(7_500_000_000, 64, stage, (2, 2, 12)).values())
        assert round(total / 1e9, 1) == gigabytes


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="stage must be one of"):
        training_memory.zero_bytes_per_rank(10, 2, "ZeRO-4")
    with pytest.raises(TypeError, match="`layers` ModuleList"):
        training_memory.checkpoint_layers(nn.Linear(2, 2))
