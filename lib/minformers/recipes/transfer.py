"""Pretrain-then-fine-tune against learning from scratch: a real pretrained encoder cut
to a size one CPU core can fine-tune many times, a classifier on its mean-pooled output,
and how far fine-tuning moves the weights.

How far a parameter tensor (or a group of them) moved is measured relative to where it
started: ``||theta - theta_0|| / ||theta_0||``, the L2 norms taken over all the entries
of the group together.

    >>> initial = {"w": torch.tensor([3.0, 4.0]), "b": torch.tensor([0.0])}
    >>> final = {"w": torch.tensor([3.0, 4.5]), "b": torch.tensor([0.0])}
    >>> relative_distance(initial, final)  # 0.5 / 5
    0.1
"""

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from minformers.bert import BertModel
from minformers.similarity import mean_pool
from minformers.support.arguments import require_size

# HF BERT's prefix of block i's parameters: encoder.layer.{i}.attention...
_HF_LAYER = "encoder.layer."
_HF_TOKENS = "embeddings.word_embeddings.weight"
_HF_POSITIONS = "embeddings.position_embeddings.weight"


def vocabulary_subset(
    ids: Iterable[torch.Tensor], vocab_size: int, special_ids: Mapping[str, int]
):
    """The pieces a fixed set of texts uses, so a model's token table can keep only
    those rows: ``(kept, lookup)``, where ``kept`` (V',) holds the old ids that occur in
    any tensor of ``ids`` (and every special id), sorted, and ``lookup`` (vocab_size,)
    maps an old id to its new one, ``lookup[kept[i]] == i``; an id not kept maps to the
    new ``[UNK]``. For texts drawn from the same set, a model with the cut table
    computes exactly what the full one computes: a row that never occurs is never read.

    >>> specials = {"pad": 0, "unk": 1, "cls": 2, "sep": 3}
    >>> kept, lookup = vocabulary_subset([torch.tensor([[2, 9, 3, 0]])], 12, specials)
    >>> # 7 never occurred: it reads as [UNK]
    >>> kept.tolist(), lookup[torch.tensor([2, 9, 3, 0, 7])].tolist()
    ([0, 1, 2, 3, 9], [2, 4, 3, 0, 1])
    """
    require_size("vocab_size", vocab_size)
    if "unk" not in special_ids or "pad" not in special_ids:
        raise ValueError(
            f"special_ids must name 'pad' and 'unk', got {sorted(special_ids)}"
        )
    used = [torch.as_tensor(tensor).flatten() for tensor in ids]
    # sorted
    kept = torch.unique(torch.cat([*used, torch.tensor(list(special_ids.values()))]))
    if kept.min() < 0 or kept.max() >= vocab_size:
        raise ValueError(
            f"ids must lie in [0, vocab_size={vocab_size}), got "
            f"{kept.min().item()}..{kept.max().item()}"
        )
    lookup = torch.empty(vocab_size, dtype=torch.long)
    # every id not kept reads as [UNK]
    lookup[:] = int((kept == special_ids["unk"]).nonzero())
    lookup[kept] = torch.arange(len(kept))
    if lookup[special_ids["pad"]] != 0:
        raise ValueError(
            "[PAD] must stay id 0 (BertConfig.pad_id), but its id "
            f"{special_ids['pad']} is not the smallest kept"
        )
    return kept, lookup


def shrink_hf_bert_state(
    hf_state: Mapping[str, torch.Tensor],
    n_layers: int,
    kept: torch.Tensor,
    max_len: int,
) -> dict[str, torch.Tensor]:
    """A HF BERT state dict (say MiniLM's) cut down to fit
    ``BertConfig(n_layers=n_layers, vocab_size=len(kept), max_len=max_len)``: its first
    ``n_layers`` blocks, the token-embedding rows ``kept`` (row i of the new table is
    old row ``kept[i]``, as ``vocabulary_subset`` gives them) and the first ``max_len``
    positions. Everything else (segment embeddings, embedding LayerNorm, pooler) is kept
    whole; the layers above are dropped, so the cut model computes exactly the full
    model's hidden states after block ``n_layers``."""
    if _HF_TOKENS not in hf_state or _HF_POSITIONS not in hf_state:
        raise ValueError(
            f"hf_state must be a HF BERT state dict (no prefix), with {_HF_TOKENS!r} "
            f"and {_HF_POSITIONS!r}"
        )
    layers = 1 + max(
        (
            int(key.removeprefix(_HF_LAYER).split(".")[0])
            for key in hf_state
            if key.startswith(_HF_LAYER)
        ),
        default=-1,
    )
    require_size("n_layers", n_layers)
    if n_layers > layers:
        raise ValueError(
            f"n_layers must be at most the {layers} layers of the state dict, got "
            f"{n_layers}"
        )
    vocab_size, positions = len(hf_state[_HF_TOKENS]), len(hf_state[_HF_POSITIONS])
    require_size("max_len", max_len)
    if max_len > positions:
        raise ValueError(
            f"max_len must be at most the {positions} positions of the state dict, got "
            f"{max_len}"
        )
    kept = torch.as_tensor(kept)
    if kept.dim() != 1 or len(kept) == 0 or kept.min() < 0 or kept.max() >= vocab_size:
        raise ValueError(
            f"kept must be a non-empty 1-D tensor of ids in [0, {vocab_size})"
        )
    state = {}
    for key, tensor in hf_state.items():
        if (
            key.startswith(_HF_LAYER)
            and int(key.removeprefix(_HF_LAYER).split(".")[0]) >= n_layers
        ):
            continue  # a block above the cut
        state[key] = (
            tensor[kept]
            if key == _HF_TOKENS
            else tensor[:max_len]
            if key == _HF_POSITIONS
            else tensor
        )
    return state


