"""Llama (Touvron et al., 2023): the decoder-only transformer that most open models
after GPT-3 copy. Against GPT-2 it changes four things: RMSNorm before each sublayer,
rotary position embeddings (RoPE) on queries and keys instead of learned positions, a
SwiGLU feed-forward, and grouped-query attention (GQA); no Linear has a bias.

Over 350 lines: RMSNorm, RoPE, SwiGLU and grouped-query attention, each small, kept in
the model they make up.

Shape legend: B batch, T time (the new tokens), S = offset + T (keys: cached and new),
C channels = d_model, H query heads, H_kv key/value heads, G = H / H_kv query heads per
key/value head, D head dim = C / H, F = d_ff, V vocab size. Masks follow
``minformers.masks`` (bool, True = may attend).

    >>> model = LlamaForCausalLM(LlamaConfig.tiny(vocab_size=100)).eval()
    >>> model(torch.tensor([[1, 5, 7]])).shape  # (B, T) ids -> (B, T, V) logits
    torch.Size([1, 3, 100])
    >>> # SmolLM2-135M: 30 layers, 576 wide, embeddings tied
    >>> count_parameters(LlamaConfig.smollm2_135m())
    134515008
    >>> count_parameters(LlamaConfig())  # the defaults are Llama-7B's
    6738415616
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.kv_cache import KVCache
from minformers.masks import causal_mask
from minformers.support.arguments import (
    require_context,
    require_heads,
    require_ids,
    require_size,
)


@dataclass(frozen=True)
class LlamaConfig:
    """Sizes of a Llama model. The defaults are Llama-7B's (the first Llama), as are
    those of ``transformers.LlamaConfig``.

    >>> LlamaConfig(n_heads=32, n_kv_heads=6)
    Traceback (most recent call last):
    ValueError: n_heads must be divisible by n_kv_heads, got 32 and 6
    """

    vocab_size: int = 32000  # Llama's SentencePiece vocabulary
    d_model: int = 4096  # C, width of every hidden state; 4096 = 32 heads x 128
    n_layers: int = 32  # number of decoder blocks
    n_heads: int = 32  # H query heads per block, each of width D = d_model / n_heads
    # H_kv key/value heads, each shared by H / H_kv query heads; Llama-7B has no GQA
    n_kv_heads: int = 32
    # F, hidden width of SwiGLU: about 8/3 x d_model, so that its three matrices cost
    # what a GELU network's two of width 4 x d_model do
    d_ff: int = 11008
    # longest context, Llama's training length: RoPE has no table, but the model never
    # saw positions past it
    max_len: int = 2048
    # RoPE base: the slowest of the D/2 rotations turns about once per 2 pi theta tokens
    rope_theta: float = 10000.0
    # added to the mean square inside RMSNorm, so that an all-zero vector stays finite
    rms_norm_eps: float = 1e-6
    # LM head reuses the token embedding matrix (small models: it saves V x C weights)
    tie_embeddings: bool = False

    def __post_init__(self):
        for name in (
            "vocab_size",
            "d_model",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "d_ff",
            "max_len",
        ):
            require_size(name, getattr(self, name))
        require_heads(self.d_model, self.n_heads)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads must be divisible by n_kv_heads, got {self.n_heads} and "
                f"{self.n_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(
                "d_model / n_heads must be even (RoPE turns pairs of channels), got "
                f"{self.head_dim}"
            )
        if not self.rope_theta > 1:
            raise ValueError(f"rope_theta must be > 1, got {self.rope_theta}")
        if not self.rms_norm_eps > 0:
            raise ValueError(f"rms_norm_eps must be > 0, got {self.rms_norm_eps}")

    @property
    def head_dim(self) -> int:
        """D, the width of one head."""
        return self.d_model // self.n_heads

    @classmethod
    def tiny(cls, vocab_size: int, **changes) -> "LlamaConfig":
        """2 layers, 64 wide, 4 query heads share 2 key/value heads, tied embeddings:
        sized for one CPU core."""
        sizes = {
            "d_model": 64,
            "n_layers": 2,
            "n_heads": 4,
            "n_kv_heads": 2,
            "d_ff": 172,
            "max_len": 256,
        }
        return cls(
            **{"vocab_size": vocab_size, **sizes, "tie_embeddings": True, **changes}
        )

    @classmethod
    def smollm2_135m(cls, **changes) -> "LlamaConfig":
        """SmolLM2-135M (Allal et al., 2025), as its GGUF file's metadata gives it: 30
        layers, 576 wide, 9 query heads sharing 3 key/value heads, embeddings tied."""
        sizes = {
            "vocab_size": 49152,
            "d_model": 576,
            "n_layers": 30,
            "n_heads": 9,
            "n_kv_heads": 3,
            "d_ff": 1536,
        }
        rest = {
            "max_len": 8192,
            "rope_theta": 100000.0,
            "rms_norm_eps": 1e-5,
            "tie_embeddings": True,
        }
        return cls(**{**sizes, **rest, **changes})


def count_parameters(config: LlamaConfig) -> int:
    """Parameters of ``LlamaForCausalLM(config)``, counted on the meta device, so
    nothing is allocated. A tied LM head counts once."""
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    return sum(parameter.numel() for parameter in model.parameters())


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight (Zhang and Sennrich, 2019): LayerNorm without
    centring and without a bias.

    >>> # mean square 12.5: divide by about 3.54
    >>> RMSNorm(2)(torch.tensor([[3.0, 4.0]])).detach()
    tensor([[0.8485, 1.1314]])
    """

    def __init__(self, d_model: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The mean square in float32 even for half-precision x: squares of large
        # activations overflow float16.
        x32 = x.float()
        # (B, T, C)
        normed = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the RoPE angles p * theta^(-2i / D) for i < D / 2, each (T, D):
    the D/2 angles written twice, once for each half of a head, because channel i turns
    together with channel i + D/2.

    Float32, computed in the same order as HF's LlamaRotaryEmbedding, so the angles
    match theirs bit for bit.

    >>> # frequencies 1 and 0.1
    >>> cos, sin = rope_cos_sin(torch.tensor([0, 1]), head_dim=4, theta=100.0)
    >>> sin
    tensor([[0.0000, 0.0000, 0.0000, 0.0000],
            [0.8415, 0.0998, 0.8415, 0.0998]])
    """
    # (D/2,)
    inverse_frequency = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    )
    # (T, 1) * (D/2,) -> (T, D/2)
    angles = positions.float()[:, None] * inverse_frequency.to(positions.device)
    angles = torch.cat([angles, angles], dim=-1)  # (T, D/2) -> (T, D)
    return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dim: a quarter turn of every
    pair (x[i], x[i + D/2])."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., D) -> 2 x (..., D/2)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, theta: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn each pair of channels (i, i + D/2) of q and k by the angle
    p * theta^(-2i / D), p the absolute position.

    q: (B, H, T, D), k: (B, H_kv, T, D), positions: (T,) ints. After the turn, the score
    q_p . k_p' depends on p - p' only, so attention sees relative positions although
    each token was given its absolute one. The pairs are (i, i + D/2), HF's "rotate
    half" layout (Meta's code pairs neighbours 2i, 2i + 1; HF's converter permuted the
    weights to match).

    >>> # one head, D = 2: the single pair turns by p radians
    >>> q = k = torch.tensor([[[[1.0, 0.0]]]])
    >>> apply_rope(q, k, torch.tensor([1]), theta=10000.0)[0]
    tensor([[[[0.5403, 0.8415]]]])
    """
    assert q.shape[-2] == k.shape[-2] == positions.shape[-1]  # T tokens, T positions
    # (T, D) each, broadcast over B and heads
    cos, sin = rope_cos_sin(positions, q.shape[-1], theta)
    cos, sin = cos.to(q.dtype), sin.to(q.dtype)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer, 2020): the gate decides, channel by
    channel, how much of up(x) passes."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, C) -> (B, T, F) -> (B, T, C)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with H query heads and H_kv <= H key/value heads, each
    key/value head read by a group of G = H / H_kv consecutive query heads
    (Ainslie et al., 2023). H_kv = H is plain multi-head attention. The KV cache shrinks
    by G, which is the point: decoding one token reads the whole cache."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        C, H, H_kv, D = (
            config.d_model,
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
        )
        self.q_proj = nn.Linear(C, H * D, bias=False)
        self.k_proj = nn.Linear(C, H_kv * D, bias=False)
        self.v_proj = nn.Linear(C, H_kv * D, bias=False)
        self.out_proj = nn.Linear(H * D, C, bias=False)

    def forward(
        self, x, positions, mask, cache: KVCache | None = None, layer_index: int = 0
    ) -> torch.Tensor:
        """x: (B, T, C); positions: (T,) absolute; mask: (T, S) bool, or None for the
        plain causal mask (T = S), which torch's fused kernel applies without building
        it. Returns (B, T, C)."""
        B, T, _ = x.shape
        H, H_kv, D = self.config.n_heads, self.config.n_kv_heads, self.config.head_dim
        # (B, T, H*D) -> (B, T, H, D) -> (B, H, T, D)
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        # (B, T, H_kv*D) -> (B, H_kv, T, D)
        k = self.k_proj(x).view(B, T, H_kv, D).transpose(1, 2)
        # (B, T, H_kv*D) -> (B, H_kv, T, D)
        v = self.v_proj(x).view(B, T, H_kv, D).transpose(1, 2)
        q, k = apply_rope(q, k, positions, self.config.rope_theta)
        if cache is not None:
            # cached keys are already turned: (B, H_kv, S, D)
            k, v = cache.update(layer_index, k, v)
        # Query head h reads key/value head h // G (HF's order): torch's enable_gqa
        # shares each key/value head with its G = H / H_kv consecutive query heads,
        # without copying them G times.
        output = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=True
        )
        output = output.transpose(1, 2)  # (B, H, T, D) -> (B, T, H, D)
        return self.out_proj(output.reshape(B, T, H * D))  # (B, T, H, D) -> (B, T, C)


