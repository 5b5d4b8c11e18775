"""Training on several processes with torch.distributed: data parallelism (DDP), ZeRO-1,
tensor parallelism (Megatron-style linear layers) and a GPipe pipeline, each small
enough to read and to run on one CPU.

Data, tensor and pipeline parallelism and ZeRO are taught on one page, so they share
one file, a short section each.

Every experiment runs in real processes joined by the gloo backend on localhost.
``launch(worker, *args)`` starts them and returns what each rank's
``worker(rank, world_size, *args)`` returned; workers live in this module because a new
process can only run a function it can import. On a GPU machine the same code runs with
the nccl backend.

Shape legend: B batch, C channels (input features), F output features,
R ranks (world size), m micro-batches, p pipeline stages.

    >>> # rank 1 of 2 takes the second half of the rows
    >>> shard(torch.arange(8).view(4, 2), rank=1, world_size=2)
    tensor([[4, 5],
            [6, 7]])
    >>> # (p - 1) / (m + p - 1) = 3 / 11
    >>> round(gpipe_bubble(n_stages=4, n_microbatches=8), 4)
    0.2727
"""

import copy
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from minformers.support.arguments import require_size

# --------------------------------------------------------------------------------------
# Starting processes


def free_port() -> int:
    """A TCP port no one listens on now: the OS picks one when we bind to port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _process_main(
    rank: int, world_size: int, port: int, worker: Callable, args: tuple, folder: str
) -> None:
    """What each started process runs: join the group, call the worker, save its result
    for the parent."""
    # two processes share this machine's one core of floating point
    torch.set_num_threads(1)
    # Tensors reach a spawned process in shared memory, the same storage for every rank:
    # copy them, or one rank's optimizer step would change the others' parameters.
    args = copy.deepcopy(args)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(seconds=120),
    )
    try:
        result = worker(rank, world_size, *args)
        torch.save(result, Path(folder) / f"rank{rank}.pt")
        dist.barrier()  # nobody leaves while another rank may still need to talk to it
    finally:
        dist.destroy_process_group()


def launch(worker: Callable, *args, world_size: int = 2) -> list:
    """Run ``worker(rank, world_size, *args)`` in ``world_size`` new processes joined
    into one gloo group on this machine; return the list of their results, rank 0 first.
    ``worker`` must be importable (defined in a module).

    The processes are forked from a "fork server": a clean process started at the first
    launch, which imports torch and this module once, so later launches start in a
    fraction of a second instead of importing torch again.
    """
    require_size("world_size", world_size)
    # takes effect when the server starts, at the first launch
    mp.set_forkserver_preload(["minformers.distributed"])
    with tempfile.TemporaryDirectory() as folder:
        mp.start_processes(
            _process_main,
            args=(world_size, free_port(), worker, args, folder),
            nprocs=world_size,
            start_method="forkserver",
        )
        return [
            torch.load(Path(folder) / f"rank{rank}.pt", weights_only=False)
            for rank in range(world_size)
        ]


def start_torchrun(
    module: str, *arguments: str, processes: int = 2
) -> subprocess.Popen:
    """Start ``torchrun --standalone --nproc_per_node processes -m module arguments`` in
    the background and return at once, so this process can work while they run; read
    the result with ``torchrun_output``. Each process gets one thread, as ``launch``'s
    do, because the machine's cores are shared between them."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node", str(processes), "-m", module, *arguments]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def torchrun_output(process: subprocess.Popen, timeout: float = 300) -> str:
    """Wait for a run started by ``start_torchrun`` and return what it printed; raise
    with the end of its error log if it failed."""
    stdout, stderr = process.communicate(timeout=timeout)
    if process.returncode:
        raise RuntimeError(f"torchrun failed:\n{stderr[-3000:]}")
    return stdout