class MeanPoolClassifier(nn.Module):
    """Dropout and a Linear(C, n_classes) on the mean of a BertModel's last hidden
    states over the real tokens.

    The read-out sentence-transformers models such as MiniLM are trained for; BERT's own
    classifier reads the pooled ``[CLS]`` (``bert.BertForSequenceClassification``),
    whose pooler in a truncated MiniLM was trained for another layer's output. ``bert``
    is the body itself, not a copy: copy it first to keep the original.

    >>> from minformers.bert import BertConfig
    >>> body = BertModel(BertConfig.tiny(vocab_size=50))
    >>> classifier = MeanPoolClassifier(body, n_classes=3)
    >>> classifier(torch.tensor([[2, 7, 3, 0]]), torch.tensor([[1, 1, 1, 0]])).shape
    torch.Size([1, 3])
    """

    def __init__(self, bert: BertModel, n_classes: int):
        super().__init__()
        if not isinstance(bert, BertModel):
            raise TypeError(f"bert must be a BertModel, got {type(bert).__name__}")
        self.bert, self.n_classes = (
            bert,
            require_size("n_classes", n_classes, minimum=2),
        )
        self.dropout = nn.Dropout(bert.config.dropout)
        self.classifier = nn.Linear(bert.config.d_model, n_classes)
        nn.init.normal_(self.classifier.weight, std=0.02)  # BERT's init for a new head
        nn.init.zeros_(self.classifier.bias)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        """input_ids, attention_mask: (B, T) -> logits (B, n_classes)."""
        # (B, T, C)
        hidden_states = self.bert(
            input_ids, attention_mask=attention_mask
        ).hidden_states
        # (B, C) -> (B, n_classes)
        return self.classifier(self.dropout(mean_pool(hidden_states, attention_mask)))


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s parameters by name, detached: theta_0, to compare
    with after training."""
    return {
        name: parameter.detach().clone()
        for name, parameter in module.named_parameters()
    }


def relative_distance(
    initial: Mapping[str, torch.Tensor], final: Mapping[str, torch.Tensor]
) -> float:
    """``||theta - theta_0|| / ||theta_0||`` over all the tensors of ``initial``
    together (in float64), with theta the tensors of the same names in ``final``.
    Example at the top of the module."""
    if not initial:
        raise ValueError("initial holds no tensors")
    missing = sorted(set(initial) - set(final))
    if missing:
        raise ValueError(f"final lacks tensors of initial: {missing[:5]}")
    moved = start = 0.0
    for name, before in initial.items():
        after = final[name]
        if after.shape != before.shape:
            raise ValueError(
                f"{name}: initial has shape {tuple(before.shape)}, final "
                f"{tuple(after.shape)}"
            )
        before, after = before.detach().double(), after.detach().double()
        moved += (after - before).pow(2).sum().item()
        start += before.pow(2).sum().item()
    if start == 0:
        raise ValueError(
            "the initial tensors are all zero: a distance relative to them is undefined"
        )
    return (moved / start) ** 0.5


def layer_of(name: str) -> str:
    """The part of a BertModel a parameter belongs to: "embeddings", "layer 1"
    (for ``layers.0.``...), "pooler".

    >>> (
    ...     layer_of("layers.0.attention.query.weight"),
    ...     layer_of("bert.embeddings.norm.bias"),
    ...     layer_of("pooler.bias"),
    ... )
    ('layer 1', 'embeddings', 'pooler')
    """
    parts = name.removeprefix("bert.").split(".")
    return f"layer {int(parts[1]) + 1}" if parts[0] == "layers" else parts[0]


def weight_movement(
    initial: Mapping[str, torch.Tensor],
    final: Mapping[str, torch.Tensor],
    group: Callable[[str], str] = layer_of,
) -> dict[str, float]:
    """``relative_distance`` for each group of tensors (``group(name)``, by default the
    part of a BertModel), in the order the groups first occur in ``initial``, and over
    all of them together as "all".

    >>> before = {"layers.0.w": torch.ones(4), "layers.1.w": torch.ones(4)}
    >>> after = {"layers.0.w": torch.ones(4), "layers.1.w": 2 * torch.ones(4)}
    >>> weight_movement(before, after)
    {'layer 1': 0.0, 'layer 2': 1.0, 'all': 0.7071067811865476}
    """
    groups: dict[str, list[str]] = {}
    for name in initial:
        groups.setdefault(group(name), []).append(name)
    distances = {
        name: relative_distance({key: initial[key] for key in keys}, final)
        for name, keys in groups.items()
    }
    return distances | {"all": relative_distance(initial, final)}
