"""Each of our nine optimizers equals its torch.optim counterpart, with the same hyperparameters, over 100 steps;
hand-derived first steps; bad hyperparameters refused; and the training loop accepts them."""

import copy
import math

import pytest
import torch
from torch import nn

from minformers import optimizers
from minformers.optimizers import OPTIMIZERS
from minformers.train import TrainConfig, train

# Settings beyond each optimizer's defaults: weight decay everywhere, and the options that change the rule.
SETTINGS = {
    "SGD": [{"lr": 0.05}, {"lr": 0.05, "weight_decay": 0.1}],
    "momentum": [{"lr": 0.02}, {"lr": 0.02, "weight_decay": 0.1, "dampening": 0.3}],
    "Nesterov": [{"lr": 0.02}, {"lr": 0.02, "weight_decay": 0.1, "momentum": 0.5}],
    "Adagrad": [{}, {"lr": 0.1, "weight_decay": 0.1, "lr_decay": 0.01, "initial_accumulator_value": 0.5}],
    "RMSprop": [{"lr": 1e-3}, {"lr": 1e-3, "weight_decay": 0.1, "momentum": 0.9, "centered": True, "alpha": 0.9}],
    "Adadelta": [{}, {"lr": 0.5, "weight_decay": 0.1, "rho": 0.95, "eps": 1e-4}],
    "Adam": [{"lr": 1e-2}, {"lr": 1e-2, "weight_decay": 0.1, "betas": (0.8, 0.99), "eps": 1e-6}],
    "NAdam": [{"lr": 1e-2}, {"lr": 1e-2, "weight_decay": 0.1, "momentum_decay": 0.01},
              {"lr": 1e-2, "weight_decay": 0.1, "decoupled_weight_decay": True}],
    "AdamW": [{"lr": 1e-2}, {"lr": 1e-2, "weight_decay": 0.5, "betas": (0.5, 0.9)}],
}
CASES = [(name, setting) for name in OPTIMIZERS for setting in SETTINGS[name]]


