"""GPT (Radford et al., 2018, 2019): a stack of causal transformer blocks over token +
learned position embeddings, with the output layer tied to the token embedding.

    h_0 = U W_e + W_p,    h_l = block(h_{l-1}), causal,    P(u) = softmax(h_n W_e^T)

GPT-1 is post-LN (LayerNorm after each residual add, like BERT) with no final norm;
GPT-2 moved the LayerNorm to the start of each sublayer (pre-LN) and added one after the
last block. ``norm_first`` picks between the two. Shape legend: B batch, T time,
C channels = d_model, V vocab size.

    >>> model = GPT(GPTConfig.tiny(vocab_size=100))
    >>> # (B, T) -> (B, T, V): a next-token distribution per position
    >>> model(torch.tensor([[5, 17, 42]])).shape
    torch.Size([1, 3, 100])
    >>> count_parameters(GPTConfig.gpt2())  # GPT-2 small, the tied output counted once
    124439808
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.blocks import ACTIVATIONS, TransformerBlock
from minformers.kv_cache import KVCache
from minformers.positions import LearnedPositions
from minformers.support.arguments import (
    require_context,
    require_heads,
    require_ids,
    require_size,
)


@dataclass(frozen=True)
class GPTConfig:
    """Sizes of a GPT; the defaults are GPT-2 small's (124 M parameters).

    >>> GPTConfig(d_model=100, n_heads=12)
    Traceback (most recent call last):
    ValueError: d_model must be divisible by n_heads, got 100 and 12
    """

    # GPT-2's byte-level BPE: 256 bytes + 50,000 merges + <|endoftext|>
    vocab_size: int = 50257
    d_model: int = 768  # C, the width of every hidden state
    n_layers: int = 12  # transformer blocks
    n_heads: int = 12  # attention heads per block, each d_model / n_heads = 64 wide
    d_ff: int = 3072  # feed-forward hidden width, 4 x d_model
    max_len: int = 1024  # context: learned positions exist only up to here (GPT-1: 512)
    dropout: float = 0.1  # on embeddings, attention weights and each sublayer's output
    # pre-LN (GPT-2) with a final LayerNorm; False: post-LN, no final norm (GPT-1)
    norm_first: bool = True
    activation: str = "gelu_tanh"  # GPT-2's tanh approximation of GELU
    layer_norm_eps: float = 1e-5

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_len"):
            require_size(name, getattr(self, name))
        require_heads(self.d_model, self.n_heads)
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got "
                f"{self.activation!r}"
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be > 0, got {self.layer_norm_eps}")

    @classmethod
    def gpt1(cls, **changes) -> "GPTConfig":
        """GPT-1 (Radford et al., 2018): 12 layers, 768 wide, 12 heads, context 512,
        post-LN, a 40,478-token BPE."""
        gpt1 = dict(vocab_size=40478, max_len=512, norm_first=False, activation="gelu")
        return cls(**{**gpt1, **changes})

    @classmethod
    def gpt2(cls, size: str = "small", **changes) -> "GPTConfig":
        """GPT-2 (Radford et al., 2019): "small" (124 M), "medium" (355 M), "large" (774
        M) or "xl" (1.5 B)."""
        sizes = {
            "small": (768, 12, 12),
            "medium": (1024, 24, 16),
            "large": (1280, 36, 20),
            "xl": (1600, 48, 25),
        }
        if size not in sizes:
            raise ValueError(f"size must be one of {list(sizes)}, got {size!r}")
        C, L, H = sizes[size]
        return cls(**{**dict(d_model=C, n_layers=L, n_heads=H, d_ff=4 * C), **changes})

    @classmethod
    def tiny(cls, vocab_size: int, **changes) -> "GPTConfig":
        """4 layers, 128 wide, 4 heads, context 64: nanoGPT's CPU recipe, trainable on
        one core in a minute."""
        tiny = dict(
            d_model=128, n_layers=4, n_heads=4, d_ff=512, max_len=64, dropout=0.0
        )
        return cls(**{"vocab_size": vocab_size, **tiny, **changes})


def count_parameters(config: GPTConfig) -> int:
    """Parameters of ``GPT(config)``, counted on the meta device (nothing allocated);
    the tied output counts once."""
    with torch.device("meta"):
        model = GPT(config)
    return sum(parameter.numel() for parameter in model.parameters())


def init_gpt_weights(module: nn.Module) -> None:
    """GPT-2's init: Linear and Embedding weights ~ N(0, 0.02), biases 0; LayerNorm
    keeps torch's 1 and 0."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class GPT(nn.Module):
    """The decoder: embeddings, n_layers causal blocks, (pre-LN: a final LayerNorm),
    logits through W_e^T."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = LearnedPositions(config.max_len, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        sizes = (config.d_model, config.n_heads, config.d_ff, config.dropout)
        options = dict(norm_first=config.norm_first, activation=config.activation)
        self.layers = nn.ModuleList(
            TransformerBlock(*sizes, **options, layer_norm_eps=config.layer_norm_eps)
            for _ in range(config.n_layers)
        )
        # Pre-LN leaves the residual stream unnormalised after the last block, so GPT-2
        # adds one more LayerNorm.
        final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.final_norm = final_norm if config.norm_first else None
        self.apply(init_gpt_weights)
        # GPT-2 scales the init of each residual branch's last projection by 1/sqrt(2
        # n_layers): every block adds two branches to the residual stream, and this
        # keeps its variance from growing with depth.
        std = 0.02 / (2 * config.n_layers) ** 0.5
        for layer in self.layers:
            for projection in (layer.attention.out_proj, layer.feed_forward.down_proj):
                nn.init.normal_(projection.weight, mean=0.0, std=std)

    def hidden_states(self, input_ids: torch.Tensor, cache: KVCache | None = None):
        """(B, T) ids -> (B, T, C), the last block's output (after the final norm, if
        any)."""
        require_ids("input_ids", input_ids, self.config.vocab_size, "vocab_size")
        offset = 0 if cache is None else cache.length  # tokens already processed
        T = input_ids.shape[1]
        require_context("input_ids", T, self.config.max_len, offset)
        # (B, T, C) + (T, C)
        x = self.token_embedding(input_ids) + self.position_embedding(T, offset)
        x = self.dropout(x)
        for index, layer in enumerate(self.layers):
            # position offset + i sees keys <= it
            x = layer(x, causal=True, cache=cache, cache_layer=index)
        return x if self.final_norm is None else self.final_norm(x)

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None):
        """(B, T) ids -> (B, T, V) logits; with a cache, only the new tokens are given
        and scored."""
        x = self.hidden_states(input_ids, cache)
        # tied output: (B, T, C) @ (C, V) -> (B, T, V)
        return x @ self.token_embedding.weight.T


def language_model_loss(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """L1 of GPT-1, as a mean: the cross-entropy of each position's prediction of the
    next token, (B, T, V) and (B, T) -> scalar. Position t predicts token t + 1, so the
    last position has no target.

    >>> logits = torch.zeros(1, 3, 5)  # a uniform guess over 5 tokens
    >>> round(language_model_loss(logits, torch.tensor([[1, 2, 3]])).item(), 4)  # ln 5
    1.6094
    """
    # A single token has no next token: the mean over no targets would be NaN.
    if logits.shape[:2] != input_ids.shape or input_ids.shape[1] < 2:
        raise ValueError(
            "language_model_loss needs logits (B, T, V) and input_ids (B, T), T >= 2, "
            f"got {tuple(logits.shape)} and {tuple(input_ids.shape)}"
        )
    return F.cross_entropy(logits[:, :-1].flatten(0, 1), input_ids[:, 1:].flatten())