def shard(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous share of the rows of ``batch`` (what a
    DistributedSampler does for a dataset).

    (B, ...) -> (B / R, ...); B must divide evenly, so every rank's loss is a mean over
    as many examples.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    if batch.shape[0] % world_size:
        raise ValueError(
            f"batch size {batch.shape[0]} must be divisible by world_size={world_size}"
        )
    size = batch.shape[0] // world_size
    return batch[rank * size : (rank + 1) * size]


def gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every parameter's gradient, by name."""
    return {
        name: p.grad.detach().clone()
        for name, p in model.named_parameters()
        if p.grad is not None
    }


def max_difference(
    ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]
) -> float:
    """The largest absolute difference between two sets of tensors with the same
    names, such as two models' gradients.

    >>> max_difference({"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([1.5, 2.0])})
    0.5
    """
    return max((ours[name] - theirs[name]).abs().max().item() for name in theirs)


# --------------------------------------------------------------------------------------
# Data parallelism: every rank holds the whole model and reads its share of the batch


def single_process_gradients(
    model: nn.Module, batch: torch.Tensor, loss_for_batch: Callable
) -> dict:
    """The reference: gradients of the loss on the whole batch, in this process (on a
    copy: ``model`` is unchanged)."""
    model = copy.deepcopy(model)
    model.zero_grad(set_to_none=True)
    loss_for_batch(model, batch).backward()
    return gradients(model)


def average_gradients(model: nn.Module) -> None:
    """What DDP does after backward, in its plainest form: sum every gradient over the
    ranks, divide by R.

    (DDP does the same sums in buckets of many gradients, started while backward is
    still running.)
    """
    world_size = dist.get_world_size()
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
            parameter.grad /= world_size


def data_parallel_gradients(
    rank: int,
    world_size: int,
    model: nn.Module,
    batch: torch.Tensor,
    loss_for_batch: Callable,
) -> dict:
    """Worker: this rank's gradients after backward on its shard, with DDP
    and with ``average_gradients``."""
    model.zero_grad(set_to_none=True)
    by_hand = copy.deepcopy(model)
    # kept in a variable: its hooks must outlive the backward pass
    wrapped = DistributedDataParallel(model)
    loss_for_batch(wrapped, shard(batch, rank, world_size)).backward()
    loss_for_batch(by_hand, shard(batch, rank, world_size)).backward()
    average_gradients(by_hand)
    return {"ddp": gradients(model), "all_reduce": gradients(by_hand)}


