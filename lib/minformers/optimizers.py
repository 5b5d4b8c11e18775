"""Nine optimizers written out, one small class each, following torch.optim's
update rules exactly.

Nine optimizers, one small class each, share the file to be read side by side.

Every class is a ``torch.optim.Optimizer``, so it drops into any training loop:
``zero_grad``, ``step``, ``param_groups`` (whose "lr" a schedule may change every step)
and ``state_dict`` work as for torch's own. The shared ``step`` walks the parameters;
each class writes its rule for one parameter in ``update``, in the order torch applies
it, so that the two agree to rounding (the tests run 100 steps of each against
torch.optim). Momentum and Nesterov are settings of ``SGD``, as in torch; ``OPTIMIZERS``
names all nine.

Symbols, as in the optimizers page: θ a parameter, g its gradient, γ the learning rate
(lr), λ the weight decay, t the number of the update, counted from 1. Left out: torch's
``maximize``, ``amsgrad``, the fused and foreach kernels, and complex and sparse
gradients.

    >>> w = torch.tensor([1.0, -2.0], requires_grad=True)
    >>> optimizer = SGD([w], lr=0.1)
    >>> (w ** 2).sum().backward()  # g = 2w = [2, -4]
    >>> optimizer.step()  # θ - γ g
    >>> w.detach()
    tensor([ 0.8000, -1.6000])
    >>> SGD([w], lr=-1.0)
    Traceback (most recent call last):
    ValueError: lr must be >= 0, got -1.0
"""

import math

import torch


def _check(
    name: str,
    value: float,
    low: float = 0.0,
    high: float = math.inf,
    high_included: bool = True,
) -> None:
    """Raise ValueError naming ``name`` unless low <= value <= high (or < high); written
    so that NaN fails too."""
    inside = low <= value and (value <= high if high_included else value < high)
    if not inside:
        limit = (
            f">= {low:g}"
            if high == math.inf
            else f"in [{low:g}, {high:g}{']' if high_included else ')'}"
        )
        raise ValueError(f"{name} must be {limit}, got {value}")


def _require_betas(betas) -> None:
    if len(betas) != 2:
        raise ValueError(f"betas must be two numbers, got {betas}")
    for index, beta in enumerate(betas):
        _check(f"betas[{index}]", beta, 0.0, 1.0, high_included=False)


