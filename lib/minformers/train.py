"""The one training loop every chapter uses: AdamW, warmup then cosine decay, gradient
clipping, evaluation, progress, and checkpoints that resume to the exact same losses.

Over 350 lines: the one training loop every chapter uses, with its schedule, its
history, and checkpoints that resume and are named by the lib's source.

The caller supplies two functions, so the loop knows nothing about models or objectives:
``batch_for_step(step)`` returns the batch for a step (seeded by the step, so a resumed
run sees the same data), and ``loss_for_batch(model, batch)`` returns a scalar loss, or
a dict whose "loss" is optimised and whose other entries (say "mlm_loss", "nsp_loss")
are only logged. Steps count from 0; a metric is recorded against the number of updates
the model had received when it was measured, so ``h.steps`` runs 0..steps-1 and
``h.eval_steps`` ends at steps.

    >>> from torch import nn
    >>> _ = torch.manual_seed(0)
    >>> model = nn.Linear(1, 1)
    >>> def batch_for_step(
    ...     step,
    ... ):  # y = 2x, a fresh batch per step, the same one every run
    ...     x = torch.randn(16, 1, generator=torch.Generator().manual_seed(step))
    ...     return x, 2 * x
    >>> def loss_for_batch(model, batch):
    ...     x, y = batch
    ...     return nn.functional.mse_loss(model(x), y)
    >>> config = TrainConfig(steps=100, lr=0.1, warmup_steps=10, eval_every=50)
    >>> # logs "step  50/100 | loss ..."
    >>> h = train(model, batch_for_step, loss_for_batch, config, progress=False)
    >>> h.eval_steps
    [50, 100]
    >>> (
    ...     h.train["loss"][0] > 1,
    ...     h.train["loss"][-1] < 1e-3,
    ...     round(model.weight.item(), 1),
    ... )
    (True, True, 2.0)
"""

import glob
import hashlib
import json
import math
import os
import pickle
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import tqdm
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from minformers.support.arguments import require_size
from minformers.support.runtime import log

# the minformers package, whose source keys checkpoints and the book's cache
LIB = Path(__file__).resolve().parent


