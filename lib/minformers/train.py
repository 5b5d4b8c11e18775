"""The one training loop every chapter uses: AdamW, warmup then cosine decay, gradient
clipping, evaluation, progress, and checkpoints that resume to the exact same losses.

The caller supplies two functions, so the loop knows nothing about models or objectives:
``batch_for_step(step)`` returns the batch for a step (seeded by the step, so a resumed
run sees the same data), and ``loss_for_batch(model, batch)`` a scalar loss, or a dict
whose "loss" is optimised and whose other entries (say "nsp_loss") are only logged. A
metric is recorded against the updates the model had received when it was measured, so
``h.steps`` runs 0..steps-1 and ``h.eval_steps`` ends at steps. A line learns y = 2x:

    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Linear(1, 1)
    >>> def batch_for_step(step):  # a fresh batch per step, the same one every run
    ...     x = torch.randn(16, 1, generator=torch.Generator().manual_seed(step))
    ...     return x, 2 * x
    >>> def loss_for_batch(model, batch):
    ...     return nn.functional.mse_loss(model(batch[0]), batch[1])
    >>> config = TrainConfig(steps=100, lr=0.1, warmup_steps=10, eval_every=50)
    >>> h = train(model, batch_for_step, loss_for_batch, config, progress=False)
    >>> h.eval_steps, h.train["loss"][0] > 1, h.train["loss"][-1] < 1e-3
    ([50, 100], True, True)
    >>> round(model.weight.item(), 1)
    2.0
"""

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import tqdm

from minformers.support import checkpoints
from minformers.support.arguments import require_size
from minformers.support.fused_adamw import FusedAdamW
from minformers.support.history import History
from minformers.support.runtime import log


@dataclass(frozen=True)
class TrainConfig:
    steps: int  # optimizer updates in the whole run: the schedule spans exactly these
    lr: float = 3e-4  # the peak, reached after warmup; AdamW's usual for small models
    # a linear ramp up to lr, as Adam's first moment estimates are noisy; nanoGPT's 100
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1  # the cosine ends at lr * this; 0.1 as in GPT-3
    weight_decay: float = 0.01  # AdamW's, on matrices only (make_optimizer); BERT's
    # Adam's decay rates for the gradient's mean and square; the Adam paper's values
    betas: tuple[float, float] = (0.9, 0.999)
    # added to sqrt(second moment), so tiny gradients take no huge steps; Adam's value
    eps: float = 1e-8
    grad_clip: float | None = 1.0  # max global gradient L2 norm, as GPT-3; None: never
    eval_every: int = 100  # evaluate, checkpoint and print this often, and at the end
    # without a bar, also print a train-only line this often; None: only at evaluations
    log_every: int | None = None

    def __post_init__(self):
        require_size("steps", self.steps)
        require_size("warmup_steps", self.warmup_steps, minimum=0)
        require_size("eval_every", self.eval_every)
        if self.log_every is not None:
            require_size("log_every", self.log_every)
        # a list (say from JSON) becomes the tuple AdamW expects
        object.__setattr__(self, "betas", tuple(self.betas))
        betas = len(self.betas) == 2 and all(0 <= beta < 1 for beta in self.betas)
        # each rule is written so that NaN breaks it too
        for name, holds, rule in [
            ("warmup_steps", self.warmup_steps < self.steps, f"< steps ({self.steps})"),
            ("betas", betas, "two numbers in [0, 1)"),
            ("lr", self.lr > 0, "> 0"),
            ("eps", self.eps > 0, "> 0"),
            ("grad_clip", self.grad_clip is None or self.grad_clip > 0, "> 0"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"),
            ("min_lr_ratio", 0 <= self.min_lr_ratio <= 1, "in [0, 1]"),
        ]:
            if not holds:
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)}")


