"""Vectors for words and sentences from an encoder's hidden states, and how
alike they are.

>>> hidden = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])   # (B=1, T=3, C=2)
>>> # the padded third position is ignored
>>> mean_pool(hidden, attention_mask=torch.tensor([[1, 1, 0]]))
tensor([[2., 1.]])
>>> cosine_matrix(torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([[2.0, 0.0]]))
tensor([[1.0000],
        [0.7071]])
"""

import torch


def mean_pool(
    hidden_states: torch.Tensor, attention_mask: torch.Tensor
) -> torch.Tensor:
    """Average of each sequence's hidden states over its real tokens:
    (B, T, C) and (B, T) -> (B, C).

    A sentence embedding, as sentence-transformers models such as MiniLM are trained to
    produce. Padding must not count, or the same sentence would get a different vector
    in a batch with longer neighbours.
    """
    if hidden_states.dim() != 3 or attention_mask.shape != hidden_states.shape[:2]:
        raise ValueError(
            "hidden_states must be (B, T, C) and attention_mask (B, T), got "
            f"{tuple(hidden_states.shape)} and {tuple(attention_mask.shape)}"
        )
    # (B, T) -> (B, T, 1)
    weights = attention_mask.to(hidden_states.dtype).unsqueeze(-1)
    # (B, 1); an all-padding row gives zeros, not NaN
    counts = weights.sum(dim=1).clamp(min=1.0)
    return (hidden_states * weights).sum(dim=1) / counts


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every row of `a` (N, C) with every row of `b`
    (M, C): (N, M)."""
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        shapes = f"{tuple(a.shape)} and {tuple(b.shape)}"
        raise ValueError(
            f"a and b must be (N, C) and (M, C) with the same C, got {shapes}"
        )
    a = a / a.norm(dim=1, keepdim=True).clamp(min=1e-12)
    b = b / b.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return a @ b.T  # (N, C) @ (C, M) -> (N, M)
