"""The course's training loop, ``minformers.train.train``, unchanged, on several
processes: the model is wrapped in DistributedDataParallel and every process reads its
own share of each global batch.

One process is the reference; torchrun starts several:

    python -m minformers.ddp_train --steps 20
    torchrun --standalone --nproc_per_node 2 -m minformers.ddp_train --steps 20

The first prints the reference losses; the second runs two CPU processes over gloo.
On a machine with 8 GPUs, ``--nproc_per_node 8`` with ``--device cuda`` uses nccl.

With the same global batch, every run prints the same losses (up to float rounding): DDP
averages the gradients of the shards, which is the gradient of the whole batch's mean
loss, so every process takes the same AdamW step.

The task is tiny on purpose: rows that count up by a fixed stride modulo the vocabulary,
which a small GPT learns in a few dozen steps.

    >>> counting_batch(step=0, batch_size=2, length=6, vocab_size=10)
    tensor([[4, 7, 0, 3, 6, 9],
            [9, 6, 3, 0, 7, 4]])
"""

import argparse
import contextlib
import io
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from minformers.distributed import shard
from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.train import TrainConfig, train

VOCAB_SIZE = 32  # token ids 0..31
LENGTH = 32  # tokens per row, the tiny GPT's context


def counting_batch(
    step: int, batch_size: int, length: int = LENGTH, vocab_size: int = VOCAB_SIZE
) -> torch.Tensor:
    """(batch_size, length) ids; row b is start_b, start_b + stride_b, ... modulo
    vocab_size, drawn from a generator seeded by ``step``, so every process (and every
    run) sees the same global batch at a step."""
    generator = torch.Generator().manual_seed(step)
    start = torch.randint(0, vocab_size, (batch_size, 1), generator=generator)  # (B, 1)
    # (B, 1)
    stride = torch.randint(1, vocab_size, (batch_size, 1), generator=generator)
    # (B, 1) + (B, 1) * (T,) -> (B, T)
    return (start + stride * torch.arange(length)) % vocab_size


def next_token_loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The GPT loss: predict each next token of ``ids`` (B, T)."""
    return language_model_loss(model(ids), ids)


def tiny_gpt(seed: int = 0) -> GPT:
    """A 2-layer, 64-wide GPT for the counting task; the same seed gives the same
    weights in every process."""
    torch.manual_seed(seed)
    return GPT(
        GPTConfig.tiny(
            vocab_size=VOCAB_SIZE,
            n_layers=2,
            d_model=64,
            n_heads=4,
            d_ff=256,
            max_len=LENGTH,
        )
    )


def train_config(steps: int = 30, lr: float = 1e-2) -> TrainConfig:
    """The schedule of every run of this script: a short warmup, then cosine decay,
    evaluated only at the end."""
    return TrainConfig(
        steps=steps, lr=lr, warmup_steps=max(1, steps // 10), eval_every=steps
    )


def run(
    steps: int = 30,
    global_batch: int = 16,
    lr: float = 1e-2,
    seed: int = 0,
    device: str = "cpu",
    dtype: str = "float32",
) -> list[float]:
    """Train the tiny GPT for ``steps`` steps on global batches of ``global_batch``
    rows; return the loss of each step's whole global batch. Under torchrun (which sets
    WORLD_SIZE, RANK and LOCAL_RANK) each process joins the group (gloo on CPU, nccl on
    CUDA), wraps the model in DDP and trains on its rows; otherwise it trains alone.
    ``dtype`` "float64" makes two runs that add the same numbers in different orders
    agree to ~1e-12 rather than drift apart from float32 rounding."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    cuda = device.startswith("cuda")
    if cuda:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"  # one GPU per process
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)
    if world_size > 1:
        dist.init_process_group("nccl" if cuda else "gloo")
    model = tiny_gpt(seed).to(device=device, dtype=getattr(torch, dtype))
    if world_size > 1:
        model = DistributedDataParallel(
            model, device_ids=[torch.cuda.current_device()] if cuda else None
        )

    def batch_for_step(step: int) -> torch.Tensor:
        return shard(counting_batch(step, global_batch), rank, world_size).to(device)

    config = train_config(steps, lr)
    # one log, rank 0's
    quiet = (
        contextlib.redirect_stderr(io.StringIO())
        if rank > 0
        else contextlib.nullcontext()
    )
    with quiet:
        history = train(model, batch_for_step, next_token_loss, config, progress=False)
    # This process's losses: each a mean over its own rows only.
    losses = torch.tensor(history.train["loss"], dtype=torch.float64, device=device)
    if world_size > 1:
        # the mean of equal-sized shards' means is the global batch's mean
        dist.all_reduce(losses)
        losses /= world_size
        dist.destroy_process_group()
    return losses.tolist()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--global-batch",
        type=int,
        default=16,
        help="rows per step, over all processes together",
    )
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu (gloo), or cuda for one GPU per process (nccl)",
    )
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument(
        "--output", type=Path, help="rank 0 writes the losses here as JSON"
    )
    arguments = parser.parse_args(argv)
    losses = run(
        arguments.steps,
        arguments.global_batch,
        arguments.lr,
        arguments.seed,
        arguments.device,
        arguments.dtype,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        print(
            f"{world_size} process(es) | global batch {arguments.global_batch} | "
            "losses " + " ".join(f"{loss:.4f}" for loss in losses)
        )
        if arguments.output:
            arguments.output.write_text(
                json.dumps({"world_size": world_size, "losses": losses})
            )


if __name__ == "__main__":
    main()