class _Optimizer(torch.optim.Optimizer):
    """What the nine share: a ``step`` that hands every parameter with a
    gradient to ``update``."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        # some algorithms (L-BFGS) re-evaluate the loss; ours only pass it through
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    self.update(param, param.grad, self.state[param], group)
        return loss

    def update(
        self, param: torch.Tensor, grad: torch.Tensor, state: dict, group: dict
    ) -> None:
        """Change ``param`` in place, given its gradient, its state (empty at the first
        update) and its group."""
        raise NotImplementedError


class SGD(_Optimizer):
    """Stochastic gradient descent, with optional momentum (heavy ball)
    or Nesterov momentum.

    b ← μ b + (1 − dampening) g  (b = g at the first step),  then  θ ← θ − γ b,
    or with Nesterov  θ ← θ − γ (g + μ b): the step looks ahead along the velocity.

    >>> w = torch.tensor([1.0], requires_grad=True)
    >>> optimizer = SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):  # a constant gradient of 1: b = 1, then 0.9 * 1 + 1 = 1.9
    ...     w.grad = torch.ones(1)
    ...     optimizer.step()
    >>> round(w.item(), 4)  # 1 - 0.1 * 1 - 0.1 * 1.9
    0.71
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        _check("lr", lr)
        _check("momentum", momentum)
        _check("weight_decay", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                "nesterov needs momentum > 0 and dampening = 0, got "
                f"momentum={momentum}, dampening={dampening}"
            )
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
            ),
        )

    def update(self, param, grad, state, group):
        if group["weight_decay"]:
            # L2: the gradient of λ/2 |θ|²
            grad = grad.add(param, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum:
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = grad.clone()
            else:
                state["momentum_buffer"].mul_(momentum).add_(
                    grad, alpha=1 - group["dampening"]
                )
            velocity = state["momentum_buffer"]
            grad = grad.add(velocity, alpha=momentum) if group["nesterov"] else velocity
        param.add_(grad, alpha=-group["lr"])


class Adagrad(_Optimizer):
    """Adagrad: each coordinate's step is divided by the root of the sum of all its
    squared gradients so far.

    s ← s + g²,  θ ← θ − γ_t g / (√s + ε),  with γ_t = γ / (1 + (t − 1) lr_decay).

    >>> w = torch.tensor([0.0, 0.0], requires_grad=True)
    >>> optimizer = Adagrad([w], lr=1.0)
    >>> w.grad = torch.tensor([100.0, 0.01])  # gradients 10,000 times apart...
    >>> optimizer.step()
    >>> w.detach()  # ...give steps of the same size: -g / |g|
    tensor([-1., -1.])
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ):
        for name, value in dict(
            lr=lr,
            lr_decay=lr_decay,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            eps=eps,
        ).items():
            _check(name, value)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                eps=eps,
            ),
        )

    def update(self, param, grad, state, group):
        if not state:
            state["step"] = 0
            state["sum"] = torch.full_like(param, group["initial_accumulator_value"])
        state["step"] += 1
        if group["weight_decay"]:
            grad = grad.add(param, alpha=group["weight_decay"])
        rate = group["lr"] / (1 + (int(state["step"]) - 1) * group["lr_decay"])
        state["sum"].addcmul_(grad, grad)  # s ← s + g²
        param.addcdiv_(grad, state["sum"].sqrt().add_(group["eps"]), value=-rate)


class RMSprop(_Optimizer):
    """RMSprop: Adagrad with a forgetting average instead of a sum, so steps do
    not shrink forever.

    v ← α v + (1 − α) g²,  θ ← θ − γ g / (√v + ε);
    with momentum μ:  b ← μ b + g / (√v + ε),  θ ← θ − γ b.
    ``centered`` also tracks the mean gradient m and divides by √(v − m²) + ε, an
    estimate of the spread.

    >>> w = torch.tensor([0.0], requires_grad=True)
    >>> optimizer = RMSprop([w], lr=0.01, alpha=0.99)
    >>> w.grad = torch.tensor([3.0])
    >>> # v = 0.01 * 9, so the step is 0.01 * 3 / 0.3 = 0.1: ten times lr, at first
    >>> optimizer.step()
    >>> round(w.item(), 4)
    -0.1
    """

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ):
        for name, value in dict(
            lr=lr, eps=eps, weight_decay=weight_decay, momentum=momentum
        ).items():
            _check(name, value)
        _check("alpha", alpha, 0.0, 1.0)
        super().__init__(
            params,
            dict(
                lr=lr,
                alpha=alpha,
                eps=eps,
                weight_decay=weight_decay,
                momentum=momentum,
                centered=centered,
            ),
        )

    def update(self, param, grad, state, group):
        alpha = group["alpha"]
        if not state:
            state.update(
                step=0,
                square_avg=torch.zeros_like(param),
                momentum_buffer=torch.zeros_like(param),
                grad_avg=torch.zeros_like(param),
            )
        state["step"] += 1
        if group["weight_decay"]:
            grad = grad.add(param, alpha=group["weight_decay"])
        # v ← α v + (1 − α) g²
        state["square_avg"].mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if group["centered"]:
            state["grad_avg"].lerp_(grad, 1 - alpha)  # m ← α m + (1 − α) g
            # v − m²
            variance = state["square_avg"].addcmul(
                state["grad_avg"], state["grad_avg"], value=-1
            )
            denominator = variance.sqrt().add_(group["eps"])
        else:
            denominator = state["square_avg"].sqrt().add_(group["eps"])
        if group["momentum"] > 0:
            state["momentum_buffer"].mul_(group["momentum"]).addcdiv_(grad, denominator)
            param.add_(state["momentum_buffer"], alpha=-group["lr"])
        else:
            param.addcdiv_(grad, denominator, value=-group["lr"])


class Adadelta(_Optimizer):
    """Adadelta: RMSprop whose step size comes from the root mean square of its own past
    updates, not from γ.

    v ← ρ v + (1 − ρ) g²,  Δ = √(u + ε) / √(v + ε) · g,  u ← ρ u + (1 − ρ) Δ²,
    θ ← θ − γ Δ  (γ = 1 by default).
    The ratio of the two roots has the units of θ, whatever the units of the loss.

    >>> w = torch.tensor([0.0], requires_grad=True)
    >>> optimizer = Adadelta([w])
    >>> w.grad = torch.tensor([1.0])
    >>> optimizer.step()  # Δ = √1e-6 / √(0.1 + 1e-6): tiny, since u starts at 0
    >>> round(w.item(), 5)
    -0.00316
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        for name, value in dict(lr=lr, eps=eps, weight_decay=weight_decay).items():
            _check(name, value)
        _check("rho", rho, 0.0, 1.0)
        super().__init__(
            params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        )

    def update(self, param, grad, state, group):
        rho, eps = group["rho"], group["eps"]
        if not state:
            state.update(
                step=0,
                square_avg=torch.zeros_like(param),
                acc_delta=torch.zeros_like(param),
            )
        state["step"] += 1
        if group["weight_decay"]:
            grad = grad.add(param, alpha=group["weight_decay"])
        # v ← ρ v + (1 − ρ) g²
        state["square_avg"].mul_(rho).addcmul_(grad, grad, value=1 - rho)
        delta = (
            state["acc_delta"]
            .add(eps)
            .sqrt_()
            .div_(state["square_avg"].add(eps).sqrt_())
            .mul_(grad)
        )
        # u ← ρ u + (1 − ρ) Δ²
        state["acc_delta"].mul_(rho).addcmul_(delta, delta, value=1 - rho)
        param.add_(delta, alpha=-group["lr"])


class Adam(_Optimizer):
    """Adam: momentum (a mean of gradients, m) divided by the root of a mean of squared
    gradients (v), both bias-corrected, since they start at 0.

    m ← β₁ m + (1 − β₁) g,  v ← β₂ v + (1 − β₂) g²,
    m̂ = m / (1 − β₁ᵗ),  v̂ = v / (1 − β₂ᵗ),  θ ← θ − γ m̂ / (√v̂ + ε).
    Weight decay here is L2 (λθ added to g), as in torch.optim.Adam; see AdamW.

    >>> w = torch.tensor([0.0, 0.0], requires_grad=True)
    >>> optimizer = Adam([w], lr=0.1)
    >>> w.grad = torch.tensor([1e-3, 1e3])
    >>> # the first step is γ m̂ / √v̂ = γ sign(g), whatever the gradient's size
    >>> optimizer.step()
    >>> w.detach()
    tensor([-0.1000, -0.1000])
    """

    # AdamW: shrink θ directly, instead of adding λθ to the gradient
    decoupled_weight_decay = False

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        for name, value in dict(lr=lr, eps=eps, weight_decay=weight_decay).items():
            _check(name, value)
        _require_betas(betas)
        super().__init__(
            params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        )

    def update(self, param, grad, state, group):
        lr, decay, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
        if not state:
            state.update(
                step=0,
                exp_avg=torch.zeros_like(param),
                exp_avg_sq=torch.zeros_like(param),
            )
        state["step"] += 1
        t = int(state["step"])
        if decay and self.decoupled_weight_decay:
            param.mul_(1 - lr * decay)  # θ ← θ (1 − γλ), outside the moments
        elif decay:
            # g ← g + λθ, which the moments then rescale
            grad = grad.add(param, alpha=decay)
        state["exp_avg"].lerp_(grad, 1 - beta1)  # m ← β₁ m + (1 − β₁) g
        # v ← β₂ v + (1 − β₂) g²
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        # √v̂ + ε
        denominator = (state["exp_avg_sq"].sqrt() / math.sqrt(1 - beta2**t)).add_(
            group["eps"]
        )
        # θ ← θ − γ m̂ / (√v̂ + ε)
        param.addcdiv_(state["exp_avg"], denominator, value=-lr / (1 - beta1**t))


class AdamW(Adam):
    """AdamW: Adam with decoupled weight decay, θ ← θ (1 − γλ) before the Adam step, so
    every weight shrinks at the same rate, however large its gradients (with L2 inside
    Adam, weights with large gradients hardly decay). The default λ is 0.01, as in
    torch.optim.AdamW.

    >>> w = torch.tensor([1.0], requires_grad=True)
    >>> optimizer = AdamW([w], lr=0.1, weight_decay=0.5)
    >>> w.grad = torch.tensor([0.0])  # no gradient at all: only the decay acts
    >>> optimizer.step()
    >>> round(w.item(), 4)  # 1 - 0.1 * 0.5
    0.95
    """

    decoupled_weight_decay = True

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
    ):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class NAdam(_Optimizer):
    """NAdam: Adam with Nesterov momentum. The step mixes the current gradient and the
    momentum with the coefficients of this step and the next, μ_t and μ_{t+1}, which
    warm up from β₁/2 towards β₁:

    μ_t = β₁ (1 − ½ · 0.96^(t · momentum_decay)),
    θ ← θ − γ (1 − μ_t) / (1 − Πᵢ≤ₜ μᵢ) · g / (√v̂ + ε)
          − γ μ_{t+1} / (1 − Πᵢ≤ₜ₊₁ μᵢ) · m / (√v̂ + ε).

    >>> w = torch.tensor([0.0], requires_grad=True)
    >>> optimizer = NAdam([w], lr=0.1)
    >>> w.grad = torch.tensor([5.0])
    >>> # γ (1 + 0.1 μ₂ / (1 − μ₁μ₂)) sign(g), μ ≈ 0.45: Adam's γ sign(g) and a bit
    >>> optimizer.step()
    >>> round(w.item(), 3)
    -0.106
    """

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
    ):
        for name, value in dict(
            lr=lr, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay
        ).items():
            _check(name, value)
        _require_betas(betas)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=tuple(betas),
                eps=eps,
                weight_decay=weight_decay,
                momentum_decay=momentum_decay,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def update(self, param, grad, state, group):
        lr, decay, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
        if not state:
            state.update(
                step=0,
                mu_product=1.0,
                exp_avg=torch.zeros_like(param),
                exp_avg_sq=torch.zeros_like(param),
            )
        state["step"] += 1
        t = int(state["step"])
        if decay and group["decoupled_weight_decay"]:
            param.mul_(1 - lr * decay)
        elif decay:
            grad = grad.add(param, alpha=decay)
        mu = beta1 * (1 - 0.5 * 0.96 ** (t * group["momentum_decay"]))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * group["momentum_decay"]))
        state["mu_product"] = float(state["mu_product"]) * mu  # Πᵢ≤ₜ μᵢ
        mu_product_next = state["mu_product"] * mu_next
        state["exp_avg"].lerp_(grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        # √v̂ + ε
        denominator = state["exp_avg_sq"].div(1 - beta2**t).sqrt().add_(group["eps"])
        param.addcdiv_(
            grad, denominator, value=-lr * (1 - mu) / (1 - state["mu_product"])
        )
        param.addcdiv_(
            state["exp_avg"], denominator, value=-lr * mu_next / (1 - mu_product_next)
        )


# name -> (our class, torch's class, the settings that make it this optimizer)
OPTIMIZERS = {
    "SGD": (SGD, torch.optim.SGD, {}),
    "momentum": (SGD, torch.optim.SGD, {"momentum": 0.9}),
    "Nesterov": (SGD, torch.optim.SGD, {"momentum": 0.9, "nesterov": True}),
    "Adagrad": (Adagrad, torch.optim.Adagrad, {}),
    "RMSprop": (RMSprop, torch.optim.RMSprop, {}),
    "Adadelta": (Adadelta, torch.optim.Adadelta, {}),
    "Adam": (Adam, torch.optim.Adam, {}),
    "NAdam": (NAdam, torch.optim.NAdam, {}),
    "AdamW": (AdamW, torch.optim.AdamW, {}),
}
