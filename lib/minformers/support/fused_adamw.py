"""AdamW in torch's fused kernel, without ``torch.optim``: what ``make_optimizer``
(``minformers.train``) returns.

The fused kernel does the plain loop's arithmetic up to float rounding (tested), several
times faster on a CPU, where updating a token table element by element would take a
good part of a small model's step. Why not ``torch.optim.AdamW(fused=True)``: building
any ``torch.optim.Optimizer`` imports ``torch._dynamo``, about 1.6 s here, paid once by
every process that trains, and the book's pages and their worker processes train dozens
of small models. This class calls the same kernel (``torch._fused_adamw_``) and keeps
the same ``param_groups`` (the schedule sets each group's "lr"), ``zero_grad``, and
``state_dict`` / ``load_state_dict`` in torch's layout (tested against torch's AdamW).

Adam's first step moves each entry by about lr, against its gradient's sign, whatever
the gradient's size:

    >>> w = torch.nn.Parameter(torch.tensor([1.0, -1.0]))
    >>> optimizer = FusedAdamW([{"params": [w]}], lr=0.1)
    >>> w.grad = torch.tensor([0.5, -20.0])
    >>> optimizer.step()
    >>> [round(x, 4) for x in w.tolist()]
    [0.9, -0.9]
"""

import torch


class FusedAdamW:
    """AdamW over parameter ``groups`` (dicts with "params" and optionally "lr",
    "betas", "eps", "weight_decay"); the keyword arguments are the groups' defaults.
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
        # per parameter: "step" (a float32 scalar, as torch keeps it), "exp_avg" and
        # "exp_avg_sq", made at its first update
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
