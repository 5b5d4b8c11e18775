"""Reproducible, right-sized runs: one seed per page, printed, and a
deliberate thread count.

The course machines have 2 cores. ``make bench`` (benchmarks/bench_threads.py) times
every kind of model the pages train on 1 and on 2 threads, and 2 win for each. So every
page runs on 2 threads (``DEFAULT_THREADS``), or on fewer where the process may use
fewer cores; the exception is work split across processes (the scaling sweep's two
workers, the distributed page's two ranks), where each process takes one thread. The
environment variable MINFORMERS_THREADS overrides the default: `make test` sets it to 1
for its two test workers.
"""

import os
import random
import sys
import warnings

import numpy as np
import torch

from minformers.support.arguments import require_size

# the cores this process may run on: under `taskset` fewer than the machine has, and
# more threads than cores would only wait for each other
CORES = (
    len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
)
# 2 threads, or fewer where fewer cores are ours: the module docstring says why
DEFAULT_THREADS = int(os.environ.get("MINFORMERS_THREADS", min(2, CORES or 1)))

# In a notebook without ipywidgets, tqdm.auto warns and falls back to a text progress
# bar. The text bar is what we want (it also renders on the website), so the warning is
# only noise in every page's output.
warnings.filterwarnings("ignore", message="IProgress not found")


def default_device() -> str:
    """Return "cuda" when a GPU is visible, else "cpu". Nothing in the course
    needs a GPU."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def seed_everything(seed: int, threads: int | None = None) -> dict:
    """Seed Python's ``random``, NumPy and torch (all devices), set the torch thread
    count, print one line.

    Deterministic algorithms are left at torch's default (off): CPU kernels are
    deterministic for a fixed thread count anyway, and forcing it would reject some CUDA
    kernels.

    >>> info = seed_everything(0, threads=1)  # doctest: +ELLIPSIS
    seed 0 | torch ... | 1 thread(s) | ...
    >>> info["threads"]
    1
    """
    require_size("seed", seed, minimum=0)
    if seed >= 2**32:
        raise ValueError(f"seed must be < 2**32 (NumPy's limit), got {seed}")
    threads = DEFAULT_THREADS if threads is None else require_size("threads", threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    torch.set_num_threads(threads)
    info = {
        "seed": seed,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "device": default_device(),
    }
    print(
        f"seed {seed} | torch {info['torch']} | {info['threads']} thread(s) | "
        f"{info['device']}"
    )
    return info


def log(line: str) -> None:
    """Print a line of progress (a training step's losses, a resumed run, a finished
    sweep run) to stderr.

    A notebook shows it as it comes; the book's pages leave stderr out
    (`stderr_output: remove` in _config.yml), so the site shows results rather than the
    build's own talk. The executed notebook a page offers keeps it.
    """
    print(line, file=sys.stderr, flush=True)
