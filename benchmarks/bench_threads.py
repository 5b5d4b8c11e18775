"""One torch thread or two? The machine has 2 cores; this measures each kind of work the book's pages do both ways.

Each model is the size its pages train, timed as one training step (forward, loss, backward, fused AdamW), median of
REPEATS after WARMUP, at 1 and at 2 threads in this same run:
- GPT: nanoGPT's CPU shape (4 layers, 128 wide), character-level, batch 12 x 64 (gpt, generation, in-context pages);
- BERT: the tiny BERT of the encoder pages, 2 layers, 128 wide, batch 16 x 32, MLM loss;
- Llama: the modern-decoder page's tiny Llama, batch 12 x 64;
- encoder-decoder: the translation page's 2 + 2 layers, 64 wide, batch 64 x 16;
- BPE training (plain Python, so threads should not matter: a check that they do not hurt);
- two runs side by side in two one-thread processes against the same two runs one after the other on two threads,
  in steps per second: the scaling sweep's narrowest and widest GPTs (its workers), and a GPT beside a Llama-style
  decoder (the modern-decoder page's seeded pairs).

minformers.support.runtime.DEFAULT_THREADS is set from what this prints; rerun it on a new machine.

    .venv/bin/python benchmarks/bench_threads.py
"""

import multiprocessing
import time
from functools import partial

import torch
import torch.nn.functional as F

from minformers.bert import BertConfig, BertForPreTraining
from minformers.bpe import train_bpe
from minformers.encoder_decoder import EncoderDecoder, TransformerConfig
from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.llama import LlamaConfig, LlamaForCausalLM
from minformers.recipes.scaling_sweep import SweepRun
from minformers.support.data import shakespeare_works
from minformers.support.measure import median_time
from minformers.support.runtime import DEFAULT_THREADS

WARMUP, REPEATS = 3, 15
SIDE_BY_SIDE_STEPS = 60  # per run, in the comparisons of workers against one process


def gpt_step():
    model, ids = GPT(GPTConfig.tiny(vocab_size=65)), torch.randint(0, 65, (12, 64))
    return model, lambda: language_model_loss(model(ids), ids)


def bert_step():
    model = BertForPreTraining(BertConfig.tiny(vocab_size=3000))
    ids, labels = torch.randint(5, 3000, (16, 32)), torch.randint(5, 3000, (16, 32))
    return model, lambda: F.cross_entropy(model(ids).mlm_logits.flatten(0, 1), labels.flatten())


def llama_step():
    model, ids = LlamaForCausalLM(LlamaConfig.tiny(vocab_size=65)), torch.randint(0, 65, (12, 64))
    return model, lambda: language_model_loss(model(ids), ids)


def encoder_decoder_step():
    model = EncoderDecoder(TransformerConfig.tiny(source_vocab_size=40, target_vocab_size=40))
    source, target = torch.randint(3, 40, (64, 16)), torch.randint(3, 40, (64, 16))
    return model, lambda: F.cross_entropy(model(source, target).flatten(0, 1), target.flatten())


def step_seconds(build, threads: int, repeats: int = REPEATS) -> float:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, loss = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        optimizer.step()

    return median_time(step, repeats=repeats, warmup=WARMUP)


def sweep_gpt_step(d_model: int):
    model, ids = GPT(SweepRun(d_model=d_model, tokens=2**20).config(vocab_size=65)), torch.randint(0, 65, (16, 64))
    return model, lambda: language_model_loss(model(ids), ids)


def sibling_llama_step():
    """The gpt page's sibling: LMRun(architecture="llama"), GPT's 4 x 128 shape, trained beside it."""
    sizes = {"d_model": 128, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "d_ff": 384, "max_len": 64}
    model, ids = LlamaForCausalLM(LlamaConfig.tiny(vocab_size=65, **sizes)), torch.randint(0, 65, (12, 64))
    return model, lambda: language_model_loss(model(ids), ids)


def run_steps(build, threads: int, barrier=None, results=None) -> float:
    """Seconds for SIDE_BY_SIDE_STEPS training steps of ``build()``'s model. With a barrier, the clock starts only once
    both workers are ready, so that the two really run side by side."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, loss = build()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    if barrier is not None:
        barrier.wait()
    started = time.perf_counter()
    for _ in range(SIDE_BY_SIDE_STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss().backward()
        optimizer.step()
    seconds = time.perf_counter() - started
    if results is not None:
        results.put(seconds)
    return seconds


def side_by_side(first, second) -> tuple[float, float]:
    """(two one-thread workers side by side, one process with two threads running both in turn): steps per second."""
    context = multiprocessing.get_context("spawn")  # as parallel.map_in_workers starts its workers
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=run_steps, args=(build, 1, barrier, results)) for build in (first, second)]
    for worker in workers:
        worker.start()
    slowest = max(results.get(), results.get())
    for worker in workers:
        worker.join()
    in_turn = run_steps(first, 2) + run_steps(second, 2)
    return 2 * SIDE_BY_SIDE_STEPS / slowest, 2 * SIDE_BY_SIDE_STEPS / in_turn


def main() -> None:
    print(f"one training step per model, median of {REPEATS}; ratio = time on 1 thread / time on 2 (above 1: 2 win)")
    print(f"  {'work':<36} {'1 thread':>10} {'2 threads':>10} {'ratio':>6}")
    steps = [("GPT 4x128, batch 12x64", gpt_step), ("BERT 2x128, batch 16x32", bert_step),
             ("Llama 2x64, batch 12x64", llama_step), ("encoder-decoder 2+2x64, 64x16", encoder_decoder_step)]
    for name, build in steps:
        one, two = step_seconds(build, 1), step_seconds(build, 2)
        print(f"  {name:<36} {1000 * one:>8.1f}ms {1000 * two:>8.1f}ms {one / two:>6.2f}")
    text = shakespeare_works()["alls_well_that_ends_well"][:133_000]
    torch.set_num_threads(1)
    one = median_time(lambda: train_bpe(text, 500), repeats=3)
    torch.set_num_threads(2)
    two = median_time(lambda: train_bpe(text, 500), repeats=3)
    print(f"  {'BPE training, 133 KB to 500 tokens':<36} {one:>9.2f}s {two:>9.2f}s {one / two:>6.2f}")
    print("two runs as two one-thread workers side by side, or one after the other on two threads")
    pairs = {"sweep GPT d_model 8, twice": (partial(sweep_gpt_step, 8),) * 2,  # the sweep's narrowest
             "sweep GPT d_model 48, twice": (partial(sweep_gpt_step, 48),) * 2,  # and widest
             "gpt page: GPT 4x128 beside Llama 4x128": (gpt_step, sibling_llama_step)}
    for name, (first, second) in pairs.items():
        workers, one_process = side_by_side(first, second)
        print(f"  {name:<40} workers {workers:6.1f} steps/s, one process {one_process:6.1f} steps/s, "
              f"ratio {workers / one_process:.2f} (above 1: the workers win)")
    print(f"minformers.support.runtime.DEFAULT_THREADS = {DEFAULT_THREADS}")


if __name__ == "__main__":
    main()
