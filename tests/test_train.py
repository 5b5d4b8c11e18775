"""Training loop: the schedule by hand, who gets weight decay, real learning, clipping seen by the optimizer,
exact resumption from a checkpoint (dropout included), refusals, and what progress prints."""

import json
import math
import os
import random
import re
import subprocess
import sys
import uuid

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

import minformers.support.checkpoints
from minformers.support.checkpoints import cached_in_build, checkpoint_path, load_weights
from minformers.support.history import History
from minformers.train import TrainConfig, learning_rate, make_optimizer, train

VOCAB = 11


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class TinyTiedModel(nn.Module):
    """Embedding, a residual layer with dropout, LayerNorm, and an output head tied to the embedding."""

    def __init__(self, dim: int = 8, dropout: float = 0.2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, dim)
        self.hidden = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        x = self.embed(ids)  # (B, T, C)
        x = self.norm(x + self.dropout(torch.relu(self.hidden(x))))
        return self.head(x)  # (B, T, VOCAB)


def token_batch(step):
    """Predict the next id modulo VOCAB; the batch depends only on the step, through its own generator."""
    ids = torch.randint(0, VOCAB, (8, 6), generator=torch.Generator().manual_seed(step))
    return ids, (ids + 1) % VOCAB


def token_loss(model, batch):
    ids, targets = batch
    return nn.functional.cross_entropy(model(ids).flatten(0, 1), targets.flatten())


def token_eval(model):
    return {"val_loss": token_loss(model, token_batch(10_000)).item()}


TOKEN_CONFIG = TrainConfig(steps=30, lr=0.02, warmup_steps=3, eval_every=5)

# ---------------------------------------------------------------- schedule and config


def test_schedule_by_hand():
    config = TrainConfig(steps=106, lr=3e-4, warmup_steps=5, min_lr_ratio=0.1)  # cosine over steps 5..105
    assert learning_rate(0, config) == pytest.approx(3e-4 / 5)  # warmup starts at lr/warmup, not 0
    assert learning_rate(4, config) == pytest.approx(3e-4)  # warmup ends at lr
    assert learning_rate(5, config) == pytest.approx(3e-4)  # cosine starts at lr
    assert learning_rate(30, config) == pytest.approx(3e-5 + 2.7e-4 * (1 + math.sqrt(0.5)) / 2)  # a quarter down
    assert learning_rate(55, config) == pytest.approx(1.65e-4)  # halfway: (lr + min) / 2
    assert learning_rate(105, config) == pytest.approx(3e-5)  # last step: lr * min_lr_ratio
    rates = [learning_rate(step, config) for step in range(106)]
    assert rates[:5] == sorted(rates[:5]) and rates[5:] == sorted(rates[5:], reverse=True)
    assert learning_rate(0, TrainConfig(steps=3, lr=1.0, warmup_steps=0)) == 1.0
    assert learning_rate(1, TrainConfig(steps=2, lr=1.0, warmup_steps=1, min_lr_ratio=0.0)) == 0.0
    with pytest.raises(ValueError, match=r"step must be in \[0, 106\)"):
        learning_rate(106, config)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": 0}, ValueError, "steps must be >= 1"),
        ({"steps": 10, "warmup_steps": 10}, ValueError, r"warmup_steps must be < steps \(10\)"),
        ({"steps": 10, "warmup_steps": 0, "lr": 0.0}, ValueError, "lr must be > 0"),
        ({"steps": 10, "warmup_steps": 0, "min_lr_ratio": 1.5}, ValueError, "min_lr_ratio must be in"),
        ({"steps": 10, "warmup_steps": 0, "weight_decay": -1.0}, ValueError, "weight_decay must be >= 0"),
        ({"steps": 10, "warmup_steps": 0, "betas": (0.9, 1.0)}, ValueError, "betas must be"),
        ({"steps": 10, "warmup_steps": 0, "grad_clip": 0.0}, ValueError, "grad_clip must be > 0"),
        ({"steps": 10, "warmup_steps": 0, "eval_every": 0}, ValueError, "eval_every must be >= 1"),
        ({"steps": 10, "warmup_steps": 0, "log_every": 0}, ValueError, "log_every must be >= 1"),
        ({"steps": 2.5}, TypeError, "steps must be an int"),
    ],
)
def test_bad_config_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**kwargs)


