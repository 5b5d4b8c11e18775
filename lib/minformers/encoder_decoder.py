"""The original encoder-decoder Transformer (Vaswani et al., 2017): an encoder over the
source, and a decoder with causal self-attention, cross-attention over the encoder's
output, and a feed-forward network.

Over 350 lines: the encoder, the decoder with its cross-attention, and the loss are one
model, kept together as bert.py and gpt.py keep theirs.

    memory = encoder(embed(source) * sqrt(C) + PE)            # (B, S, C), sees all
    h = decoder(embed(target_inputs) * sqrt(C) + PE, memory)  # (B, T, C), causal
    logits = h W_out                                          # (B, T, V_target)

Training uses teacher forcing: the decoder reads the target shifted right by one
(``shift_right``) and predicts it whole in one pass. Token ids 0, 1, 2 are <pad>, <s>
and </s> in both vocabularies. Shape legend: B batch, S source length, T target length,
C channels = d_model, H heads, V vocab size.

    >>> config = TransformerConfig.tiny(source_vocab_size=20, target_vocab_size=30)
    >>> model = EncoderDecoder(config)
    >>> source = torch.tensor([[5, 6, 7, 2]])  # ... </s>
    >>> # decoder inputs <s> 9 9 -> (B, T, V_target)
    >>> model(source, torch.tensor([[1, 9, 9]])).shape
    torch.Size([1, 3, 30])
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.attention import MultiHeadAttention
from minformers.blocks import ACTIVATIONS, FeedForward, TransformerBlock
from minformers.kv_cache import KVCache
from minformers.masks import causal_mask
from minformers.positions import SinusoidalPositions
from minformers.support.arguments import (
    require_context,
    require_heads,
    require_ids,
    require_size,
)

PAD, BOS, EOS = 0, 1, 2  # the same special ids in the source and target vocabularies


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of an encoder-decoder; the defaults are the paper's base model (65 M
    parameters with its shared 37,000-token vocabulary)."""

    # source vocabulary, special ids 0-2 included: the paper's English-German BPE
    source_vocab_size: int = 37000
    # target vocabulary: the same 37,000 tokens, since the paper shares one vocabulary
    target_vocab_size: int = 37000
    d_model: int = 512  # C, width of every hidden state in both stacks
    n_heads: int = 8  # H attention heads per sublayer, each C / H = 64 wide
    n_encoder_layers: int = 6  # encoder blocks: the paper's N = 6
    n_decoder_layers: int = 6  # decoder blocks: N = 6 as well
    d_ff: int = 2048  # feed-forward hidden width, 4 x C as in the paper
    # longest source or target: the sinusoid table is built this long
    max_len: int = 512
    # on embeddings and every sublayer's output: the paper's P_drop
    dropout: float = 0.1
    # post-LN LN(x + f(x)), as in the paper; True: pre-LN, a final LayerNorm per stack
    norm_first: bool = False
    # one table for source and target (the paper's shared vocabulary); separate tables,
    # the default, suit two languages with their own vocabularies
    share_embeddings: bool = False
    # the output layer reuses the target embedding, as in the paper
    tie_output: bool = True
    activation: str = "relu"  # of the feed-forward network: the paper's ReLU
    layer_norm_eps: float = 1e-5  # torch's default, as in torch.nn.Transformer

    def __post_init__(self):
        for name in (
            "source_vocab_size",
            "target_vocab_size",
            "d_model",
            "n_heads",
            "n_encoder_layers",
            "n_decoder_layers",
            "d_ff",
            "max_len",
        ):
            require_size(
                name,
                getattr(self, name),
                minimum=3 if name.endswith("vocab_size") else 1,
            )
        require_heads(self.d_model, self.n_heads)
        if self.share_embeddings and self.source_vocab_size != self.target_vocab_size:
            raise ValueError(
                "share_embeddings needs source_vocab_size == target_vocab_size, got "
                f"{self.source_vocab_size} and {self.target_vocab_size}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got "
                f"{self.activation!r}"
            )

    @classmethod
    def base(cls, **changes) -> "TransformerConfig":
        """The paper's base model: 6 + 6 layers, 512 wide, 8 heads, one embedding
        table shared by source and target."""
        return cls(**{"share_embeddings": True, **changes})

    @classmethod
    def tiny(
        cls, source_vocab_size: int, target_vocab_size: int, **changes
    ) -> "TransformerConfig":
        """2 + 2 layers, 64 wide, 4 heads, no dropout: it trains in a minute on one
        CPU core."""
        sizes = {
            "d_model": 64,
            "n_heads": 4,
            "n_encoder_layers": 2,
            "n_decoder_layers": 2,
            "d_ff": 256,
            "max_len": 64,
            "dropout": 0.0,
        }
        return cls(
            source_vocab_size=source_vocab_size,
            target_vocab_size=target_vocab_size,
            **{**sizes, **changes},
        )


