"""The build clock: how fast this machine does the book's kind of work, as one number, the machine factor.

Machines of the course's kind differ in speed by about 2x, and differently for different work, so a page's plain
seconds say little about whether it fits its budget. The clock times a fixed workload shaped like the pages' work:

- a notebook kernel started, and torch, numpy and matplotlib imported, as every page begins;
- training steps of the shared character GPT's shape (4 layers, 128 wide, context 64, batch 12) and of the shared
  encoder's (2 layers, 128 blocks of 32 tokens, MLM), on the thread count pages use, built from torch's own
  modules: the clock must not move when the lib's code does;
- BPE merges learned from the counts of a fixed text: plain Python, as the tokenizer pages are.

Each part's time divided by its time on the reference machine (REFERENCE_SECONDS) is how much slower this machine
does that kind of work; the machine factor is the mean of those ratios weighted by how much of the book each kind
of work is (WEIGHTS). A page's reference seconds are its seconds divided by the factor.

The speed of a machine of this kind wanders by 10% or more over minutes (other tenants of its host): in one CI run,
calibrations minutes apart gave 1.79 and 2.05, while the pages of two builds on such machines took the same seconds
within 4%. So the clock samples the whole build: the workload runs 3 times before it, 3 times after it, and once
before every PROBE_EVERY-th page that runs code (tools/course_site/timings.py), and the factor is the median of all
those readings. With the readings before and after only, three CI builds of 2026-11-28/29 (432118f and two of the
quantization branch) read 1.96, 1.84 and 1.64, where their pages, page by page against the first build's, ran as
factors of 1.96, 2.00 and 1.83: 0%, 8% and 11% low, each time the readings at one end of the build off. The median
of all readings gives about 2.10, 1.94 and 1.77: 7% high, 3% and 3% low, a smaller error on average and at worst.
The first build that took readings between pages (with older weights) had them read low, 1.63 to 1.87 against 1.95
before it: they scatter both ways, as the ends do.

    python tools/build_clock.py                  # measure, print the factor
    python tools/build_clock.py --json           # the same, as JSON (benchmarks/bench_clock.py)
    python tools/build_clock.py --ci-took 2480   # what a CI run of 2,480 s would take on a machine of factor 2
"""

import argparse
import collections
import json
import random
import statistics
import string
import subprocess
import sys
import time
from pathlib import Path

# Each part's seconds on the reference machine: the one on which main 2a61048's book executes in 879 s of page time.
# Measured 2026-11-28 on a development machine, idle: a clean build of 2a61048's book took 951.5 s of page time
# there (factor 951.5 / 879 = 1.0825), and the parts' medians over 3 x 5 repeats were kernel start 1.969 s, GPT
# steps 1.498 s, BERT steps 1.019 s, tokenizer 0.3915 s (4.87 s in all); each divided by 1.0825 gives the value
# here. Recalibrate the same way when the workload or the pinned torch changes.
REFERENCE_SECONDS = {"kernel start": 1.819, "GPT steps": 1.384, "BERT steps": 0.942, "tokenizer": 0.362}
# How much each part counts: the share of the pages' time that moves with that kind of work between machines. Of two
# CI machines (builds of 98027cc and 7f56777), the second took 0.72-0.79 times the first's seconds on the torch parts,
# 1.2 times on the plain-Python ones, and 0.93 times on the pages in all: the pages move as about 60% torch work and
# 40% Python (notebooks, data preparation, tokenizers, figures). With torch weighted 0.83, as it was, the clock read
# 1.68 on the second machine while its pages took the seconds of a factor near 1.9; with these weights, 1.88.
WEIGHTS = {"kernel start": 0.10, "GPT steps": 0.30, "BERT steps": 0.30, "tokenizer": 0.30}
REPEATS = 3  # each repeat takes about 5 s on the reference machine; the median ignores one disturbed repeat
MERGES = 40  # the tokenizer part's work
ROOT = Path(__file__).resolve().parent.parent