@dataclass(frozen=True)
class TrainConfig:
    # optimizer updates in the whole run; the schedule is laid out over exactly this
    # many
    steps: int
    # peak learning rate, reached at the end of warmup (AdamW's usual scale for small
    # transformers)
    lr: float = 3e-4
    # linear ramp from ~0: Adam's early moment estimates are noisy, so big steps would
    # be too
    warmup_steps: int = 100
    # cosine decays from lr to lr * min_lr_ratio at the last step (0.1 as in GPT-3)
    min_lr_ratio: float = 0.1
    # AdamW's decoupled decay, applied to matrices only (see make_optimizer)
    weight_decay: float = 0.01
    # Adam's decay rates for the gradient's mean and square
    betas: tuple[float, float] = (0.9, 0.999)
    # added to sqrt(second moment), so a parameter with tiny gradients does not take
    # huge steps
    eps: float = 1e-8
    # rescale the gradient when its global L2 norm exceeds this; None = never
    grad_clip: float | None = 1.0
    # evaluate (and checkpoint, and print) every this many steps, and at the last step
    eval_every: int = 100
    # without a progress bar, also print a train-only line this often; None = never
    log_every: int | None = None

    def __post_init__(self):
        require_size("steps", self.steps)
        require_size("warmup_steps", self.warmup_steps, minimum=0)
        if self.warmup_steps >= self.steps:
            raise ValueError(
                f"warmup_steps must be < steps ({self.steps}), got {self.warmup_steps}"
            )
        require_size("eval_every", self.eval_every)
        if self.log_every is not None:
            require_size("log_every", self.log_every)
        # a list (say from JSON) becomes the tuple AdamW expects
        object.__setattr__(self, "betas", tuple(self.betas))
        if len(self.betas) != 2 or not all(0 <= beta < 1 for beta in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        positive = {
            "lr": self.lr,
            "eps": self.eps,
            "grad_clip": 1.0 if self.grad_clip is None else self.grad_clip,
        }
        for name, value in positive.items():
            if not value > 0:  # written this way round, NaN fails too
                raise ValueError(f"{name} must be > 0, got {value}")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")


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
    # 0 -> 1
    progress = (step - config.warmup_steps) / decay_steps if decay_steps > 0 else 1.0
    lowest = config.lr * config.min_lr_ratio
    return lowest + (config.lr - lowest) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, config: TrainConfig) -> "FusedAdamW":
    """AdamW with weight decay on matrices (p.dim() >= 2: linear and embedding weights)
    and none on vectors.

    Decay pulls a parameter toward 0, a prior that a matrix's entries should be small,
    which limits how sharply a layer responds to its input. Biases and LayerNorm gains
    and shifts are offsets and scales whose natural value is not 0 (a gain starts at 1):
    decaying them biases the model rather than regularising it, and with one number per
    channel they have little room to overfit. nanoGPT makes the same split.
    ``model.parameters()`` yields a tied weight (embedding = output head) once, so it is
    updated once per step; frozen parameters (requires_grad=False) stay out.

    The update runs in torch's fused kernel: the same arithmetic as the plain loop up to
    float rounding (tested), and several times faster on a CPU, where updating a token
    table element by element would take a good part of a small model's step.
    """
    parameters = [p for p in model.parameters() if p.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters (requires_grad=True)")
    groups = [
        {
            "params": [p for p in parameters if p.dim() >= 2],
            "weight_decay": config.weight_decay,
        },
        {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0},
    ]
    return FusedAdamW(
        [g for g in groups if g["params"]],
        lr=config.lr,
        betas=config.betas,
        eps=config.eps,
    )


class FusedAdamW:
    """``torch.optim.AdamW(fused=True)`` without ``torch.optim.Optimizer``: the same
    kernel (``torch._fused_adamw_``), the same ``param_groups`` (the schedule sets each
    group's "lr"), ``zero_grad``, and ``state_dict`` / ``load_state_dict`` in torch's
    layout (tested against torch's AdamW).

    Why not torch's class: building any ``torch.optim.Optimizer`` imports
    ``torch._dynamo``, about 1.6 s here, paid once by every process that trains, and
    the book's pages and their worker processes train dozens of small models.
    """

    def __init__(
        self,
        groups: list[dict],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0.0}
        self.param_groups = [
            defaults | group | {"params": list(group["params"])} for group in groups
        ]
        # per parameter: "step" (a float32 scalar, as torch keeps it), "exp_avg",
        # "exp_avg_sq"
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def _state(self, parameter: torch.Tensor) -> dict[str, torch.Tensor]:
        if parameter not in self.state:
            self.state[parameter] = {
                "step": torch.tensor(0.0),
                "exp_avg": torch.zeros_like(parameter),
                "exp_avg_sq": torch.zeros_like(parameter),
            }
        return self.state[parameter]

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p) for p in params]
            steps = [state["step"] for state in states]
            torch._foreach_add_(steps, 1)
            beta1, beta2 = group["betas"]
            torch._fused_adamw_(
                params,
                [p.grad for p in params],
                [state["exp_avg"] for state in states],
                [state["exp_avg_sq"] for state in states],
                [],  # AMSGrad's running maxima: not used
                steps,
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                amsgrad=False,
                maximize=False,
            )

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.zero_()

    def _parameters(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def state_dict(self) -> dict:
        """In torch's layout: a parameter is named by its index over all the groups."""
        groups, start = [], 0
        for group in self.param_groups:
            end = start + len(group["params"])
            groups.append(group | {"params": list(range(start, end))})
            start = end
        return {
            "state": {
                index: dict(self.state[p])
                for index, p in enumerate(self._parameters())
                if p in self.state
            },
            "param_groups": groups,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        parameters = self._parameters()
        self.state = {
            parameters[int(index)]: {key: t.clone() for key, t in state.items()}
            for index, state in state_dict["state"].items()
        }
        for group, saved in zip(
            self.param_groups, state_dict["param_groups"], strict=True
        ):
            group.update({key: v for key, v in saved.items() if key != "params"})


@dataclass
class History:
    """What a run measured, ready to plot: ``ax.plot(h.steps, h.train["loss"])``,
    ``ax.plot(h.eval_steps, ...)``."""

    # updates received before each training batch (0, 1, ...)
    steps: list[int] = field(default_factory=list)
    # name -> value per entry of steps
    train: dict[str, list[float]] = field(default_factory=dict)
    lr: list[float] = field(default_factory=list)  # learning rate used at each step
    # global gradient L2 norm before clipping
    grad_norm: list[float] = field(default_factory=list)
    # wall time since the run began, after each step
    seconds: list[float] = field(default_factory=list)
    # updates received before each evaluation
    eval_steps: list[int] = field(default_factory=list)
    # name -> value per entry of eval_steps
    eval: dict[str, list[float]] = field(default_factory=dict)
    # strings evaluate returned (say, samples), per eval
    text: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)  # plain lists and dicts: json.dumps-able

    @classmethod
    def from_dict(cls, data: dict) -> "History":
        # a deep copy, so the two never share lists
        return cls(**json.loads(json.dumps(data)))

    def last_eval(self, name: str) -> float:
        if name not in self.eval:
            raise KeyError(
                f"no eval metric {name!r}; this history has {sorted(self.eval)}"
            )
        return self.eval[name][-1]


def _append(table: dict[str, list[float]], values: dict[str, float], what: str) -> None:
    # the lists must stay aligned with their steps
    if table and set(values) != set(table):
        raise ValueError(
            f"{what} returned {sorted(values)}, but earlier steps returned "
            f"{sorted(table)}"
        )
    for name, value in values.items():
        table.setdefault(name, []).append(value)


def _number(value) -> float:
    return value.detach().item() if isinstance(value, torch.Tensor) else float(value)


def _losses(output, step: int) -> dict[str, torch.Tensor]:
    """Turn loss_for_batch's output into {"loss": scalar tensor, other name: scalar},
    refusing anything else."""
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


def _model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state_dict with each shared tensor once: a tied embedding is listed under
    both names, one storage."""
    tensors, seen = {}, set()
    for name, tensor in model.state_dict().items():
        key = (
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
        )
        if key not in seen:
            seen.add(key)
            tensors[name] = tensor
    return tensors


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    # own storage: safetensors refuses shared ones
    return tensor.detach().to("cpu", copy=True).contiguous()


def _save(
    path: Path, model, optimizer, config: TrainConfig, history: History, step: int
) -> None:
    """Model, AdamW moments, RNG states and history in one safetensors file, replaced
    atomically."""
    tensors = {f"model.{name}": _copy(t) for name, t in _model_tensors(model).items()}
    # per parameter: step, exp_avg, exp_avg_sq
    for index, state in optimizer.state_dict()["state"].items():
        tensors.update(
            {
                f"optimizer.{index}.{key}": _copy(torch.as_tensor(v))
                for key, v in state.items()
            }
        )
    # dropout draws continue exactly where they stopped
    tensors["rng.torch"] = torch.get_rng_state()
    version, python_state, gauss = random.getstate()
    numpy_state = np.random.get_state()
    rng = {
        "python": [version, list(python_state), gauss],
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
    }
    meta = json.dumps(
        {
            "step": step,
            "config": asdict(config),
            "history": history.to_dict(),
            "rng": rng,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(path)
    # the pid: two processes may save one path
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        save_file(
            tensors,
            partial,
            metadata={"minformers": meta, "sha256": _checksum(tensors, meta)},
        )
        # atomic: a crash mid-save leaves the previous checkpoint whole
        os.replace(partial, path)
    finally:
        # left only by a failed save (a full disk, an interrupt)
        partial.unlink(missing_ok=True)


def _remove_stale_partials(path: Path) -> None:
    """Delete the partial files of saves to ``path`` whose process has died (killed
    mid-save, say); a partial that a running process is still writing stays."""
    for partial in path.parent.glob(f".{glob.escape(path.name)}.*.partial"):
        pid = partial.name.removeprefix(f".{path.name}.").removesuffix(".partial")
        if pid.isdigit() and not _is_running(int(pid)):
            partial.unlink(missing_ok=True)


def _is_running(pid: int) -> bool:
    try:
        # signal 0 sends nothing: it only asks whether the process exists
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def _checksum(tensors: dict[str, torch.Tensor], meta: str) -> str:
    """sha256 of the metadata and of every tensor's name, dtype, shape and bytes: one
    flipped bit changes it."""
    digest = hashlib.sha256(meta.encode())
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"\0{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        # raw bytes, whatever the dtype
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and metadata of a checkpoint written by ``_save``; a file that is not
    one, or whose bytes have changed since, raises an error that names it."""
    if path.is_dir():  # safe_open would say only "No such device"
        raise ValueError(
            f"checkpoint {path} is a directory; pass the path of a .safetensors file "
            "written by train"
        )
    try:
        with safe_open(path, framework="pt") as file:
            tensors, metadata = (
                {key: file.get_tensor(key) for key in file.keys()},
                file.metadata() or {},
            )
    # empty, cut short (a full disk, a killed copy), or not safetensors at all
    except SafetensorError as error:
        raise ValueError(
            f"checkpoint {path} is not a complete safetensors file ({error}); delete "
            "it and train again"
        ) from None
    if "minformers" not in metadata:
        raise ValueError(
            f"checkpoint {path} has no minformers metadata, so train did not write it; "
            "read other safetensors files with safetensors.torch.load_file"
        )
    # Checkpoints saved before checksums were added have none, and load unchecked.
    if "sha256" in metadata and metadata["sha256"] != _checksum(
        tensors, metadata["minformers"]
    ):
        raise ValueError(
            f"checkpoint {path} is corrupt: its contents no longer match the sha256 "
            "saved with them; delete it and train again"
        )
    return tensors, json.loads(metadata["minformers"])


def _load_model(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], path: Path
) -> None:
    saved = {
        key.removeprefix("model."): t
        for key, t in tensors.items()
        if key.startswith("model.")
    }
    expected = {name: tuple(t.shape) for name, t in _model_tensors(model).items()}
    found = {name: tuple(t.shape) for name, t in saved.items()}
    if found != expected:
        differ = sorted(
            n for n in expected.keys() | found.keys() if expected.get(n) != found.get(n)
        )
        details = ", ".join(
            f"{n}: checkpoint {found.get(n)} vs model {expected.get(n)}"
            for n in differ[:5]
        )
        raise ValueError(
            f"checkpoint {path} does not fit this model ({len(differ)} tensors "
            f"differ): {details}"
        )
    # strict=False: a tied tensor's second name is filled by the first
    model.load_state_dict(saved, strict=False)