class LlamaBlock(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + feed_forward(norm(x)). The residual
    path is never normalised, so the signal and its gradient pass every layer unchanged
    (what lets deep stacks train without warm-up tricks)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.attention = GroupedQueryAttention(config)
        self.feed_forward_norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.feed_forward = SwiGLU(config.d_model, config.d_ff)

    def forward(
        self, x, positions, mask, cache: KVCache | None = None, layer_index: int = 0
    ) -> torch.Tensor:
        # (B, T, C)
        x = x + self.attention(
            self.attention_norm(x), positions, mask, cache, layer_index
        )
        return x + self.feed_forward(self.feed_forward_norm(x))  # (B, T, C)


def init_llama_weights(module: nn.Module) -> None:
    """HF's Llama init: Linear and Embedding weights ~ N(0, 0.02); RMSNorm weights start
    at 1 (their constructor). Weights on the meta device, which a loader fills from a
    file (``convert.llama.load_gguf_llama``), are left alone."""
    if isinstance(module, nn.Linear | nn.Embedding) and not module.weight.is_meta:
        nn.init.normal_(module.weight, mean=0.0, std=0.02)


class LlamaForCausalLM(nn.Module):
    """Token embedding, n_layers pre-norm blocks, a final RMSNorm, and the LM head:
    (B, T) ids -> (B, T, V) logits.

    With a ``KVCache``, a call processes only the new tokens and attends to the cached
    ones as well:

    >>> model = LlamaForCausalLM(LlamaConfig.tiny(vocab_size=50)).eval()
    >>> ids = torch.tensor([[3, 1, 4, 1, 5]])
    >>> cache = KVCache(model.config.n_layers)
    >>> # 4 tokens, then the 5th
    >>> prompt, last = model(ids[:, :4], cache), model(ids[:, 4:], cache)
    >>> last.shape, cache.length
    (torch.Size([1, 1, 50]), 5)
    >>> # the same as reading all 5 at once
    >>> torch.allclose(last[:, -1], model(ids)[:, -1], atol=1e-5)
    True
    """

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(LlamaBlock(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(init_llama_weights)
        if config.tie_embeddings:
            # the same Parameter: one matrix reads and writes tokens
            self.lm_head.weight = self.token_embedding.weight

    def forward(
        self, input_ids: torch.Tensor, cache: KVCache | None = None
    ) -> torch.Tensor:
        """input_ids: (B, T) ids of the new tokens; cache: the keys and values of the
        tokens before them, updated in place. Returns the logits (B, T, V) of the token
        after each new one."""
        config = self.config
        require_ids("input_ids", input_ids, config.vocab_size, "vocab_size")
        if cache is not None and cache.n_layers != config.n_layers:
            raise ValueError(
                f"cache has {cache.n_layers} layers, but the model has "
                f"n_layers={config.n_layers}"
            )
        # read once: layer 0's update below changes it
        offset = 0 if cache is None else cache.length
        T = input_ids.shape[1]
        require_context("input_ids", T, config.max_len, offset)
        # (T,) absolute positions
        positions = torch.arange(offset, offset + T, device=input_ids.device)
        # (T, S): the new tokens are the last T of S. None, with nothing cached, is the
        # square causal mask.
        mask = (
            None if offset == 0 else causal_mask(T, offset + T, device=input_ids.device)
        )
        x = self.token_embedding(input_ids)  # (B, T) -> (B, T, C)
        for layer_index, layer in enumerate(self.layers):
            x = layer(x, positions, mask, cache, layer_index)
        return self.lm_head(self.norm(x))  # (B, T, C) -> (B, T, V)