def kernel_start() -> None:
    """Start a notebook kernel as myst-nb does, import what the pages import, and shut it down."""
    from jupyter_client.manager import start_new_kernel

    # the kernel's own stderr carries a warning about its TCP transport at every start: noise in the build log
    manager, client = start_new_kernel(kernel_name="python3", stderr=subprocess.DEVNULL)
    try:
        reply = client.execute_interactive("import torch, numpy, matplotlib.pyplot", timeout=60)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the calibration kernel could not import torch: {reply['content']}")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def transformer(vocab_size: int, context: int, layers: int, heads: int):
    """A pre-norm transformer 128 wide (MLP 512) in plain torch: the lib's models have these shapes, and the clock
    must not move when the lib's code does."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(128, heads, 512, dropout=0.0, activation="gelu", batch_first=True,
                                       norm_first=True)
    body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    return nn.ModuleDict({"tokens": nn.Embedding(vocab_size, 128), "positions": nn.Embedding(context, 128),
                          "body": body, "norm": nn.LayerNorm(128)})


def hidden_states(model, ids, causal: bool):
    import torch

    T = ids.shape[1]
    x = model["tokens"](ids) + model["positions"](torch.arange(T))  # (B, T, C)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(T) if causal else None
    return model["norm"](model["body"](x, mask=mask, is_causal=causal))


def training_steps(model, loss_of_model, steps: int) -> None:
    """`steps` updates of AdamW in torch's fused kernel, as the lib's training loop makes them."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    for _ in range(steps):
        loss_of_model(model).backward()
        optimizer.step()
        optimizer.zero_grad()


def gpt_steps() -> None:
    """The shared character GPT's shape: 4 layers, 4 heads, 84 characters, batch 12 x 64."""
    import torch
    import torch.nn.functional as F

    ids = torch.randint(0, 84, (12, 65), generator=torch.Generator().manual_seed(0))  # (B, T + 1)

    def loss(model):
        logits = hidden_states(model, ids[:, :-1], causal=True) @ model["tokens"].weight.T  # (B, T, V), tied
        return F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())

    training_steps(transformer(84, 64, layers=4, heads=4), loss, steps=40)


def bert_steps() -> None:
    """The shared encoder's shape: 2 layers, 2 heads, 3,000 pieces, batch 128 x 32, 15% of positions predicted."""
    import torch
    import torch.nn.functional as F

    draw = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 3000, (128, 32), generator=draw)  # (B, T)
    predicted = torch.rand(ids.shape, generator=draw) < 0.15  # (B, T)

    def loss(model):
        logits = hidden_states(model, ids, causal=False)[predicted] @ model["tokens"].weight.T  # (N, V)
        return F.cross_entropy(logits, ids[predicted])

    training_steps(transformer(3000, 32, layers=2, heads=2), loss, steps=10)


def merge(word: tuple[str, ...], pair: tuple[str, str]) -> tuple[str, ...]:
    """('l', 'o', 'w'), ('l', 'o') -> ('lo', 'w')"""
    out, i = [], 0
    while i < len(word):
        if word[i : i + 2] == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def tokenizer_pass() -> None:
    """Plain Python, as the tokenizer pages' training is: MERGES merges of a BPE learned from the counts of a fixed
    text of made-up words, the k-th most common about 1/k as often, as in prose."""
    draw = random.Random(0)
    lexicon = ["".join(draw.choices(string.ascii_lowercase, k=draw.randint(3, 9))) for _ in range(5_000)]
    text = draw.choices(lexicon, weights=[1 / k for k in range(1, 5_001)], k=50_000)
    words = collections.Counter(tuple(word) for word in text)
    for _ in range(MERGES):
        pairs = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] += count
        best = max(pairs, key=pairs.get)
        words = collections.Counter({merge(word, best): count for word, count in words.items()})


WORKLOAD = {"kernel start": kernel_start, "GPT steps": gpt_steps, "BERT steps": bert_steps,
            "tokenizer": tokenizer_pass}


def time_workload() -> dict[str, float]:
    """Seconds each part of the workload took, once."""
    seconds = {}
    for name, part in WORKLOAD.items():
        started = time.perf_counter()
        part()
        seconds[name] = time.perf_counter() - started
    return seconds


def factor_of(run: dict[str, float]) -> float:
    """One repeat's factor: the weighted mean of its parts' ratios to the reference machine's seconds."""
    return sum(WEIGHTS[name] * run[name] / REFERENCE_SECONDS[name] for name in WORKLOAD)


def prepare() -> None:
    """The pages' thread count, and what the first optimizer of a process imports (torch._dynamo), done before any
    part is timed."""
    import torch

    from minformers.support.runtime import DEFAULT_THREADS

    torch.set_num_threads(DEFAULT_THREADS)
    torch.optim.AdamW([torch.zeros(1, requires_grad=True)])