def checkpoint_path(name: str, settings: dict, suffix: str = ".safetensors") -> Path:
    """Where a page saves a trained model (or any costly result, such as a trained
    vocabulary, with another ``suffix``) so that a later page of the same build can
    reuse it.

    The file name carries a hash of `settings` (everything that shapes the model:
    configs, data, seed) and of the lib's source, so a change to either means a fresh
    run. It lives in _build/checkpoints/ beside the lib (or in $MINFORMERS_CHECKPOINTS),
    which the book build empties first: every build trains each model once, and a page
    run alone trains what it needs.

    >>> checkpoint_path("tiny-bert", {"d_model": 128}).name.startswith("tiny-bert-")
    True
    """
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(lib_source_digest().encode())
    folder = os.environ.get(
        "MINFORMERS_CHECKPOINTS", LIB.parents[1] / "_build" / "checkpoints"
    )
    return Path(folder) / f"{name}-{digest.hexdigest()[:16]}{suffix}"


def cached_in_build(name: str, settings: dict, build: Callable[[], object]) -> object:
    """``build()``, or its result pickled at ``checkpoint_path(name, settings)`` by an
    earlier call of this build: for data that takes seconds to prepare (a tokenized
    corpus) and that many pages, and their worker processes, each need.

    >>> cached_in_build("doctest-squares", {"n": 3}, lambda: [i * i for i in range(3)])
    [0, 1, 4]
    """
    path = checkpoint_path(name, settings, suffix=".pickle")
    if path.exists():
        return pickle.loads(path.read_bytes())
    result = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(pickle.dumps(result))
    # atomic, so a page or worker running at the same time never reads half a file
    os.replace(partial, path)
    return result


