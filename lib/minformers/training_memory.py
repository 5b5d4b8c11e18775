"""Training memory on one device and across ranks: what autograd keeps for backward,
what activation checkpointing keeps of it, and what each ZeRO stage leaves on each rank.

    >>> from minformers.gpt import GPT, GPTConfig, language_model_loss
    >>> _ = torch.manual_seed(0)
    >>> model, ids = GPT(GPTConfig.tiny(vocab_size=10)), torch.randint(0, 10, (2, 16))
    >>> whole = saved_activation_bytes(
    ...     model, lambda: language_model_loss(model(ids), ids)
    ... )
    >>> kept = saved_activation_bytes(
    ...     model, lambda: language_model_loss(checkpoint_layers(model)(ids), ids)
    ... )
    >>> kept < whole / 2
    True
"""

import copy
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from minformers.support.arguments import require_size


def saved_activation_bytes(
    model: nn.Module, loss_of: Callable[[], torch.Tensor]
) -> int:
    """Bytes of the tensors autograd saves for the backward pass while ``loss_of()``
    runs its forward pass, each storage counted once, the model's own parameters left
    out (they are kept anyway): the activation memory."""
    parameters = {
        parameter.untyped_storage().data_ptr() for parameter in model.parameters()
    }
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss_of()
    return sum(saved.values())


def training_step_bytes(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_of: Callable[[], torch.Tensor],
) -> dict[str, int]:
    """Take one optimizer step on ``loss_of()`` and return the bytes it held, by part,
    measured from the tensors that exist: the weights, the activations saved for
    backward, the gradients, and the optimizer's state after the step (AdamW: two
    moments per trainable number). Frozen weights have no gradient and no state."""
    losses = []
    activations = saved_activation_bytes(model, lambda: losses.append(loss_of()))
    losses[0].backward()
    parameters = list(model.parameters())  # a tied weight once
    gradients = sum(p.grad.nbytes for p in parameters if p.grad is not None)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    state = sum(
        value.nbytes
        for per_parameter in optimizer.state.values()
        for value in per_parameter.values()
        if torch.is_tensor(value)
    )
    return {
        "weights": sum(p.nbytes for p in parameters),
        "activations": activations,
        "gradients": gradients,
        "optimizer state": state,
    }


class Checkpointed(nn.Module):
    """A layer whose forward pass keeps only its inputs for backward, and runs again
    during backward to rebuild the rest (``torch.utils.checkpoint``, non-reentrant):
    less memory for about one more forward pass of compute."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, *args, **kwargs):
        return checkpoint(self.layer, *args, use_reentrant=False, **kwargs)


def checkpoint_layers(model: nn.Module) -> nn.Module:
    """A copy of ``model`` (a GPT, or any model with a ``layers`` ModuleList) with every
    layer checkpointed."""
    if not isinstance(getattr(model, "layers", None), nn.ModuleList):
        raise TypeError(
            f"model must have a `layers` ModuleList, got {type(model).__name__}"
        )
    checkpointed = copy.deepcopy(model)
    checkpointed.layers = nn.ModuleList(
        Checkpointed(layer) for layer in checkpointed.layers
    )
    return checkpointed


# each splits one more kind of tensor across the ranks
ZERO_STAGES = ("DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


def zero_bytes_per_rank(
    n_parameters: int,
    ranks: int,
    stage: str,
    bytes_per_parameter: tuple[int, int, int] = (4, 4, 8),
) -> dict[str, float]:
    """The bytes each of ``ranks`` processes holds for parameters, gradients and
    optimizer state at a ZeRO stage: stage 1 splits the optimizer state, stage 2 the
    gradients too, stage 3 the parameters too (Rajbhandari et al., 2020).
    ``bytes_per_parameter`` is (parameter, gradient, state): (4, 4, 8) for float32
    training with AdamW's two moments; (2, 2, 12) for the paper's mixed precision
    (16-bit weights and gradients, and a float32 master copy beside the two moments).

    >>> zero_bytes_per_rank(1000, 4, "ZeRO-2")
    {'parameters': 4000, 'gradients': 1000.0, 'optimizer state': 2000.0}
    """
    require_size("n_parameters", n_parameters)
    require_size("ranks", ranks)
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage must be one of {ZERO_STAGES}, got {stage!r}")
    level = ZERO_STAGES.index(stage)
    parameter, gradient, state = (size * n_parameters for size in bytes_per_parameter)
    return {
        "parameters": parameter / ranks if level >= 3 else parameter,
        "gradients": gradient / ranks if level >= 2 else gradient,
        "optimizer state": state / ranks if level >= 1 else state,
    }