def learning_rate(step: int, config: TrainConfig) -> float:
    """Learning rate for update ``step`` (0-based): linear warmup, then cosine decay to
    lr * min_lr_ratio.

    Warmup gives step s the rate lr * (s + 1) / warmup_steps, so step 0 is already
    useful and step warmup_steps - 1 reaches lr. The cosine then runs from lr at step
    warmup_steps to lr * min_lr_ratio at the last step, steps - 1.

    >>> config = TrainConfig(steps=11, lr=1.0, warmup_steps=2, min_lr_ratio=0.1)
    >>> # step 6 is halfway down: 0.1 + 0.9/2
    >>> [round(learning_rate(step, config), 3) for step in (0, 1, 2, 6, 10)]
    [0.5, 1.0, 1.0, 0.55, 0.1]
    """
    if not 0 <= step < config.steps:
        raise ValueError(f"step must be in [0, {config.steps}), got {step}")
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    decay_steps = config.steps - 1 - config.warmup_steps
    # 0 at the end of warmup, 1 at the last step
    progress = (step - config.warmup_steps) / decay_steps if decay_steps > 0 else 1.0
    lowest = config.lr * config.min_lr_ratio
    return lowest + (config.lr - lowest) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> FusedAdamW:
    """AdamW (in torch's fused kernel: ``support.fused_adamw``) with weight decay on
    matrices (p.dim() >= 2: linear and embedding weights) and none on vectors.

    Decay pulls a parameter toward 0, a prior that a matrix's entries should be small,
    which limits how sharply a layer responds to its input. Biases and LayerNorm gains
    and shifts are offsets and scales whose natural value is not 0 (a gain starts at 1):
    decaying them biases the model rather than regularising it, and with one number per
    channel they have little room to overfit. nanoGPT makes the same split.
    ``model.parameters()`` yields a tied weight (embedding = output head) once, so it is
    updated once per step; frozen parameters (requires_grad=False) stay out.
    """
    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters (requires_grad=True)")
    matrices = [p for p in parameters if p.dim() >= 2]
    vectors = [p for p in parameters if p.dim() < 2]
    decays = [(matrices, config.weight_decay), (vectors, 0.0)]
    groups = [{"params": ps, "weight_decay": decay} for ps, decay in decays if ps]
    return FusedAdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps)


def _losses(output, step: int) -> dict[str, torch.Tensor]:
    """loss_for_batch's output as {"loss": scalar tensor, other name: scalar}; anything
    else is refused by name."""
    losses = output if isinstance(output, dict) else {"loss": output}
    loss = losses.get("loss")
    if not isinstance(loss, torch.Tensor):
        raise TypeError(
            "loss_for_batch must return a scalar tensor or a dict with a 'loss' "
            f"tensor, got {output!r}"
        )
    if loss.dim() != 0:
        raise ValueError(
            "loss_for_batch must return a scalar (shape ()), got shape "
            f"{tuple(loss.shape)}; use .mean()"
        )
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"loss is {loss.item()} at step {step}; try a lower lr or a longer warmup"
        )
    return losses


def _resume(path: Path | None, model, optimizer, config) -> tuple[int, History]:
    """The step and History to start from: a fresh run's, or those saved at ``path``,
    whose weights, optimizer moments and RNG states are loaded back."""
    if path is None or not path.exists():
        return 0, History()
    step, history = checkpoints.resume(path, model, optimizer, asdict(config))
    # a finished run loads without a word: a page that reuses it shows no build talk
    if step < config.steps:
        log(f"resumed from {path.name} at step {step}/{config.steps}")
    return step, History.from_dict(history)


def _evaluate(evaluate: Callable | None, model, history: History, done: int) -> None:
    """Record ``evaluate(model)``, run in eval mode (dropout off) without gradients:
    numbers in ``history.eval``, strings (say, samples) in ``history.text``."""
    history.eval_steps.append(done)
    model.eval()
    try:
        with torch.no_grad():
            results = evaluate(model) if evaluate else {}
    finally:
        model.train()
    texts = {name: value for name, value in results.items() if isinstance(value, str)}
    numbers = {name: value for name, value in results.items() if name not in texts}
    history.add("eval", numbers, "evaluate")
    history.add("text", texts, "evaluate")


