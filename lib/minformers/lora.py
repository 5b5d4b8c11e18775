"""LoRA: a frozen linear layer plus a trainable low-rank update (Hu et al., 2021).

    y = W0 x + (alpha / r) B A x

A is (r, in) and B is (out, r), so the update B A has rank at most r and costs
r (in + out) parameters where W0 has in * out. A starts Kaiming-uniform and B at zero,
as in PEFT: the update is zero at first, and the adapted model computes exactly what
the pretrained one did. Only A and B are trained. ``merge`` adds (alpha / r) B A into
W0, so that the adapted model runs at the plain model's cost; ``unmerge`` takes it out.

    >>> layer = LoRALinear(nn.Linear(4, 3), r=2, alpha=4)
    >>> layer.scale, trainable_parameters(layer)  # 2 x 4 (A) + 3 x 2 (B)
    (2.0, 14)
"""

import math
from collections.abc import Iterable

import torch
from torch import nn


class LoRALinear(nn.Module):
    """``base`` (frozen) plus the low-rank update; ``merged`` says whether the update
    already sits in ``base.weight``."""

    def __init__(self, base: nn.Linear, r: int = 8, alpha: float = 8.0):
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRA adapts an nn.Linear, got {type(base).__name__}")
        if not 0 < r <= min(base.in_features, base.out_features):
            raise ValueError(
                f"r must be in [1, {min(base.in_features, base.out_features)}] for a "
                f"{base.in_features} -> {base.out_features} layer, got {r}"
            )
        self.base = base.requires_grad_(False)
        self.r, self.alpha, self.scale = r, alpha, alpha / r
        # (r, in): PEFT's initialisation, which is nn.Linear's own
        self.A = nn.Parameter(torch.empty(r, base.in_features))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(base.out_features, r))  # (out, r)
        self.merged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)
        if self.merged:
            return y
        # (..., in) -> (..., r) -> (..., out): never forms the (out, in) matrix
        return y + self.scale * (x @ self.A.T) @ self.B.T

    def delta_weight(self) -> torch.Tensor:
        """(alpha / r) B A: what training added to W0, (out, in)."""
        return self.scale * self.B @ self.A

    @torch.no_grad()
    def merge(self) -> None:
        if not self.merged:
            self.base.weight += self.delta_weight()
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        if self.merged:
            self.base.weight -= self.delta_weight()
            self.merged = False


def apply_lora(
    model: nn.Module, targets: Iterable[str], r: int = 8, alpha: float = 8.0
) -> list[str]:
    """Freeze ``model`` and wrap each nn.Linear whose name ends with one of ``targets``
    (say "q_proj", "v_proj") in a LoRALinear, in place; return the wrapped names.

    >>> from minformers.gpt import GPT, GPTConfig
    >>> model = GPT(GPTConfig.tiny(vocab_size=10, n_layers=1))
    >>> apply_lora(model, ["q_proj", "v_proj"], r=4)
    ['layers.0.attention.q_proj', 'layers.0.attention.v_proj']
    """
    targets = tuple(targets)
    model.requires_grad_(False)
    chosen = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.split(".")[-1] in targets
    ]
    if not chosen:
        raise ValueError(f"no nn.Linear in the model is named one of {targets}")
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoRALinear(getattr(parent, child), r, alpha))
    return chosen


def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every LoRALinear of ``model`` into its base layer and put the plain
    nn.Linear back (PEFT's ``merge_and_unload``), in place; return the model."""
    for name, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            module.merge()
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, module.base)
    return model


def trainable_parameters(model: nn.Module) -> int:
    """How many parameters an optimizer would update (requires_grad)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