def test_weight_decay_on_matrices_only_and_tied_weight_once():
    model = TinyTiedModel()
    optimizer = make_optimizer(model, TrainConfig(steps=10, warmup_steps=0, weight_decay=0.1))
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(model.embed.weight), id(model.hidden.weight)}
    assert {id(p) for p in no_decay["params"]} == {id(model.hidden.bias), id(model.norm.weight), id(model.norm.bias)}
    assert len(model.state_dict()) == 6  # head.weight is listed there too, but it is the embedding
    model.norm.requires_grad_(False)  # frozen parameters stay out of the optimizer
    assert sum(len(g["params"]) for g in make_optimizer(model, TrainConfig(steps=1, warmup_steps=0)).param_groups) == 3


def torch_adamw(model, config, **options):
    """torch's own AdamW over make_optimizer's parameter groups."""
    groups = [
        {"params": g["params"], "weight_decay": g["weight_decay"]} for g in make_optimizer(model, config).param_groups
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, eps=config.eps, **options)


def small_embedding_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 3))


def optimizer_steps(optimizer, model, steps):
    for step in steps:
        ids = torch.randint(20, (4,), generator=torch.Generator().manual_seed(step))
        model(ids).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()


ADAMW_CONFIG = TrainConfig(steps=5, lr=1e-2, warmup_steps=1, weight_decay=0.1)


def test_fused_kernel_takes_the_plain_loop_s_steps():
    """make_optimizer runs AdamW fused; the same groups in torch's plain for-loop AdamW must land in the same place."""
    models = []
    for build in (make_optimizer, lambda model, config: torch_adamw(model, config, foreach=False)):
        model = small_embedding_model()
        optimizer_steps(build(model, ADAMW_CONFIG), model, range(5))
        models.append(model)
    start = small_embedding_model()
    assert not torch.allclose(models[0][1].weight, start[1].weight, atol=1e-3)  # five steps did move the weights
    for fused, looped in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(fused, looped, rtol=1e-5, atol=1e-6)  # float rounding differs between kernels