def _line(history: History, since: int, done: int, steps: int, evaluated: bool) -> str:
    """``step  50/100 | loss 0.9917 | val_loss 1.02``: train metrics are means since the
    previous line. No wall time: two builds of the website must print the same lines."""
    metrics = history.train.items()
    shown = {name: sum(values[since:done]) / (done - since) for name, values in metrics}
    if evaluated:
        shown |= {name: values[-1] for name, values in history.eval.items()}
    fields = [f"step {done:>{len(str(steps))}}/{steps}"]
    return " | ".join(fields + [f"{name} {value:.4g}" for name, value in shown.items()])


def train(
    model: torch.nn.Module,
    batch_for_step: Callable[[int], object],
    loss_for_batch: Callable,
    config: TrainConfig,
    evaluate: Callable | None = None,
    checkpoint: str | Path | None = None,
    progress: bool | None = None,
    build_optimizer: Callable = make_optimizer,
) -> History:
    """Train ``model`` for ``config.steps`` updates and return its History (example at
    the top of the module).

    ``evaluate(model) -> {name: float or str}`` runs every ``eval_every`` steps and at
    the last, in eval mode without gradients; a str (a sample, say) goes to
    ``history.text``. With ``checkpoint`` (a file path) the run is saved at each
    evaluation (``support.checkpoints``), and a run that finds the file resumes from it,
    repeating the uninterrupted run's losses exactly. ``progress``: True draws a tqdm
    bar, False logs a line per evaluation to stderr; None draws the bar unless
    $MINFORMERS_BUILD is set and not 0, as the book build sets it (a redrawn bar is
    noise in a static page). ``build_optimizer(model, config)`` makes another optimizer
    than AdamW (the optimizers page compares nine); the schedule sets each parameter
    group's "lr" at every step, and clipping applies as for AdamW.
    """
    if progress is None:
        progress = os.environ.get("MINFORMERS_BUILD", "") in ("", "0")
    optimizer = build_optimizer(model, config)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    path = None if checkpoint is None else Path(checkpoint)
    start, history = _resume(path, model, optimizer, config)
    began = time.perf_counter() - (history.seconds[-1] if history.seconds else 0.0)
    last_line = start  # a printed line averages the train metrics since the last one
    optimizer.zero_grad(set_to_none=True)
    quiet = not progress or start >= config.steps  # a finished run draws no bar
    bar = tqdm.tqdm(
        total=config.steps, initial=start, file=sys.stdout, mininterval=1, disable=quiet
    )
    with bar:
        for step in range(start, config.steps):
            model.train()
            rate = learning_rate(step, config)
            for group in optimizer.param_groups:
                group["lr"] = rate
            losses = _losses(loss_for_batch(model, batch_for_step(step)), step)
            losses["loss"].backward()
            # the norm before clipping: what the data asked for
            grads = [p.grad for p in parameters if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads)
            if not torch.isfinite(norm):
                raise FloatingPointError(f"gradient norm is {norm:g} at step {step}")
            if config.grad_clip is not None:  # all scaled by one factor: same direction
                torch.nn.utils.clip_grads_with_norm_(parameters, config.grad_clip, norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)  # frees memory before evaluating
            history.steps.append(step)
            history.add("train", losses, "loss_for_batch")
            history.lr.append(rate)
            history.grad_norm.append(norm.item())
            history.seconds.append(time.perf_counter() - began)
            done = step + 1  # updates the model has now received
            evaluating = done % config.eval_every == 0 or done == config.steps
            if evaluating:
                _evaluate(evaluate, model, history, done)
                if path is not None:
                    saved = asdict(config), history.to_dict()
                    checkpoints.save_checkpoint(path, model, optimizer, done, *saved)
            bar.update()
            if progress:
                latest = (history.train | history.eval).items()
                bar.set_postfix({k: f"{v[-1]:.4g}" for k, v in latest}, refresh=False)
            elif evaluating or (config.log_every and done % config.log_every == 0):
                log(_line(history, last_line, done, config.steps, evaluating))
                last_line = done
    return history