def measure(repeats: int = REPEATS) -> dict:
    """Run the workload `repeats` times on the pages' thread count; return the factor, the median of the repeats'
    factors, and what it came from."""
    from minformers.support.runtime import DEFAULT_THREADS

    prepare()
    runs = [time_workload() for _ in range(repeats)]
    factors = [factor_of(run) for run in runs]
    return {
        "factor": statistics.median(factors),
        "repeats": factors,
        "seconds": statistics.median(sum(run.values()) for run in runs),
        "parts": {name: statistics.median(run[name] for run in runs) for name in WORKLOAD},
        "threads": DEFAULT_THREADS,
    }


def combine(before: dict, after: dict, during: list[float] = ()) -> dict:
    """One clock for a build: the median of all its readings, the calibrations' repeats before and after it and
    the readings taken `during` it, between pages (see the module's docstring)."""
    if not before["repeats"] or not after["repeats"]:
        return before  # a factor given, not measured
    repeats = before["repeats"] + list(during) + after["repeats"]
    return {**after, "factor": statistics.median(repeats), "repeats": repeats,
            "before": before["factor"], "during": list(during), "after": after["factor"]}


PROBES = "MINFORMERS_CLOCK_PROBES"  # set by tools/build_book.py: the file the readings taken during a build go to
PROBE_EVERY = 4  # pages that run code: about 8 readings in a full build, about 75 s on a machine of factor 2


def probe(path: str | Path) -> None:
    """Time the workload once and append its factor to `path`, one number a line (during a build)."""
    prepare()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as probes:
        probes.write(f"{factor_of(time_workload())}\n")


def probed(path: str | Path) -> list[float]:
    """The factors `probe` wrote to `path`; none if it wrote none."""
    path = Path(path)
    return [float(line) for line in path.read_text().split()] if path.exists() else []


def given(factor: float) -> dict:
    """A clock that was not measured: `factor` taken as it is (tests of the build driver)."""
    return {"factor": factor, "repeats": [], "seconds": None, "parts": {}, "threads": None}


def describe(clock: dict) -> str:
    if not clock["repeats"]:
        return f"machine factor {clock['factor']:.2f}, as given (not measured)"
    if "before" in clock:
        during = clock.get("during", [])
        between = f", {len(during)} between pages from {min(during):.2f} to {max(during):.2f}" if during else ""
        return (f"the build's machine factor is {clock['factor']:.2f}, the median of all {len(clock['repeats'])} "
                f"readings ({clock['before']:.2f} before the build{between}, {clock['after']:.2f} after)")
    parts = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in clock["parts"].items())
    return (f"machine factor {clock['factor']:.2f} (median of {len(clock['repeats'])} calibrations: {parts}; "
            f"{clock['seconds']:.2f} s in all, {sum(REFERENCE_SECONDS.values()):.2f} s on the reference machine)")


# seconds that `make test` (all of .ci/run) may take on a machine of factor SLOW_FACTOR (CI itself allows 90 minutes)
CI_LIMIT = 60 * 60.0
SLOW_FACTOR = 2.0  # the slowest machines of the course's kind seen so far


def project_ci(seconds: float, timings: Path = ROOT / "_build" / "timings.json") -> int:
    """Print what a CI run of `seconds` would take on a machine of factor SLOW_FACTOR, scaling by the factor that
    this run's book build measured; return 1 if that is over CI_LIMIT. Scaling the install and the browser tests
    too overstates them a little: they wait on disks and the network as much as on the CPU."""
    factor = json.loads(timings.read_text())["clock"]["factor"]
    expected = seconds * SLOW_FACTOR / factor
    verdict = "within" if expected <= CI_LIMIT else "OVER"
    print(f"CI took {seconds:.0f} s on this machine (factor {factor:.2f}); on a machine of factor {SLOW_FACTOR:.1f} "
          f"it would take about {expected:.0f} s, {verdict} its limit of {CI_LIMIT:.0f} s")
    return 0 if expected <= CI_LIMIT else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--json", action="store_true", help="print the measurement as JSON")
    parser.add_argument("--ci-took", type=float, metavar="SECONDS", help="project a CI run's time to factor 2")
    arguments = parser.parse_args()
    if arguments.ci_took is not None:
        sys.exit(project_ci(arguments.ci_took))
    clock = measure(arguments.repeats)
    print(json.dumps(clock) if arguments.json else describe(clock))