def test_fused_adamw_state_dict_is_torch_s():
    """After the same steps, FusedAdamW's state_dict has torch's fused AdamW's layout and values, and loading it into
    a fresh FusedAdamW continues exactly as the original does."""
    ours, theirs = small_embedding_model(), small_embedding_model()
    ours_optimizer = make_optimizer(ours, ADAMW_CONFIG)
    theirs_optimizer = torch_adamw(theirs, ADAMW_CONFIG, fused=True)
    optimizer_steps(ours_optimizer, ours, range(3))
    optimizer_steps(theirs_optimizer, theirs, range(3))
    mine, torch_s = ours_optimizer.state_dict(), theirs_optimizer.state_dict()
    assert [g["params"] for g in mine["param_groups"]] == [g["params"] for g in torch_s["param_groups"]]
    assert mine["state"].keys() == torch_s["state"].keys()
    for index, state in torch_s["state"].items():
        assert mine["state"][index].keys() == state.keys()
        for key, value in state.items():
            torch.testing.assert_close(mine["state"][index][key], value, rtol=1e-5, atol=1e-7)

    resumed = small_embedding_model()
    resumed.load_state_dict(ours.state_dict())
    resumed_optimizer = make_optimizer(resumed, ADAMW_CONFIG)
    resumed_optimizer.load_state_dict(mine)
    optimizer_steps(ours_optimizer, ours, range(3, 5))
    optimizer_steps(resumed_optimizer, resumed, range(3, 5))
    for a, b in zip(ours.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(a, b)


def test_training_does_not_import_dynamo():
    """The reason FusedAdamW exists: torch.optim.Optimizer imports torch._dynamo (seconds per process)."""
    script = (
        "import sys, torch\n"
        "from minformers.train import TrainConfig, train\n"
        "model = torch.nn.Linear(2, 1)\n"
        "train(model, lambda step: torch.randn(8, 2), lambda m, x: m(x).square().mean(),\n"
        "      TrainConfig(steps=3, warmup_steps=1), progress=False)\n"
        "assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


# ---------------------------------------------------------------- learning, evaluation, history

TRUE_WEIGHT, TRUE_BIAS = torch.tensor([[1.0, -2.0, 0.5]]), 0.3


def regression_batch(step):
    x = torch.randn(32, 3, generator=torch.Generator().manual_seed(step))
    return x, x @ TRUE_WEIGHT.T + TRUE_BIAS


def mse(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def test_learns_a_regression_and_evaluates_on_schedule(capsys):
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    calls = []
    held_out = regression_batch(10_000)

    def evaluate(model):
        calls.append((model.training, torch.is_grad_enabled()))
        return {"val_loss": mse(model, held_out)}

    config = TrainConfig(steps=150, lr=0.05, warmup_steps=10, eval_every=40, weight_decay=0.0)
    h = train(model, regression_batch, mse, config, evaluate=evaluate, progress=False)

    assert h.train["loss"][0] > 1 and h.train["loss"][-1] < 1e-4 and h.last_eval("val_loss") < 1e-4
    torch.testing.assert_close(model.weight.detach(), TRUE_WEIGHT, atol=1e-2, rtol=0)
    assert h.eval_steps == [40, 80, 120, 150] and len(h.eval["val_loss"]) == 4  # every 40, and the last step
    assert calls == [(False, False)] * 4 and model.training  # eval mode without gradients, then back to train
    assert h.steps == list(range(150))
    assert len(h.train["loss"]) == len(h.lr) == len(h.grad_norm) == len(h.seconds) == 150
    assert h.lr == [learning_rate(step, config) for step in range(150)]
    assert h.seconds == sorted(h.seconds)
    assert h.last_eval("val_loss") == h.eval["val_loss"][-1]
    with pytest.raises(KeyError, match="no eval metric 'accuracy'"):
        h.last_eval("accuracy")
    restored = History.from_dict(json.loads(json.dumps(h.to_dict())))
    assert restored == h and restored.train is not h.train
    assert len(capsys.readouterr().err.splitlines()) == 4  # one line per evaluation, on stderr (off the page)


def test_dict_losses_optimise_loss_and_log_the_rest():
    config = TrainConfig(steps=8, lr=0.05, warmup_steps=2, eval_every=8)

    def parts(model, batch):
        loss = mse(model, batch)
        return {"loss": loss, "half": loss / 2, "weight_sum": model.weight.sum() * 100}  # the last must not be trained

    runs = []
    for loss_for_batch in (mse, parts):
        torch.manual_seed(0)
        runs.append(train(nn.Linear(3, 1), regression_batch, loss_for_batch, config, progress=False))
    plain, named = runs
    assert list(named.train) == ["loss", "half", "weight_sum"]
    assert named.train["loss"] == plain.train["loss"]  # only "loss" reached the gradients
    assert named.train["half"] == [loss / 2 for loss in named.train["loss"]]


# ---------------------------------------------------------------- gradient clipping


@pytest.mark.parametrize("grad_clip", [0.05, None])
def test_norms_are_recorded_before_clipping_and_the_optimizer_sees_clipped_ones(grad_clip):
    seen = []

    def spied_optimizer(model, config):  # AdamW whose step first records the gradients' norm
        optimizer = make_optimizer(model, config)
        step = optimizer.step

        def spied_step():
            grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
            seen.append(torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads])).item())
            step()

        optimizer.step = spied_step
        return optimizer

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    first_batch_norm = torch.autograd.grad(mse(model, regression_batch(0)), list(model.parameters()))
    first_batch_norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in first_batch_norm])).item()
    config = TrainConfig(steps=6, lr=1e-3, warmup_steps=1, grad_clip=grad_clip)
    h = train(model, regression_batch, mse, config, progress=False, build_optimizer=spied_optimizer)
    assert h.grad_norm[0] == pytest.approx(first_batch_norm, rel=1e-6)  # the raw norm of the first batch
    if grad_clip is None:
        assert seen == pytest.approx(h.grad_norm, rel=1e-6)
    else:
        assert min(h.grad_norm) > 10 * grad_clip  # so every step was clipped...
        assert seen == pytest.approx([grad_clip] * 6, rel=1e-4)  # ...and the optimizer saw the clipped gradient


# ---------------------------------------------------------------- checkpoints and resumption


def rng_draws():
    return torch.rand(2).tolist(), random.random(), np.random.rand()