def lib_source_digest() -> str:
    """sha256 of every source file of the lib, in a fixed order: it changes whenever any
    of them does."""
    digest = hashlib.sha256()
    for source in sorted(LIB.rglob("*.py")):
        digest.update(
            source.relative_to(LIB).as_posix().encode() + b"\0" + source.read_bytes()
        )
    return digest.hexdigest()


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load only the model weights of a checkpoint written by ``train`` (say, an earlier
    chapter's model)."""
    path = Path(path)
    _load_model(model, _read(path)[0], path)
    return model


def _resume(path: Path, model, optimizer, config: TrainConfig) -> tuple[int, History]:
    tensors, meta = _read(path)
    now = json.loads(json.dumps(asdict(config)))  # tuples -> lists, as they were saved
    differ = [
        f"{name} (checkpoint {meta['config'].get(name)}, now {now[name]})"
        for name in now
        if meta["config"].get(name) != now[name]
    ]
    if differ:
        raise ValueError(
            f"checkpoint {path} was written with a different TrainConfig: "
            f"{', '.join(differ)}; use the same config or a new checkpoint path"
        )
    _load_model(model, tensors, path)
    state: dict[int, dict] = {}
    for key, tensor in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = tensor
    optimizer.load_state_dict(
        {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}
    )
    torch.set_rng_state(tensors["rng.torch"])
    version, python_state, gauss = meta["rng"]["python"]
    random.setstate((version, tuple(python_state), gauss))
    name, keys, *rest = meta["rng"]["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), *rest))
    return meta["step"], History.from_dict(meta["history"])


def _evaluate(
    evaluate: Callable, model: torch.nn.Module
) -> tuple[dict[str, float], dict[str, str]]:
    """Run ``evaluate`` in eval mode without gradients; split what it returns into
    numbers and strings."""
    was_training = model.training
    model.eval()  # dropout off
    try:
        with torch.no_grad():
            results = evaluate(model)
    finally:
        model.train(was_training)
    texts = {name: value for name, value in results.items() if isinstance(value, str)}
    return {
        name: _number(value) for name, value in results.items() if name not in texts
    }, texts


def _line(history: History, since: int, done: int, steps: int, evaluated: bool) -> str:
    """``step  50/100 | loss 0.9917 | val_loss 1.02``; train metrics are means since the
    previous line.

    No wall time: these lines appear on the website, where two builds must print
    identical numbers.
    """
    shown = {
        name: sum(values[since:done]) / (done - since)
        for name, values in history.train.items()
    }
    if evaluated:
        shown |= {name: values[-1] for name, values in history.eval.items()}
    fields = [
        f"step {done:>{len(str(steps))}}/{steps}",
        *(f"{name} {value:.4g}" for name, value in shown.items()),
    ]
    return " | ".join(fields)


def train(
    model: torch.nn.Module,
    batch_for_step: Callable[[int], object],
    loss_for_batch: Callable,
    config: TrainConfig,
    evaluate: Callable | None = None,
    checkpoint: str | Path | None = None,
    progress: bool | None = None,
    build_optimizer: Callable[
        [torch.nn.Module, TrainConfig], torch.optim.Optimizer
    ] = make_optimizer,
) -> History:
    """Train ``model`` for ``config.steps`` AdamW updates and return its History
    (example at the top of the module).

    ``evaluate(model) -> {name: float}`` runs every ``eval_every`` steps and at the last
    one, in eval mode without gradients; a value that is a str (a generated sample, say)
    goes to ``history.text`` instead of ``history.eval``. With ``checkpoint`` (a file
    path) the run is saved at each evaluation, and a run that finds the file resumes
    from it, repeating the uninterrupted run's losses exactly; a finished checkpoint
    returns at once, silently. ``progress``: True draws a tqdm bar, False logs a line
    per evaluation (to stderr); None picks the bar unless the environment variable
    MINFORMERS_BUILD is set, and not to 0 (the book build sets it: a redrawn bar is
    noise in a static page). ``build_optimizer(model, config)`` makes another optimizer
    than AdamW (the optimizers page compares nine); the schedule sets each parameter
    group's "lr" at every step, and clipping applies as for AdamW.
    """
    if progress is None:
        progress = os.environ.get("MINFORMERS_BUILD", "") in ("", "0")
    optimizer = build_optimizer(model, config)
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    history, start = History(), 0
    path = None if checkpoint is None else Path(checkpoint)
    if path is not None and path.exists():
        start, history = _resume(path, model, optimizer, config)
        # a finished run loads without a word: a page that reuses it shows no build talk
        if start < config.steps:
            log(f"resumed from {path.name} at step {start}/{config.steps}")
    began = time.perf_counter() - (history.seconds[-1] if history.seconds else 0.0)
    # a printed line averages the train metrics since the previous line
    last_line = start
    optimizer.zero_grad(set_to_none=True)
    finished = start >= config.steps  # nothing to draw either
    bar = tqdm.tqdm(
        total=config.steps,
        initial=start,
        file=sys.stdout,
        mininterval=1.0,
        disable=not progress or finished,
    )
    with bar:
        for step in range(start, config.steps):
            model.train()
            rate = learning_rate(step, config)
            for group in optimizer.param_groups:
                group["lr"] = rate
            losses = _losses(loss_for_batch(model, batch_for_step(step)), step)
            losses["loss"].backward()
            grads = [p.grad for p in parameters if p.grad is not None]
            # before clipping: what the data asked for
            total_norm = torch.nn.utils.get_total_norm(grads)
            if not torch.isfinite(total_norm):
                raise FloatingPointError(
                    f"gradient norm is {total_norm.item()} at step {step}"
                )
            # scale all gradients together, keeping their direction
            if config.grad_clip is not None:
                torch.nn.utils.clip_grads_with_norm_(
                    parameters, config.grad_clip, total_norm
                )
            optimizer.step()
            # frees gradient memory before evaluation
            optimizer.zero_grad(set_to_none=True)

            history.steps.append(step)
            _append(
                history.train,
                {name: _number(value) for name, value in losses.items()},
                "loss_for_batch",
            )
            history.lr.append(rate)
            history.grad_norm.append(total_norm.item())
            history.seconds.append(time.perf_counter() - began)
            done = step + 1  # updates the model has now received
            evaluating = done % config.eval_every == 0 or done == config.steps
            if evaluating:
                history.eval_steps.append(done)
                numbers, texts = _evaluate(evaluate, model) if evaluate else ({}, {})
                _append(history.eval, numbers, "evaluate")
                _append(history.text, texts, "evaluate")
                if path is not None:
                    _save(path, model, optimizer, config, history, done)
            bar.update()
            if progress:
                latest = {
                    name: values[-1]
                    for name, values in (history.train | history.eval).items()
                }
                bar.set_postfix(
                    {name: f"{value:.4g}" for name, value in latest.items()},
                    refresh=False,
                )
            elif evaluating or (config.log_every and done % config.log_every == 0):
                log(
                    _line(
                        history,
                        since=last_line,
                        done=done,
                        steps=config.steps,
                        evaluated=evaluating,
                    )
                )
                last_line = done
    return history
