"""Runtime: seeding makes every generator repeat, and the thread count is what was asked."""

import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from minformers.support.runtime import DEFAULT_THREADS, default_device, seed_everything


@pytest.fixture(autouse=True)
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)



def draws():
    return random.random(), np.random.rand(3).tolist(), torch.randn(3).tolist()


def test_same_seed_same_draws(capsys):
    info = seed_everything(7, threads=1)
    first = draws()
    seed_everything(7)
    assert draws() == first
    seed_everything(8)
    assert draws() != first
    assert info == {"seed": 7, "torch": torch.__version__, "threads": 1, "device": default_device()}
    line = capsys.readouterr().out.splitlines()[0]
    assert line == f"seed 7 | torch {torch.__version__} | 1 thread(s) | {default_device()}"


def test_threads_are_set():
    assert seed_everything(0, threads=2)["threads"] == 2
    assert torch.get_num_threads() == 2
    seed_everything(0)
    assert torch.get_num_threads() == DEFAULT_THREADS


CORES = len(os.sched_getaffinity(0))


def default_threads(setting: str | None, restriction: tuple[str, ...] = ()) -> int:
    """DEFAULT_THREADS read in a fresh interpreter (it is fixed when minformers.support.runtime is first imported),
    with MINFORMERS_THREADS set to `setting` (None: unset), under `restriction` (say, taskset)."""
    environment = {key: value for key, value in os.environ.items() if key != "MINFORMERS_THREADS"}
    if setting is not None:
        environment["MINFORMERS_THREADS"] = setting
    code = "from minformers.support.runtime import DEFAULT_THREADS; print(DEFAULT_THREADS)"
    command = [*restriction, sys.executable, "-c", code]
    return int(subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout)


@pytest.mark.parametrize(("setting", "expected"), [(None, min(2, CORES)), ("1", 1), ("3", 3)])
def test_default_is_both_cores_unless_the_environment_says_otherwise(setting, expected):
    assert default_threads(setting) == expected


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) is not installed")
def test_a_process_allowed_one_core_takes_one_thread():
    """benchmarks/bench_clock.py runs pages under `taskset -c 0` as a slower machine: two threads on one core would
    make that machine slower than any real one."""
    assert default_threads(None, ("taskset", "-c", "0")) == 1


def test_default_device():
    assert default_device() == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"seed": -1}, ValueError, "seed must be >= 0"),
        ({"seed": 2**32}, ValueError, "seed must be < 2\\*\\*32"),
        ({"seed": 1.5}, TypeError, "seed must be an int"),
        ({"seed": 0, "threads": 0}, ValueError, "threads must be >= 1"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        seed_everything(**kwargs)