def seed_all(seed):
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def test_resume_repeats_the_uninterrupted_run_exactly(tmp_path, capsys):
    seed_all(0)
    straight_model = TinyTiedModel()
    straight = train(straight_model, token_batch, token_loss, TOKEN_CONFIG, evaluate=token_eval, progress=False)
    straight_draws = rng_draws()

    torch.manual_seed(0)  # the same initial weights, but other dropout draws, give other losses: the RNG matters
    other_init = TinyTiedModel()
    torch.manual_seed(99)
    other = train(other_init, token_batch, token_loss, TOKEN_CONFIG, evaluate=token_eval, progress=False)
    assert other.train["loss"] != straight.train["loss"]

    def crashing_batch(step):
        if step == 17:
            raise RuntimeError("power cut")
        return token_batch(step)

    path = tmp_path / "run.safetensors"
    seed_all(0)
    with pytest.raises(RuntimeError, match="power cut"):
        train(
            TinyTiedModel(),
            crashing_batch,
            token_loss,
            TOKEN_CONFIG,
            evaluate=token_eval,
            checkpoint=path,
            progress=False,
        )
    assert [p.name for p in tmp_path.iterdir()] == ["run.safetensors"]  # no temp files left behind

    seed_all(123)  # a new process: other RNG states, other initial weights, a new optimizer
    model = TinyTiedModel()
    capsys.readouterr()
    resumed = train(model, token_batch, token_loss, TOKEN_CONFIG, evaluate=token_eval, checkpoint=path, progress=False)
    assert capsys.readouterr().err.startswith("resumed from run.safetensors at step 15/30\n")
    assert resumed.train["loss"] == straight.train["loss"]
    assert resumed.grad_norm == straight.grad_norm and resumed.lr == straight.lr
    assert resumed.eval_steps == straight.eval_steps == [5, 10, 15, 20, 25, 30]
    assert resumed.eval == straight.eval
    for name, tensor in straight_model.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name
    assert model.head.weight is model.embed.weight  # still tied after loading
    assert rng_draws() == straight_draws  # torch, Python and NumPy generators all continue as if never stopped

    def no_batches(step):
        raise AssertionError("a finished checkpoint needs no training")

    capsys.readouterr()
    again = train(TinyTiedModel(), no_batches, token_loss, TOKEN_CONFIG, checkpoint=path, progress=False)
    assert again.train == resumed.train
    assert capsys.readouterr() == ("", "")  # a page that loads a finished run prints no build talk


@pytest.fixture
def finished_checkpoint(tmp_path):
    torch.manual_seed(0)
    model = TinyTiedModel()
    config = TrainConfig(steps=4, lr=0.02, warmup_steps=1, eval_every=2)
    path = tmp_path / "checkpoints" / "tiny.safetensors"  # the folder is created
    train(model, token_batch, token_loss, config, checkpoint=path, progress=False)
    return model, config, path


def test_text_from_evaluate_is_recorded_and_survives_a_resume(tmp_path):
    """evaluate may return strings (a generated sample): they go to history.text, not into the printed numbers,
    and a finished checkpoint gives them back."""

    def evaluate_with_sample(model):
        best = model(torch.arange(VOCAB)[None]).argmax(-1)[0].tolist()  # the model's guess after each id
        return {"val_loss": token_loss(model, token_batch(10_000)), "sample": " ".join(map(str, best))}

    config = TrainConfig(steps=6, lr=0.02, warmup_steps=1, eval_every=3)
    path = tmp_path / "run.safetensors"
    torch.manual_seed(0)
    history = train(
        TinyTiedModel(), token_batch, token_loss, config, evaluate=evaluate_with_sample, checkpoint=path, progress=False
    )
    assert list(history.eval) == ["val_loss"] and len(history.text["sample"]) == 2
    assert all(isinstance(sample, str) for sample in history.text["sample"])
    again = train(
        TinyTiedModel(), token_batch, token_loss, config, evaluate=evaluate_with_sample, checkpoint=path, progress=False
    )
    assert again.text == history.text


def test_resume_refuses_another_config_or_model(finished_checkpoint):
    _, config, path = finished_checkpoint
    changed = TrainConfig(steps=4, lr=0.03, warmup_steps=1, eval_every=2, grad_clip=None)
    with pytest.raises(ValueError, match=r"different TrainConfig: lr \(checkpoint 0.02, now 0.03\), grad_clip"):
        train(TinyTiedModel(), token_batch, token_loss, changed, checkpoint=path, progress=False)
    with pytest.raises(ValueError, match=r"does not fit this model \(5 tensors differ\): embed.weight: checkpoint"):
        train(TinyTiedModel(dim=16), token_batch, token_loss, config, checkpoint=path, progress=False)