class DecoderBlock(nn.Module):
    """Causal self-attention, cross-attention over the encoder's output, feed-forward;
    each a residual sublayer, post-LN or pre-LN as in ``TransformerBlock``. Matches
    ``torch.nn.TransformerDecoderLayer(batch_first=True)`` with the same weights (norm1,
    norm2, norm3 = our three norms, in this order)."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.self_attention_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.cross_attention = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attention_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.feed_forward = FeedForward(
            d_model, d_ff, activation=activation, dropout=dropout
        )
        self.feed_forward_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        # on both attention sublayers' outputs; FeedForward has its own
        self.dropout = nn.Dropout(dropout)
        # (B, H, T, S) of the last call, if asked to keep them
        self.cross_weights: torch.Tensor | None = None

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor,
        memory_mask: torch.Tensor,
        cache: KVCache | None = None,
        cache_layer: int = 0,
        keep_weights: bool = False,
    ) -> torch.Tensor:
        """x: (B, T, C) target states; memory: (B, S, C) encoder output. Masks are bool,
        True = may attend: self_mask broadcastable to (B, H, T, T_k), memory_mask to
        (B, H, T, S). Returns (B, T, C)."""

        def self_attend(h):
            return self.dropout(
                self.self_attention(
                    h, mask=self_mask, cache=cache, cache_layer=cache_layer
                )
            )

        def cross_attend(h):
            # without the weights, the attention runs in torch's fused kernel
            if not keep_weights:
                self.cross_weights = None
                return self.dropout(self.cross_attention(h, memory, mask=memory_mask))
            output, weights = self.cross_attention(
                h, memory, mask=memory_mask, return_weights=True
            )
            self.cross_weights = weights.detach()
            return self.dropout(output)

        sublayers = (
            (self_attend, self.self_attention_norm),
            (cross_attend, self.cross_attention_norm),
            (self.feed_forward, self.feed_forward_norm),
        )
        for sublayer, norm in sublayers:
            x = x + sublayer(norm(x)) if self.norm_first else norm(x + sublayer(x))
        return x


class EncoderDecoder(nn.Module):
    """Embeddings (scaled by sqrt(C)) plus sinusoidal positions, an encoder stack, a
    decoder stack, and an output layer tied to the target embedding (or its own, with
    ``tie_output=False``)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        C = config.d_model
        self.source_embedding = nn.Embedding(config.source_vocab_size, C)
        self.target_embedding = (
            self.source_embedding
            if config.share_embeddings
            else nn.Embedding(config.target_vocab_size, C)
        )
        self.positions = SinusoidalPositions(config.max_len, C)
        self.dropout = nn.Dropout(config.dropout)
        sizes = (C, config.n_heads, config.d_ff, config.dropout)
        options = {
            "norm_first": config.norm_first,
            "activation": config.activation,
            "layer_norm_eps": config.layer_norm_eps,
        }
        self.encoder_layers = nn.ModuleList(
            TransformerBlock(*sizes, **options) for _ in range(config.n_encoder_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderBlock(*sizes, **options) for _ in range(config.n_decoder_layers)
        )
        # Pre-LN leaves each stack's output unnormalised, so each stack ends in a
        # LayerNorm of its own, as torch.nn.Transformer's do.
        final_norm = (
            (lambda: nn.LayerNorm(C, eps=config.layer_norm_eps))
            if config.norm_first
            else (lambda: None)
        )
        self.encoder_norm, self.decoder_norm = final_norm(), final_norm()
        self.output = (
            None
            if config.tie_output
            else nn.Linear(C, config.target_vocab_size, bias=False)
        )
        for name, parameter in self.named_parameters():
            if parameter.dim() > 1:
                # as torch.nn.Transformer initialises its matrices
                nn.init.xavier_uniform_(parameter)
            if name.endswith("embedding.weight"):
                # times sqrt(C) in embed: unit variance
                nn.init.normal_(parameter, mean=0.0, std=C**-0.5)

    def _embed(
        self, table: nn.Embedding, ids: torch.Tensor, offset: int = 0
    ) -> torch.Tensor:
        # (T, C)
        positions = self.positions(
            torch.arange(offset, offset + ids.shape[1], device=ids.device)
        )
        # (B, T, C)
        return self.dropout(table(ids) * math.sqrt(self.config.d_model) + positions)

    def encode(self, source_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, S) source ids, right-padded with PAD -> (memory (B, S, C), memory_mask
        (B, 1, 1, S))."""
        vocab_size = self.config.source_vocab_size
        require_ids("source_ids", source_ids, vocab_size, "source_vocab_size")
        require_context("source_ids", source_ids.shape[1], self.config.max_len)
        # (B, S) -> (B, 1, 1, S): no query reads padding
        memory_mask = (source_ids != PAD)[:, None, None, :]
        x = self._embed(self.source_embedding, source_ids)
        for layer in self.encoder_layers:
            x = layer(x, mask=memory_mask)
        return (x if self.encoder_norm is None else self.encoder_norm(x)), memory_mask

    def decode(
        self,
        target_ids: torch.Tensor,
        memory: torch.Tensor,
        memory_mask: torch.Tensor,
        cache: KVCache | None = None,
        keep_weights: bool = False,
    ) -> torch.Tensor:
        """(B, T) decoder inputs (starting with BOS) -> (B, T, V) logits. With a
        ``cache``, give only the new tokens; the earlier ones' keys and values come from
        it. ``keep_weights`` leaves each decoder layer's cross-attention weights in its
        ``cross_weights``."""
        vocab_size = self.config.target_vocab_size
        require_ids("target_ids", target_ids, vocab_size, "target_vocab_size")
        offset = 0 if cache is None else cache.length
        T = target_ids.shape[1]
        require_context("target_ids", T, self.config.max_len, offset)
        x = self._embed(self.target_embedding, target_ids, offset)
        self_mask = causal_mask(T, offset + T, device=target_ids.device)  # (T, T_k)
        for index, layer in enumerate(self.decoder_layers):
            x = layer(
                x,
                memory,
                self_mask,
                memory_mask,
                cache=cache,
                cache_layer=index,
                keep_weights=keep_weights,
            )
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        if self.output is not None:
            return self.output(x)
        # tied: (B, T, C) @ (C, V) -> (B, T, V)
        return x @ self.target_embedding.weight.T

    def forward(
        self, source_ids: torch.Tensor, target_inputs: torch.Tensor
    ) -> torch.Tensor:
        """Teacher forcing: (B, S) sources and (B, T) decoder inputs -> (B, T, V)
        next-token logits."""
        memory, memory_mask = self.encode(source_ids)
        return self.decode(target_inputs, memory, memory_mask)


def count_parameters(config: TransformerConfig) -> int:
    """Parameters of ``EncoderDecoder(config)``, counted on the meta device; a shared
    table counts once.

    >>> # the paper's Table 3 says 65 M
    >>> round(count_parameters(TransformerConfig.base()) / 1e6, 1)
    63.1
    """
    with torch.device("meta"):
        model = EncoderDecoder(config)
    return sum(parameter.numel() for parameter in model.parameters())


def shift_right(targets: torch.Tensor) -> torch.Tensor:
    """Decoder inputs for teacher forcing: BOS, then the targets without their last
    token, (B, T) -> (B, T).

    >>> shift_right(torch.tensor([[7, 8, EOS, PAD]]))
    tensor([[1, 7, 8, 2]])
    """
    return torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1]], dim=1)


def sequence_loss(
    logits: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over the real target tokens (PAD ignored): (B, T, V) logits
    and (B, T) targets -> scalar. With ``label_smoothing`` eps, each target puts 1 - eps
    on the right token and spreads eps uniformly (the paper: 0.1).

    >>> logits = torch.tensor([[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]])  # (1, 2, 3)
    >>> round(sequence_loss(logits, torch.tensor([[1, PAD]])).item(), 4)  # log 3
    1.0986
    """
    if logits.dim() != 3 or logits.shape[:2] != targets.shape:
        raise ValueError(
            f"logits must be (B, T, V) for targets (B, T), got {tuple(logits.shape)} "
            f"and {tuple(targets.shape)}"
        )
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
    return F.cross_entropy(
        logits.flatten(0, 1),
        targets.flatten(),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
    )