def run(optimizer_class, settings, dtype=torch.float64, steps=100):
    """A small MLP fitting a smooth target, with two parameter groups (the biases at a tenth of the lr): the
    weights after ``steps`` updates, and the loss at each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1)).to(dtype)
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1), dtype=dtype)
    y = torch.sin(x.sum(1, keepdim=True))
    weights = [p for p in model.parameters() if p.dim() == 2]
    biases = [p for p in model.parameters() if p.dim() == 1]
    lr = settings.get("lr", optimizer_class.__init__.__defaults__[0])
    optimizer = optimizer_class([{"params": weights}, {"params": biases, "lr": lr / 10}], **settings)
    losses = []
    for step in range(steps):
        if step == steps // 2:  # as a schedule does: change the learning rate mid-run
            for group in optimizer.param_groups:
                group["lr"] *= 0.5
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.cat([p.detach().flatten() for p in model.parameters()]), losses


@pytest.mark.parametrize("name, settings", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_equals_torch_optim_over_100_steps(name, settings):
    ours, theirs, defaults = OPTIMIZERS[name]
    settings = {**defaults, **settings}
    our_weights, our_losses = run(ours, settings)
    their_weights, their_losses = run(theirs, settings)
    assert (our_weights - their_weights).abs().max().item() < 1e-6
    assert max(abs(a - b) for a, b in zip(our_losses, their_losses, strict=True)) < 1e-6
    assert our_losses[-1] < our_losses[0]  # it optimises: the comparison is not between two frozen models


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_equals_torch_optim_in_float32(name):
    ours, theirs, defaults = OPTIMIZERS[name]
    settings = {**defaults, **SETTINGS[name][-1]}
    difference = (run(ours, settings, torch.float32)[0] - run(theirs, settings, torch.float32)[0]).abs().max()
    assert difference.item() < 1e-6


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_defaults_are_torchs(name):
    ours, theirs, _ = OPTIMIZERS[name]
    parameter = [nn.Parameter(torch.zeros(1))]
    our_defaults, their_defaults = ours(parameter).defaults, theirs(parameter).defaults
    assert {key: our_defaults[key] for key in our_defaults} == {key: their_defaults[key] for key in our_defaults}


def test_state_dict_round_trip_continues_the_same_run():
    model = nn.Linear(3, 1).double()
    x = torch.randn(8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def steps(optimizer, count):
        for _ in range(count):
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()

    start = {name: value.clone() for name, value in model.state_dict().items()}
    optimizer = optimizers.NAdam(model.parameters(), lr=0.01)
    steps(optimizer, 20)
    saved = copy.deepcopy(optimizer.state_dict())  # state_dict shares the state's tensors
    steps(optimizer, 20)
    uninterrupted = model.weight.detach().clone()
    model.load_state_dict(start)
    steps(optimizers.NAdam(model.parameters(), lr=0.01), 20)
    resumed = optimizers.NAdam(model.parameters(), lr=0.01)
    resumed.load_state_dict(saved)
    steps(resumed, 20)
    torch.testing.assert_close(model.weight.detach(), uninterrupted, rtol=0, atol=1e-15)


# Hand-derived single steps.

def one_step(optimizer_class, param, grad, **settings):
    param = torch.tensor(param, dtype=torch.float64, requires_grad=True)
    optimizer = optimizer_class([param], **settings)
    param.grad = torch.tensor(grad, dtype=torch.float64)
    optimizer.step()
    return param.detach().tolist()


def test_first_steps_by_hand():
    assert one_step(optimizers.SGD, [1.0, -2.0], [2.0, -4.0], lr=0.1) == pytest.approx([0.8, -1.6])
    # Nesterov's first step: b = g, then θ − γ (g + μ b) = θ − γ (1 + μ) g
    assert one_step(optimizers.SGD, [0.0], [1.0], lr=0.1, momentum=0.9, nesterov=True) == pytest.approx([-0.19])
    # Adam and Adagrad take steps of size γ per coordinate at first, whatever the gradient's scale
    assert one_step(optimizers.Adam, [0.0, 0.0], [1e-3, -1e3], lr=0.1) == pytest.approx([-0.1, 0.1], rel=1e-4)
    assert one_step(optimizers.Adagrad, [0.0, 0.0], [1e-3, -1e3], lr=0.1) == pytest.approx([-0.1, 0.1], rel=1e-4)
    # RMSprop: v = (1 − α) g², so the step is γ / √(1 − α) = 10 γ for α = 0.99
    assert one_step(optimizers.RMSprop, [0.0], [3.0], lr=0.01) == pytest.approx([-0.1], rel=1e-6)
    # Adadelta: Δ = √ε / √((1 − ρ) g² + ε) · g
    expected = -math.sqrt(1e-6) / math.sqrt(0.1 * 4 + 1e-6) * 2
    assert one_step(optimizers.Adadelta, [0.0], [2.0]) == pytest.approx([expected], rel=1e-12)
    # AdamW with a zero gradient only decays; Adam's L2 decay goes through the normalisation and becomes γ sign(θ)
    assert one_step(optimizers.AdamW, [2.0], [0.0], lr=0.1, weight_decay=0.5) == pytest.approx([1.9])
    assert one_step(optimizers.Adam, [2.0], [0.0], lr=0.1, weight_decay=0.5) == pytest.approx([1.9], rel=1e-6)
    assert one_step(optimizers.Adam, [200.0], [0.0], lr=0.1, weight_decay=0.5) == pytest.approx([199.9], rel=1e-6)


@pytest.mark.parametrize("optimizer_class, settings, message", [
    (optimizers.SGD, {"lr": -1.0}, "lr must be >= 0, got -1.0"),
    (optimizers.SGD, {"lr": math.nan}, "lr must be >= 0, got nan"),
    (optimizers.SGD, {"momentum": -0.5}, "momentum must be >= 0"),
    (optimizers.SGD, {"nesterov": True}, "nesterov needs momentum > 0 and dampening = 0"),
    (optimizers.SGD, {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "nesterov needs momentum > 0"),
    (optimizers.Adagrad, {"lr_decay": -1.0}, "lr_decay must be >= 0"),
    (optimizers.Adagrad, {"eps": -1e-10}, "eps must be >= 0"),
    (optimizers.RMSprop, {"alpha": 1.5}, r"alpha must be in \[0, 1\], got 1.5"),
    (optimizers.Adadelta, {"rho": -0.1}, r"rho must be in \[0, 1\]"),
    (optimizers.Adam, {"betas": (1.0, 0.999)}, r"betas\[0\] must be in \[0, 1\), got 1.0"),
    (optimizers.Adam, {"betas": (0.9, -0.1)}, r"betas\[1\] must be in \[0, 1\)"),
    (optimizers.AdamW, {"betas": (0.9,)}, "betas must be two numbers"),
    (optimizers.AdamW, {"weight_decay": -0.01}, "weight_decay must be >= 0"),
    (optimizers.NAdam, {"momentum_decay": -1.0}, "momentum_decay must be >= 0"),
])
def test_bad_hyperparameters_are_refused(optimizer_class, settings, message):
    with pytest.raises(ValueError, match=message):
        optimizer_class([nn.Parameter(torch.zeros(1))], **settings)


def test_closure_is_called_and_its_loss_returned():
    w = nn.Parameter(torch.ones(1))
    optimizer = optimizers.Adam([w], lr=0.1)

    def closure():
        optimizer.zero_grad()
        loss = (w**2).sum()
        loss.backward()
        return loss

    assert optimizer.step(closure).item() == 1.0 and w.item() < 1.0


def test_train_accepts_another_optimizer():
    torch.manual_seed(0)
    model = nn.Linear(1, 1)

    def batch_for_step(step):
        x = torch.randn(16, 1, generator=torch.Generator().manual_seed(step))
        return x, 3 * x

    def loss_for_batch(model, batch):
        return nn.functional.mse_loss(model(batch[0]), batch[1])

    built = []

    def build(model, config):
        built.append(optimizers.SGD(model.parameters(), lr=config.lr, momentum=0.9))
        return built[-1]

    config = TrainConfig(steps=200, lr=0.05, warmup_steps=10, eval_every=200)
    history = train(model, batch_for_step, loss_for_batch, config, progress=False, build_optimizer=build)
    assert isinstance(built[0], optimizers.SGD) and built[0].param_groups[0]["lr"] == history.lr[-1]
    assert history.train["loss"][-1] < 1e-3 and round(model.weight.item(), 2) == 3.0