def test_load_weights_only(finished_checkpoint):
    trained, _, path = finished_checkpoint
    torch.manual_seed(5)
    fresh = load_weights(TinyTiedModel(), path)
    for name, tensor in trained.state_dict().items():
        assert torch.equal(fresh.state_dict()[name], tensor), name
    assert fresh.head.weight is fresh.embed.weight
    with pytest.raises(ValueError, match="does not fit this model"):
        load_weights(nn.Linear(3, 1), path)


def flip_last_byte(path):
    whole = path.read_bytes()
    path.write_bytes(whole[:-1] + bytes([whole[-1] ^ 0xFF]))  # the last byte of the last tensor's data


@pytest.mark.parametrize(("spoil", "match"), [
    (lambda path: path.write_bytes(b""), "is not a complete safetensors file"),
    (lambda path: path.write_bytes(path.read_bytes()[:-10]), "is not a complete safetensors file"),
    (lambda path: path.unlink() or path.mkdir(), "is a directory"),
    (lambda path: save_file({"model.embed.weight": torch.zeros(VOCAB, 8)}, path), "has no minformers metadata"),
    (flip_last_byte, "is corrupt: its contents no longer match the sha256 saved with them"),
    (lambda path: path.write_bytes(path.read_bytes().replace(b'\\"step\\": 4', b'\\"step\\": 3')), "is corrupt"),
])  # fmt: skip
def test_a_spoilt_checkpoint_is_refused_by_name(finished_checkpoint, spoil, match):
    _, config, path = finished_checkpoint
    spoil(path)
    for load in [
        lambda: load_weights(TinyTiedModel(), path),
        lambda: train(TinyTiedModel(), token_batch, token_loss, config, checkpoint=path, progress=False),
    ]:
        with pytest.raises(ValueError, match=f"^checkpoint {re.escape(str(path))} {match}"):
            load()


def test_a_checkpoint_saved_before_checksums_still_loads(finished_checkpoint):
    trained, _, path = finished_checkpoint
    with safe_open(path, framework="pt") as file:
        tensors, metadata = {key: file.get_tensor(key) for key in file.keys()}, file.metadata()
    save_file(tensors, path, metadata={"minformers": metadata["minformers"]})  # as saved before: no "sha256"
    assert torch.equal(load_weights(TinyTiedModel(), path).embed.weight, trained.embed.weight)


def test_saves_leave_no_partial_files(tmp_path, monkeypatch, capsys):
    path = tmp_path / "run.safetensors"
    dead = tmp_path / f".run.safetensors.{2**22 + 1}.partial"  # above Linux's largest pid: its save was killed
    running = tmp_path / f".run.safetensors.{os.getppid()}.partial"  # a live process's: still being written
    for partial in (dead, running):
        partial.write_bytes(b"half a checkpoint")
    saves = []

    def second_save_fails(tensors, filename, metadata):
        saves.append(filename)
        if len(saves) == 2:
            filename.write_bytes(b"half a checkpoint")
            raise OSError(28, "No space left on device")
        save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr(minformers.support.checkpoints, "save_file", second_save_fails)
    config = TrainConfig(steps=4, lr=0.02, warmup_steps=1, eval_every=2)
    with pytest.raises(OSError, match="No space left on device"):
        train(TinyTiedModel(), token_batch, token_loss, config, checkpoint=path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, path.name])
    capsys.readouterr()
    train(TinyTiedModel(), token_batch, token_loss, config, checkpoint=path, progress=False)
    assert capsys.readouterr().err.startswith("resumed from run.safetensors at step 2/4\n")  # the first save is whole


# ---------------------------------------------------------------- errors


def test_nan_loss_stops_with_the_step():
    def loss_for_batch(model, batch):
        loss = mse(model, batch)
        return loss * float("nan") if batch[0][0, 0] == regression_batch(3)[0][0, 0] else loss

    with pytest.raises(FloatingPointError, match="loss is nan at step 3"):
        train(nn.Linear(3, 1), regression_batch, loss_for_batch, TrainConfig(steps=8, warmup_steps=1), progress=False)


