"""The transformer block: self-attention then a position-wise feed-forward network, each
wrapped in a residual connection and a LayerNorm.

Shapes: B batch, T time, C channels = d_model. Every module here maps (B, T, C) to
(B, T, C).
"""

from functools import partial

import torch
from torch import nn

from minformers.attention import MultiHeadAttention

ACTIVATIONS = {
    # the exact erf form: BERT, and torch's TransformerEncoderLayer(activation="gelu")
    "gelu": nn.GELU,
    "gelu_tanh": partial(nn.GELU, approximate="tanh"),  # the approximation GPT-2 uses
    "relu": nn.ReLU,  # the original Transformer
}


class FeedForward(nn.Module):
    """Linear C -> d_ff, activation, Linear d_ff -> C, dropout: each position on its own.

    ``activation`` is a key of ``ACTIVATIONS``; the model configs check it.

    >>> FeedForward(d_model=8, d_ff=32)(torch.randn(2, 5, 8)).shape
    torch.Size([2, 5, 8])
    """

    def __init__(
        self, d_model: int, d_ff: int, activation: str = "gelu", dropout: float = 0.0
    ):
        super().__init__()
        self.up_proj = nn.Linear(d_model, d_ff)
        self.activation = ACTIVATIONS[activation]()
        self.down_proj = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.activation(self.up_proj(x))  # (B, T, C) -> (B, T, d_ff)
        return self.dropout(self.down_proj(hidden))  # (B, T, d_ff) -> (B, T, C)


class TransformerBlock(nn.Module):
    """Self-attention sublayer + feed-forward sublayer, each with a residual connection.

    norm_first=True (pre-LN, GPT-2 onwards): x = x + f(LN(x)). The residual path is
    never normalised, so gradients reach early layers unchanged and training is stable
    without warmup.

    norm_first=False (post-LN, the original Transformer and BERT): x = LN(x + f(x)).

    Matches ``torch.nn.TransformerEncoderLayer(..., batch_first=True, norm_first=...)``
    with the same weights; note that torch's bool ``src_mask`` means True = blocked, the
    opposite of ours.

    >>> block = TransformerBlock(d_model=8, n_heads=2, d_ff=32)
    >>> block(torch.randn(2, 5, 8)).shape
    torch.Size([2, 5, 8])
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = True,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.attention_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.feed_forward = FeedForward(
            d_model, d_ff, activation=activation, dropout=dropout
        )
        self.feed_forward_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        # on the attention sublayer's output; FeedForward has its own
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        cache=None,
        cache_layer: int = 0,
    ) -> torch.Tensor:
        """x: (B, T, C); mask: bool, True = may attend, broadcastable to (B, H, T, T_k).
        Returns (B, T, C). ``causal=True`` adds the causal mask (see
        ``MultiHeadAttention``).

        ``cache``, a ``KVCache``, makes the attention also read the keys and values of
        earlier calls (decoding); ``cache_layer`` is this block's index in it.
        """

        def attend(h: torch.Tensor) -> torch.Tensor:
            return self.dropout(
                self.attention(
                    h, mask=mask, causal=causal, cache=cache, cache_layer=cache_layer
                )
            )

        if self.norm_first:
            x = x + attend(self.attention_norm(x))
            return x + self.feed_forward(self.feed_forward_norm(x))
        x = self.attention_norm(x + attend(x))
        return self.feed_forward_norm(x + self.feed_forward(x))
