"""Our GPT against HF's GPT2LMHeadModel on nanoGPT's CPU configuration: one training step each, in this run.

4 layers, 4 heads, d_model 128, block 64, batch 12, dropout 0, character-level Shakespeare; the book's thread count
(minformers.support.runtime.DEFAULT_THREADS); fused AdamW steps (the lib's optimizer) for both, timed as the median
of REPEATS after WARMUP, the two models taking turns so that a slow moment of the machine falls on both. Prints:
- the ratio of step times, ours / HF (goal: 0.8x or less), and tokens per second;
- achieved GFLOP/s (6 x non-embedding parameters x tokens, plus attention) as a fraction of this machine's fp32
  matmul GFLOP/s, measured here too;
- the validation loss our GPT reaches in TRAIN_SECONDS of training, beside nanoGPT's published 1.88 (about 2,000
  steps on the 1 MB tiny-Shakespeare; our text is all of Shakespeare, with six works held out).

    .venv/bin/python benchmarks/bench_gpt.py
"""

import statistics
import time

import torch
import transformers

from minformers.convert.gpt2 import hf_gpt2_config, hf_gpt2_state_dict
from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.language_modeling import random_windows
from minformers.recipes.shakespeare_gpt import shakespeare_characters
from minformers.support.measure import median_time
from minformers.support.runtime import seed_everything
from minformers.train import TrainConfig, train

BATCH, WARMUP, REPEATS, ROUNDS = 12, 3, 9, 5
TRAIN_SECONDS = 120
GOAL_RATIO = 0.8


def matmul_gflops(size: int = 512) -> float:
    """This machine's fp32 matmul speed at the current thread count: the ceiling for the step's GFLOP/s."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    return 2 * size**3 / median_time(lambda: a @ b, repeats=20, warmup=3) / 1e9


def step_flops(config: GPTConfig, batch: int) -> float:
    """Forward + backward FLOPs of one step: 6 per non-embedding parameter per token (the linear layers, the tied
    output included), plus the attention scores and weighted sums, 12 x layers x T x d_model per token."""
    T, C = config.max_len, config.d_model
    per_layer = 4 * C * C + 2 * C * config.d_ff
    linear = config.n_layers * per_layer + C * config.vocab_size  # the output layer is a matmul too
    return batch * T * (6 * linear + 12 * config.n_layers * T * C)


def training_step(model, forward):
    """One AdamW step of `model` on a fixed batch of windows, as a function to time."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    windows = random_windows(shakespeare_characters().train_ids, 64, BATCH, torch.Generator().manual_seed(0))

    def step():
        loss = language_model_loss(forward(windows), windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def taking_turns(steps: list, rounds: int = ROUNDS, repeats: int = REPEATS) -> list[float]:
    """Median seconds of each step function, timed in alternating rounds so that a slow moment hits every one."""
    times = [[] for _ in steps]
    for _ in range(rounds):
        for timings, step in zip(times, steps, strict=True):
            timings.append(median_time(step, repeats=repeats, warmup=WARMUP))
    return [statistics.median(timings) for timings in times]


def main() -> None:
    threads = seed_everything(0)["threads"]
    corpus = shakespeare_characters()
    config = GPTConfig.tiny(vocab_size=corpus.tokenizer.vocab_size)  # nanoGPT's CPU recipe, dropout 0
    ours = GPT(config).train()
    theirs = transformers.GPT2LMHeadModel(hf_gpt2_config(config)).train()
    theirs.load_state_dict(hf_gpt2_state_dict(ours), strict=False)
    ours_seconds, theirs_seconds = taking_turns(
        [training_step(ours, ours), training_step(theirs, lambda ids: theirs(ids).logits)])
    peak = matmul_gflops()
    flops = step_flops(config, BATCH)
    tokens = BATCH * config.max_len
    print(f"one training step, batch {BATCH} x {config.max_len}, {threads} thread(s) "
          f"(median of {ROUNDS} alternating rounds of {REPEATS})")
    print(f"  ours {1000 * ours_seconds:7.1f} ms  {tokens / ours_seconds:8,.0f} tokens/s  "
          f"{flops / ours_seconds / 1e9:5.1f} GFLOP/s = {flops / ours_seconds / 1e9 / peak:.0%} of matmul")
    print(f"  HF   {1000 * theirs_seconds:7.1f} ms  {tokens / theirs_seconds:8,.0f} tokens/s  "
          f"{flops / theirs_seconds / 1e9:5.1f} GFLOP/s = {flops / theirs_seconds / 1e9 / peak:.0%} of matmul")
    ratio = ours_seconds / theirs_seconds
    verdict = "met" if ratio <= GOAL_RATIO else "NOT met"
    print(f"  ratio ours / HF: {ratio:.2f}x (goal: {GOAL_RATIO}x or less: {verdict}); "
          f"machine fp32 matmul {peak:.0f} GFLOP/s")

    steps = 10_000  # the schedule's length; training stops at TRAIN_SECONDS, well before
    validation = random_windows(corpus.validation_ids, 64, 256, torch.Generator().manual_seed(12345))
    torch.manual_seed(0)
    model = GPT(config)
    started = time.perf_counter()
    steps_done = 0

    class OutOfTime(Exception):
        pass

    def batch_for_step(step):
        nonlocal steps_done
        if time.perf_counter() - started > TRAIN_SECONDS:
            raise OutOfTime  # the loop has no time limit of its own: stop it from the data side
        steps_done = step
        return random_windows(corpus.train_ids, 64, BATCH, torch.Generator().manual_seed(step))

    def loss_for_batch(model, windows):
        return language_model_loss(model(windows), windows)

    schedule = TrainConfig(steps=steps, lr=1e-3, warmup_steps=100, eval_every=steps, min_lr_ratio=1.0)
    try:
        train(model, batch_for_step, loss_for_batch, schedule, progress=False)
    except OutOfTime:
        pass
    model.eval()
    with torch.no_grad():
        loss = language_model_loss(model(validation), validation).item()
    print(f"validation loss after {TRAIN_SECONDS} s ({steps_done:,} steps, lr 1e-3 after 100 warmup steps): "
          f"{loss:.3f} (nanoGPT's CPU recipe: 1.88 after about 2,000 steps on tiny-Shakespeare)")


if __name__ == "__main__":
    main()
