"""What a causal attention head reads, in numbers: where each query puts its weight,
averaged over queries.

``head_profile`` takes the weights of every layer and head, (L, B, H, T, T) as
``attention.recorded_attention`` gives them, and returns one (L, H) table per pattern:

- "previous token": the weight on the key just before the query;
- "same token": the weight on the query's own position;
- "last word break": the weight on the most recent break (a space or line break, say)
  at or before the query;
- "distance": how many tokens back the weight sits on average.

The same function applied to ``uniform_causal_weights`` gives what a head that spreads
its weight evenly over the past would score, the yardstick each number is read against.

    >>> ids = torch.tensor([[5, 0, 6, 7]])  # one window, a word break (id 0) at 1
    >>> # (1, 1, 1, 4, 4): each query reads the token before it
    >>> reads_previous = torch.eye(4).roll(-1, dims=1).tril()[None, None, None]
    >>> reads_previous[..., 0, 0] = 1  # query 0 has only itself
    >>> profile = head_profile(reads_previous, ids, break_ids=[0])
    >>> # the break is the previous token for query 2 only
    >>> [round(profile[name].item(), 3) for name in PATTERNS]
    [1.0, 0.0, 0.333, 1.0]
    >>> uniform = head_profile(uniform_causal_weights(1, 1, 1, 4), ids, break_ids=[0])
    >>> # 1/2, 1/3, 1/4 on each: mean 0.361
    >>> [round(uniform[name].item(), 3) for name in PATTERNS]
    [0.361, 0.361, 0.361, 1.0]
"""

from collections.abc import Sequence

import torch
from IPython.display import Markdown

from minformers.masks import causal_mask
from minformers.support.markdown import table

PATTERNS = ("previous token", "same token", "last word break", "distance")


def uniform_causal_weights(
    layers: int, batch: int, heads: int, length: int
) -> torch.Tensor:
    """(L, B, H, T, T) weights: query t spreads its weight evenly over keys 0..t."""
    weights = causal_mask(length).float()
    weights = weights / weights.sum(-1, keepdim=True)  # (T, T), rows sum to 1
    return weights.expand(layers, batch, heads, length, length)


def head_profile(
    weights: torch.Tensor, input_ids: torch.Tensor, break_ids
) -> dict[str, torch.Tensor]:
    """Average each pattern of ``PATTERNS`` over the queries 1..T-1 of every window
    (query 0 has only itself to read); the word-break pattern over the queries that have
    a break at or before them. Returns (L, H) tables."""
    if weights.dim() != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must be (L, B, H, T, T), got {tuple(weights.shape)}")
    L, B, H, T, _ = weights.shape
    if input_ids.shape != (B, T):
        raise ValueError(
            f"input_ids must be (B, T) = {(B, T)}, got {tuple(input_ids.shape)}"
        )
    positions = torch.arange(T)
    queries = positions[1:]
    # (L, B, H, T-1) -> (L, H)
    previous = weights[..., queries, queries - 1].mean(dim=(1, 3))
    same = weights[..., queries, queries].mean(dim=(1, 3))
    # (T, T): how far key is behind query
    back = (positions[:, None] - positions[None, :]).clamp(min=0).float()
    distance = (weights * back).sum(-1)[..., 1:].mean(dim=(1, 3))

    is_break = torch.isin(input_ids, torch.as_tensor(list(break_ids)))  # (B, T)
    # (B, T): -1 where none yet
    last_break = torch.where(is_break, positions, -1).cummax(dim=1).values
    has_break = last_break >= 0
    index = last_break.clamp(min=0)[None, :, None, :, None].expand(L, B, H, T, 1)
    # (L, B, H, T): each query's weight on its last break
    on_break = weights.gather(-1, index).squeeze(-1)
    counted = has_break[None, :, None, :]  # (1, B, 1, T)
    word_break = (on_break * counted).sum(dim=(1, 3)) / counted.sum().clamp(min=1)
    return dict(zip(PATTERNS, (previous, same, word_break, distance), strict=True))


def head_table(profile: dict, even: dict, labels: Sequence[str] = PATTERNS) -> Markdown:
    """``head_profile``'s numbers as a table: one row per layer and head, then the row of
    ``even``, the profile of a head that spreads its weight evenly over the past (from
    ``uniform_causal_weights``), under ``labels``, one column name per pattern. Weights
    print with two decimals, distances with one.

    >>> profile = {name: torch.tensor([[0.5, 0.25]]) for name in PATTERNS}
    >>> print(head_table(profile, profile).data.splitlines()[3])
    | layer 1, head 2 | 0.25 | 0.25 | 0.25 | 0.2 |
    """

    def cells(numbers: dict, layer: int, head: int) -> list[str]:
        return [
            f"{numbers[name][layer, head]:.{1 if name == 'distance' else 2}f}"
            for name in PATTERNS
        ]

    layers, heads = profile[PATTERNS[0]].shape
    rows = [
        (f"layer {layer + 1}, head {head + 1}", *cells(profile, layer, head))
        for layer in range(layers)
        for head in range(heads)
    ]
    rows.append(("even spread over the past", *cells(even, 0, 0)))
    return table(["head", *labels], rows)