# --------------------------------------------------------------------------------------
# ZeRO stage 1: the optimizer state is split across the ranks


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the tensors an optimizer keeps between steps (AdamW: two moments per
    parameter, and a step count)."""
    return sum(
        value.nbytes
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, torch.Tensor)
    )


def zero_memory(
    rank: int,
    world_size: int,
    model: nn.Module,
    batch: torch.Tensor,
    loss_for_batch: Callable,
    steps: int = 2,
    lr: float = 1e-3,
) -> dict:
    """Worker: train copies of ``model`` with DDP for ``steps`` steps, once with AdamW
    on every rank and once with ZeRO-1 (each rank keeps the AdamW state of its share of
    the parameters, updates that share, and broadcasts it). Returns this rank's
    optimizer-state bytes and final parameters for both."""
    results = {}
    for name in ("AdamW", "ZeRO-1"):
        replica = copy.deepcopy(model)
        wrapped = DistributedDataParallel(replica)
        if name == "AdamW":
            optimizer = torch.optim.AdamW(replica.parameters(), lr=lr)
        else:
            # here: its import takes a second
            from torch.distributed.optim import ZeroRedundancyOptimizer

            optimizer = ZeroRedundancyOptimizer(
                replica.parameters(), optimizer_class=torch.optim.AdamW, lr=lr
            )
        for _ in range(steps):
            loss_for_batch(wrapped, shard(batch, rank, world_size)).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        # the AdamW that holds this rank's state
        local = optimizer.optim if name == "ZeRO-1" else optimizer
        results[name] = {
            "state_bytes": optimizer_state_bytes(local),
            "parameters": {
                key: p.detach().clone() for key, p in replica.named_parameters()
            },
        }
    return results


# --------------------------------------------------------------------------------------
# Tensor parallelism: a layer's weights split over ranks (Megatron-LM's f, g, gather)


class _CopyToRanks(torch.autograd.Function):
    """Megatron's f: the input, used whole by every rank. Backward: each rank holds only
    its share of the input's gradient (from its share of the outputs), so the shares are
    summed over ranks."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class _SumOverRanks(torch.autograd.Function):
    """Megatron's g: add the ranks' partial outputs. Backward: the sum's gradient is the
    same for every term."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class _GatherFromRanks(torch.autograd.Function):
    """Concatenate the ranks' (..., F / R) outputs into (..., F). Backward: each rank
    keeps its own slice."""

    @staticmethod
    def forward(ctx, x):
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, x.contiguous())
        return torch.cat(pieces, dim=-1)  # R x (..., F / R) -> (..., F)

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()]


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b with W's rows (the output features) split over the ranks: rank r
    computes outputs [r F/R, (r + 1) F/R) from the whole input. (B, C) -> (B, F), or
    this rank's (B, F / R) if not ``gather_output``.
    """

    def __init__(
        self, linear: nn.Linear, rank: int, world_size: int, gather_output: bool = True
    ):
        super().__init__()
        if linear.out_features % world_size:
            raise ValueError(
                f"out_features={linear.out_features} must be divisible by "
                f"world_size={world_size}"
            )
        rows = linear.out_features // world_size
        # (F / R, C)
        self.weight = nn.Parameter(
            linear.weight.detach()[rank * rows : (rank + 1) * rows].clone()
        )
        # (F / R,), or None
        self.bias = (
            None
            if linear.bias is None
            else nn.Parameter(
                linear.bias.detach()[rank * rows : (rank + 1) * rows].clone()
            )
        )
        self.gather_output = gather_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (B, C) -> (B, F / R)
        y = F.linear(_CopyToRanks.apply(x), self.weight, self.bias)
        return _GatherFromRanks.apply(y) if self.gather_output else y


class RowParallelLinear(nn.Module):
    """y = x W^T + b with W's columns (the input features) split over the ranks: rank r
    multiplies its slice of the input, x[:, r C/R : (r + 1) C/R], and the partial
    products are summed over ranks. (B, C / R) -> (B, F).
    """

    def __init__(self, linear: nn.Linear, rank: int, world_size: int):
        super().__init__()
        if linear.in_features % world_size:
            raise ValueError(
                f"in_features={linear.in_features} must be divisible by "
                f"world_size={world_size}"
            )
        columns = linear.in_features // world_size
        self.weight = nn.Parameter(
            linear.weight.detach()[:, rank * columns : (rank + 1) * columns].clone()
        )
        # added once
        self.bias = (
            None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        )

    def forward(self, x_shard: torch.Tensor) -> torch.Tensor:
        # (B, C / R) -> partial (B, F) -> summed (B, F)
        y = _SumOverRanks.apply(F.linear(x_shard, self.weight))
        return y if self.bias is None else y + self.bias


def tensor_parallel_outputs(
    rank: int, world_size: int, up: nn.Linear, down: nn.Linear, x: torch.Tensor
) -> dict:
    """Worker: split ``up`` by columns and ``down`` by rows across the ranks and run the
    pieces on ``x`` (B, C).

    Returns the column-parallel output of ``up`` (gathered), the row-parallel output of
    ``down`` on the hidden features h = up(x) (each rank passing its slice of h), and a
    Megatron MLP down(gelu(up(x))): column-parallel, GELU on each rank's slice,
    row-parallel, one all-reduce in all. Also the gradients, on this rank, of the MLP's
    output sum with respect to x and to its shares of the two weights.
    """
    column = ColumnParallelLinear(up, rank, world_size)
    row = RowParallelLinear(down, rank, world_size)
    hidden = up(x).detach()  # (B, F), computed whole on every rank
    width = hidden.shape[-1] // world_size
    up_shard = ColumnParallelLinear(up, rank, world_size, gather_output=False)
    x = x.clone().requires_grad_()
    mlp = row(F.gelu(up_shard(x)))  # (B, C) -> (B, F / R) -> (B, F / R) -> (B, C)
    mlp.sum().backward()
    return {
        "column": column(x).detach(),
        "row": row(hidden[:, rank * width : (rank + 1) * width]).detach(),
        "mlp": mlp.detach(),
        "x_grad": x.grad,
        "up_grad": up_shard.weight.grad,
        "down_grad": row.weight.grad,
    }


