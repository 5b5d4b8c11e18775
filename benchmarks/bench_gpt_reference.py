"""Our GPT against a plain PyTorch GPT of the same shape, written below: one training step each, in this run.

The plain GPT is what one would write without a course library: one module per concept, q, k and v as one Linear,
torch's fused F.scaled_dot_product_attention with is_causal, no argument checks, no KV cache. It gets our weights, so
both compute the same function. nanoGPT's CPU configuration as in bench_gpt (4 layers, 4 heads, d_model 128, block 64,
batch 12, dropout 0), with each GELU: exact (erf) and GPT-2's tanh approximation, our GPTConfig's default. The four
models take turns (bench_gpt.taking_turns), so a slow moment of the machine falls on all of them. Prints each step
time, the ratio ours / plain for each activation, and the ratio tanh / exact for each model.

    .venv/bin/python benchmarks/bench_gpt_reference.py
"""

import torch
import torch.nn.functional as F
from bench_gpt import BATCH, ROUNDS, taking_turns, training_step
from torch import nn

from minformers.gpt import GPT, GPTConfig
from minformers.recipes.shakespeare_gpt import shakespeare_characters
from minformers.support.runtime import seed_everything

ACTIVATIONS = ("gelu_tanh", "gelu")  # our GPTConfig's names; the plain GPT passes torch's `approximate`
REPEATS = 5  # per round; fewer than bench_gpt's 9, as four models take turns here, not two


class PlainAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        # (B, T, 3C) -> three (B, T, C) -> each (B, H, T, D)
        q, k, v = (part.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
                   for part in self.qkv(x).split(C, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, H, T, D) -> (B, T, C)


class PlainBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, approximate: str):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = PlainAttention(d_model, n_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(approximate=approximate), nn.Linear(d_ff, d_model))

    def forward(self, x):  # pre-LN, as GPT-2
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PlainGPT(nn.Module):
    """Token + learned position embeddings, pre-LN blocks, a final LayerNorm, the output tied to the embedding."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        approximate = {"gelu_tanh": "tanh", "gelu": "none"}[config.activation]
        self.tokens = nn.Embedding(config.vocab_size, config.d_model)
        self.positions = nn.Embedding(config.max_len, config.d_model)
        self.blocks = nn.Sequential(*(PlainBlock(config.d_model, config.n_heads, config.d_ff, approximate)
                                      for _ in range(config.n_layers)))
        self.norm = nn.LayerNorm(config.d_model)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))  # (B, T, C) + (T, C)
        return self.norm(self.blocks(x)) @ self.tokens.weight.T  # (B, T, C) @ (C, V) -> (B, T, V)


@torch.no_grad()
def copy_weights(ours: GPT, plain: PlainGPT) -> None:
    """Give `plain` the weights of `ours`, with our q, k and v projections stacked into its one `qkv`."""
    plain.tokens.weight.copy_(ours.token_embedding.weight)
    plain.positions.weight.copy_(ours.position_embedding.embedding.weight)
    plain.norm.load_state_dict(ours.final_norm.state_dict())
    for layer, block in zip(ours.layers, plain.blocks, strict=True):
        projections = (layer.attention.q_proj, layer.attention.k_proj, layer.attention.v_proj)
        block.attention.qkv.weight.copy_(torch.cat([projection.weight for projection in projections]))
        block.attention.qkv.bias.copy_(torch.cat([projection.bias for projection in projections]))
        pairs = ((block.attention.out, layer.attention.out_proj), (block.norm1, layer.attention_norm),
                 (block.norm2, layer.feed_forward_norm), (block.mlp[0], layer.feed_forward.up_proj),
                 (block.mlp[2], layer.feed_forward.down_proj))
        for theirs, mine in pairs:
            theirs.load_state_dict(mine.state_dict())


def main() -> None:
    threads = seed_everything(0)["threads"]
    vocab_size = shakespeare_characters().tokenizer.vocab_size
    models, gaps = {}, []
    for activation in ACTIVATIONS:
        config = GPTConfig.tiny(vocab_size=vocab_size, activation=activation)  # nanoGPT's CPU recipe, dropout 0
        ours, plain = GPT(config).train(), PlainGPT(config).train()
        copy_weights(ours, plain)
        ids = torch.randint(0, vocab_size, (2, config.max_len))
        with torch.no_grad():
            gaps.append((ours(ids) - plain(ids)).abs().max().item())
        models[("ours", activation)], models[("plain", activation)] = ours, plain
    steps = [training_step(model, model) for model in models.values()]
    seconds = dict(zip(models, taking_turns(steps, repeats=REPEATS), strict=True))

    print(f"one training step, batch {BATCH} x {config.max_len}, {threads} thread(s) "
          f"(median of {ROUNDS} alternating rounds of {REPEATS}); same weights, max |logit gap| {max(gaps):.1e}")
    for activation in ACTIVATIONS:
        ours, plain = seconds[("ours", activation)], seconds[("plain", activation)]
        print(f"  {activation:9s}  ours {1000 * ours:6.1f} ms  plain {1000 * plain:6.1f} ms  "
              f"ours / plain {ours / plain:.2f}x")
    for name in ("ours", "plain"):
        print(f"  {name:5s} tanh GELU / exact GELU: {seconds[(name, 'gelu_tanh')] / seconds[(name, 'gelu')]:.2f}x")


if __name__ == "__main__":
    main()