@pytest.mark.parametrize(
    ("loss_for_batch", "error", "match"),
    [
        (lambda model, batch: (model(batch[0]) - batch[1]) ** 2, ValueError, r"scalar \(shape \(\)\), got shape \(32,"),
        (lambda model, batch: {"mse": mse(model, batch)}, TypeError, "a dict with a 'loss' tensor"),
        (lambda model, batch: 1.0, TypeError, "must return a scalar tensor"),
    ],
)
def test_bad_losses_are_refused(loss_for_batch, error, match):
    with pytest.raises(error, match=match):
        train(nn.Linear(3, 1), regression_batch, loss_for_batch, TrainConfig(steps=2, warmup_steps=0), progress=False)


def test_metric_names_must_not_change():
    steps_seen = []

    def loss_for_batch(model, batch):
        steps_seen.append(len(steps_seen))
        loss = mse(model, batch)
        return {"loss": loss} if len(steps_seen) == 1 else {"loss": loss, "extra": loss}

    with pytest.raises(ValueError, match=r"returned \['extra', 'loss'\], but earlier steps returned \['loss'\]"):
        train(nn.Linear(3, 1), regression_batch, loss_for_batch, TrainConfig(steps=3, warmup_steps=0), progress=False)


# ---------------------------------------------------------------- progress


def test_book_build_logs_one_line_per_evaluation_to_stderr(monkeypatch, capsys):
    monkeypatch.setenv("MINFORMERS_BUILD", "1")
    config = TrainConfig(steps=10, lr=0.05, warmup_steps=1, eval_every=4, log_every=3)
    evaluate = lambda model: {"val_loss": mse(model, regression_batch(99))}  # noqa: E731
    torch.manual_seed(0)
    h = train(nn.Linear(3, 1), regression_batch, mse, config, evaluate=evaluate)
    captured = capsys.readouterr()
    out = captured.err  # the book's pages leave stderr out: the lines are in a notebook, not on the site
    assert captured.out == "" and "\r" not in out and "it/s" not in out  # no bar
    lines = out.splitlines()
    assert [int(re.match(r"step +(\d+)/10 \| ", line).group(1)) for line in lines] == [3, 4, 6, 8, 9, 10]
    mean_4 = h.train["loss"][3]  # a line averages the steps since the previous line (here the one at step 3)
    # No wall time in these lines: a notebook run twice shows the same ones.
    assert re.fullmatch(rf"step  4/10 \| loss {mean_4:.4g} \| val_loss {h.eval['val_loss'][0]:.4g}", lines[1]), lines[1]
    mean_6 = sum(h.train["loss"][4:6]) / 2
    assert re.fullmatch(rf"step  6/10 \| loss {mean_6:.4g}", lines[2]), lines[2]  # a train-only line


@pytest.mark.parametrize(("build", "progress"), [(None, None), ("1", True)])
def test_progress_bar_is_drawn_to_stdout(monkeypatch, capsys, build, progress):
    if build is None:
        monkeypatch.delenv("MINFORMERS_BUILD", raising=False)
    else:
        monkeypatch.setenv("MINFORMERS_BUILD", build)
    config = TrainConfig(steps=10, lr=0.05, warmup_steps=1, eval_every=5)
    evaluate = lambda model: {"val_loss": mse(model, regression_batch(99))}  # noqa: E731
    train(nn.Linear(3, 1), regression_batch, mse, config, evaluate=evaluate, progress=progress)
    captured = capsys.readouterr()
    assert "100%" in captured.out and "10/10" in captured.out and "val_loss=" in captured.out
    assert not re.search(r"^step ", captured.out, re.MULTILINE) and captured.err == ""


def test_cached_in_build_builds_once_then_reads_the_pickle():
    calls = []

    def build():
        calls.append(1)
        return {"ids": torch.arange(3)}

    settings = {"test": str(uuid.uuid4())}  # a fresh entry every test run
    first = cached_in_build("test-cache", settings, build)
    again = cached_in_build("test-cache", settings, build)
    assert len(calls) == 1 and again is not first
    assert again["ids"].tolist() == [0, 1, 2]
    checkpoint_path("test-cache", settings, suffix=".pickle").unlink()