# --------------------------------------------------------------------------------------
# Pipeline parallelism: consecutive layers on consecutive ranks, micro-batches (GPipe)


def gpipe_bubble(n_stages: int, n_microbatches: int) -> float:
    """The share of a GPipe step each stage sits idle: (p - 1) / (m + p - 1)."""
    require_size("n_stages", n_stages)
    require_size("n_microbatches", n_microbatches)
    return (n_stages - 1) / (n_microbatches + n_stages - 1)


def simulate_gpipe(
    n_stages: int,
    n_microbatches: int,
    forward_time: float = 1.0,
    backward_time: float = 1.0,
) -> list[tuple[int, str, int, float, float]]:
    """When each stage runs each micro-batch under GPipe: every stage runs all its
    forwards (micro-batch 0, 1, ...) and then all its backwards (the last micro-batch
    first). An operation starts when its stage is free and its input is ready: forward i
    on stage s needs forward i on stage s - 1; backward i on stage s needs backward i on
    stage s + 1. Returns events (stage, "F" or "B", micro-batch, start, end).

    >>> simulate_gpipe(2, 1)  # one micro-batch: the two stages take turns
    [(0, 'F', 0, 0.0, 1.0), (1, 'F', 0, 1.0, 2.0),
     (1, 'B', 0, 2.0, 3.0), (0, 'B', 0, 3.0, 4.0)]
    """
    require_size("n_stages", n_stages)
    require_size("n_microbatches", n_microbatches)
    free = [0.0] * n_stages  # when each stage finishes its latest operation
    done = {}  # (phase, stage, micro-batch) -> end time
    events = []

    def run(stage: int, phase: str, micro: int, ready: float, duration: float) -> None:
        start = max(free[stage], ready)
        free[stage] = done[phase, stage, micro] = start + duration
        events.append((stage, phase, micro, start, start + duration))

    for micro in range(n_microbatches):
        for stage in range(n_stages):
            run(stage, "F", micro, done.get(("F", stage - 1, micro), 0.0), forward_time)
    for micro in reversed(range(n_microbatches)):
        for stage in reversed(range(n_stages)):
            run(
                stage, "B", micro, done.get(("B", stage + 1, micro), 0.0), backward_time
            )
    return events


def makespan(events) -> float:
    """How long a timeline of events (stage, phase, micro-batch, start, end) takes, from
    the first start to the last end.

    >>> makespan(simulate_gpipe(2, 1))  # four operations of 1 s, one after another
    4.0
    """
    return max(event[4] for event in events) - min(event[3] for event in events)


def bubble_fraction(events) -> float:
    """Idle share of a timeline of events (stage, phase, micro-batch, start, end):
    1 - busy / (stages x makespan)."""
    stages = {event[0] for event in events}
    busy = sum(event[4] - event[3] for event in events)
    return 1 - busy / (len(stages) * makespan(events))


def peak_stashed_microbatches(events) -> list[int]:
    """For each stage 0, 1, ..., the most micro-batches whose activations it holds at
    once. A stage keeps a micro-batch's activations from its forward until its backward
    has used them, so this is its activation memory, in micro-batches. Events are
    (stage, "F" or "B", micro-batch, start, end), in any order.

    >>> # GPipe: every stage holds all m
    >>> peak_stashed_microbatches(simulate_gpipe(n_stages=2, n_microbatches=4))
    [4, 4]
    """
    peaks = []
    for stage in sorted({event[0] for event in events}):
        held = peak = 0
        for event in sorted(
            (event for event in events if event[0] == stage), key=lambda event: event[3]
        ):
            held += 1 if event[1] == "F" else -1
            peak = max(peak, held)
        peaks.append(peak)
    return peaks


