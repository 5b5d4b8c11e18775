"""The scaling-law sweep: GPTs of several widths trained on Shakespeare's characters for
several token budgets, each run with its own cosine schedule laid out over its budget
(Hoffmann et al.'s point: a schedule longer than the run makes every intermediate loss
look worse than a run of that length would reach).

Every run is an ``LMRun`` of the character-level recipe
(``language_model_run.train_language_model``), so a run is saved in this build's
checkpoints and a page run again loads it instead of training it. Runs go to a pool of
worker processes, one torch thread each.

    >>> run = SweepRun(d_model=32, tokens=65_536)
    >>> run.steps, run.shape()
    (64, {'d_model': 32, 'n_layers': 2, 'n_heads': 2, 'd_ff': 128, 'max_len': 64})
"""

import time
from dataclasses import dataclass

from minformers.gpt import GPTConfig
from minformers.recipes.language_model_run import LMRun
from minformers.recipes.shakespeare_gpt import shakespeare_characters, train_quietly
from minformers.scaling import non_embedding_parameters, training_flops_per_token
from minformers.support.arguments import require_size
from minformers.support.parallel import map_in_workers
from minformers.support.runtime import log
from minformers.train import TrainConfig

HEAD_DIM = 16  # heads are about 16 wide: d_model // 16 of them, and at least one
# Adam's best step size shrinks as a model widens (muP's rule for hidden weights:
# lr ~ 1 / width), so a run's lr is LR_WIDTH / d_model, with the constant fitted to the
# best lr of short runs at two widths.
LR_WIDTH = 0.32


@dataclass(frozen=True)
class SweepRun:
    """One model size trained on one token budget."""

    d_model: int  # the width; depth, heads and feed-forward follow from it (``shape``)
    tokens: int  # D, the training tokens: batch_size x context tokens per step
    n_layers: int = 2  # the same depth for every size: the sweep scales width
    # windows per step: 1,024 tokens, small enough for many steps on one core
    batch_size: int = 16
    context: int = 64  # tokens per window, as on the GPT page
    # peak learning rate; None = LR_WIDTH / d_model (see LR_WIDTH)
    lr: float | None = None
    validation_windows: int = 128  # the same held-out windows score every run
    seed: int = 0  # seeds the initial weights: repeats measure a point's noise

    def __post_init__(self):
        for name in (
            "d_model",
            "tokens",
            "n_layers",
            "batch_size",
            "context",
            "validation_windows",
        ):
            require_size(name, getattr(self, name))
        if self.steps < 10:
            raise ValueError(
                f"tokens={self.tokens} gives {self.steps} steps of "
                f"{self.batch_size * self.context} tokens; at least 10 are needed for "
                "a warmup and a decay"
            )

    @property
    def steps(self) -> int:
        return self.tokens // (self.batch_size * self.context)

    @property
    def learning_rate(self) -> float:
        return LR_WIDTH / self.d_model if self.lr is None else self.lr

    def shape(self) -> dict:
        return {
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "n_heads": max(1, self.d_model // HEAD_DIM),
            "d_ff": 4 * self.d_model,
            "max_len": self.context,
        }

    def config(self, vocab_size: int) -> GPTConfig:
        return GPTConfig.tiny(vocab_size=vocab_size, **self.shape())

    def lm_run(self) -> LMRun:
        schedule = TrainConfig(
            steps=self.steps,
            lr=self.learning_rate,
            warmup_steps=max(1, self.steps // 10),
            eval_every=max(1, self.steps // 8),
        )
        return LMRun(
            schedule=schedule,
            batch_size=self.batch_size,
            validation_windows=self.validation_windows,
            sample_length=0,
            model_changes=tuple(self.shape().items()),
            init_seed=self.seed,
        )


@dataclass(frozen=True)
class SweepResult:
    """What one run measured."""

    run: SweepRun
    parameters: int  # N, non-embedding
    # the run's training compute as our code computes it
    # (``training_flops_per_token`` x D)
    flops: float
    loss: float  # held-out loss (nats per character) at the end
    curve_tokens: list[int]  # tokens seen at each evaluation
    curve_loss: list[float]  # held-out loss at each evaluation
    seconds: float  # training wall time

    @property
    def compute(self) -> float:
        """C = 6ND, the convention the fits use."""
        return 6.0 * self.parameters * self.run.tokens


def train_sweep_run(run: SweepRun) -> SweepResult:
    """Train (or load from this build's checkpoints) one run; its per-evaluation lines
    are not printed."""
    history = train_quietly(run.lm_run())
    config = run.config(shakespeare_characters().tokenizer.vocab_size)
    tokens_per_step = run.batch_size * run.context
    return SweepResult(
        run=run,
        parameters=non_embedding_parameters(config),
        flops=float(training_flops_per_token(config) * run.tokens),
        loss=history.eval["val_loss"][-1],
        curve_tokens=[step * tokens_per_step for step in history.eval_steps],
        curve_loss=list(history.eval["val_loss"]),
        seconds=history.seconds[-1],
    )


def run_sweep(runs: list[SweepRun], workers: int = 2) -> list[SweepResult]:
    """Train ``runs`` on ``workers`` one-thread processes (the costliest first, so none
    is left alone at the end) and return their results in the order given. Logs a line
    as each run finishes, and the time taken."""

    def report(done: int, run: SweepRun, result: SweepResult) -> None:
        log(
            f"[{done:>2}/{len(runs)}] d_model {run.d_model:>3}, N "
            f"{result.parameters:>7,}, D {run.tokens:>9,}: held-out loss "
            f"{result.loss:.3f}"
        )

    started = time.perf_counter()
    results = map_in_workers(
        train_sweep_run,
        runs,
        workers,
        cost=lambda run: run.tokens * run.d_model**2,
        on_result=report,
    )
    wall = time.perf_counter() - started
    busy = sum(result.seconds for result in results)
    log(
        f"{len(runs)} runs: {busy:.0f} s of training on {workers} worker(s) in "
        f"{wall:.0f} s of wall time"
    )
    return results
