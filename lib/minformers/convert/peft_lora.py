"""Our LoRA adapters as PEFT's, to check one against the other: the same base weights,
A and B, in the ``peft.LoraModel`` that ``get_peft_model`` builds for a HF model."""

import copy

from torch import nn

from minformers.lora import LoRALinear


def as_peft(adapted: nn.Module):
    """A PEFT LoraModel of a copy of ``adapted``'s base model, adapting the same layers
    with the same r, alpha, A and B. All adapters must share r and alpha (one PEFT
    config). ``adapted`` is left as it was.

    >>> import torch
    >>> from minformers.gpt import GPT, GPTConfig
    >>> from minformers.lora import apply_lora
    >>> ours = GPT(GPTConfig.tiny(vocab_size=10, n_layers=1))
    >>> apply_lora(ours, ["q_proj", "v_proj"], r=4)
    ['layers.0.attention.q_proj', 'layers.0.attention.v_proj']
    >>> theirs = as_peft(ours)
    >>> ids = torch.tensor([[1, 2, 3]])
    >>> torch.allclose(theirs(ids), ours(ids))
    True
    """
    import peft  # only here: importing peft takes seconds

    wrapped = {n: m for n, m in adapted.named_modules() if isinstance(m, LoRALinear)}
    if not wrapped:
        raise ValueError("the model has no LoRALinear: apply_lora first")
    if len({(m.r, m.alpha) for m in wrapped.values()}) != 1 or any(
        m.merged for m in wrapped.values()
    ):
        raise ValueError("as_peft needs unmerged adapters that share one r and alpha")
    first = next(iter(wrapped.values()))
    base = copy.deepcopy(adapted)
    for name in wrapped:  # put the copy's plain layers back
        parent, _, child = name.rpartition(".")
        setattr(base.get_submodule(parent), child, base.get_submodule(name).base)
    config = peft.LoraConfig(
        r=first.r, lora_alpha=first.alpha, target_modules=list(wrapped)
    )
    theirs = peft.LoraModel(base, config, "default")
    for name, module in wrapped.items():
        layer = theirs.model.get_submodule(name)
        layer.lora_A["default"].weight.data.copy_(module.A.data)  # (r, in)
        layer.lora_B["default"].weight.data.copy_(module.B.data)  # (out, r)
    return theirs