def gpipe_worker(
    rank: int,
    world_size: int,
    stages: list[nn.Module],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    n_microbatches: int,
    device_seconds: float = 0.0,
) -> dict:
    """Worker: rank r is pipeline stage r and runs ``stages[r]`` on ``n_microbatches``
    micro-batches of ``inputs`` (B, C), GPipe's way, sending activations forward and
    their gradients back. The loss, on the last stage, is the MSE against ``targets``
    averaged over the micro-batches, so the gradients equal the whole batch's. Returns
    the timed events (rank, phase, micro-batch, start, end) of this stage and its
    parameters' gradients.

    ``device_seconds`` > 0 emulates a stage that owns its device: each forward then also
    waits ``device_seconds`` x (its share of the batch), and each backward twice that,
    without using the CPU. Processes that share one CPU core slow each other down
    whenever they compute at once, which hides the schedule that devices would follow.
    """
    stage, last = stages[rank], rank == world_size - 1
    # m x (B / m, C)
    micro_inputs, micro_targets = (
        inputs.chunk(n_microbatches),
        targets.chunk(n_microbatches),
    )
    received, outputs, events = [], [], []
    start = torch.tensor(time.perf_counter(), dtype=torch.float64)
    # one clock for everyone: rank 0's zero (perf_counter is system-wide on Linux)
    dist.broadcast(start, src=0)

    def timed(phase: str, micro: int, work: Callable):
        began = time.perf_counter()
        result = work()
        # a backward costs about 2 forwards
        time.sleep(device_seconds / n_microbatches * (2 if phase == "B" else 1))
        events.append(
            (
                rank,
                phase,
                micro,
                began - start.item(),
                time.perf_counter() - start.item(),
            )
        )
        return result

    for micro, x in enumerate(micro_inputs):
        if rank > 0:
            x = torch.empty_like(x)
            # waiting here is idle time, outside the timed work
            dist.recv(x, src=rank - 1)
        x.requires_grad_(rank > 0)
        if last:
            y = timed(
                "F",
                micro,
                lambda x=x, t=micro_targets[micro]: (
                    F.mse_loss(stage(x), t) / n_microbatches
                ),
            )
        else:
            y = timed("F", micro, lambda x=x: stage(x))
            dist.send(y.detach(), dst=rank + 1)
        received.append(x)
        outputs.append(y)
    for micro in reversed(range(n_microbatches)):
        grad = None
        if not last:
            grad = torch.empty_like(outputs[micro])
            dist.recv(grad, src=rank + 1)
        timed("B", micro, lambda y=outputs[micro], g=grad: y.backward(g))
        if rank > 0:
            dist.send(received[micro].grad, dst=rank - 1)
    return {"events": events, "gradients": gradients(stage)}


def gpipe_sweep(
    rank: int,
    world_size: int,
    stages: list[nn.Module],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    microbatch_counts: list[int],
    device_seconds: float = 0.0,
) -> dict[int, dict]:
    """Worker: ``gpipe_worker`` once for each number of micro-batches, on fresh
    gradients; {m: its result}. An untimed first run warms up (the first pass through a
    network allocates its buffers and is slower)."""
    results = {}
    for n_microbatches in [microbatch_counts[0], *microbatch_counts]:
        stages[rank].zero_grad(set_to_none=True)
        dist.barrier()  # every stage starts each run together
        results[n_microbatches] = gpipe_worker(
            rank, world_size, stages, inputs, targets, n_microbatches, device_seconds
        )
    return results


def sweep_events(sweep: list[dict[int, dict]]) -> dict[int, list]:
    """The whole timeline of each run of a ``gpipe_sweep``: {m: the events of every
    rank, rank 0's first}, from the list ``launch`` returns (one result per rank)."""
    return {
        m: [event for result in sweep for event in result[m]["events"]]
        for m in sweep[0]
    }
