"""What a training run measured, step by step and evaluation by evaluation, ready to
plot and to save beside a checkpoint as plain lists.

    >>> history = History()
    >>> history.add("train", {"loss": torch.tensor(2.5)}, "loss_for_batch")
    >>> history.add("train", {"loss": 1.5}, "loss_for_batch")
    >>> history.train
    {'loss': [2.5, 1.5]}
    >>> History.from_dict(history.to_dict()) == history
    True
"""

import json
from dataclasses import asdict, dataclass, field

import torch


@dataclass
class History:
    """What a run measured, ready to plot: ``ax.plot(h.steps, h.train["loss"])``,
    ``ax.plot(h.eval_steps, ...)``."""

    steps: list[int] = field(default_factory=list)  # updates before each train batch
    train: dict[str, list[float]] = field(default_factory=dict)  # name -> per step
    lr: list[float] = field(default_factory=list)  # learning rate used at each step
    grad_norm: list[float] = field(default_factory=list)  # global L2, before clipping
    seconds: list[float] = field(default_factory=list)  # since the start, per step
    eval_steps: list[int] = field(default_factory=list)  # updates before each eval
    eval: dict[str, list[float]] = field(default_factory=dict)  # name -> per eval
    text: dict[str, list[str]] = field(default_factory=dict)  # evaluate's strings

    def to_dict(self) -> dict:
        return asdict(self)  # plain lists and dicts: json.dumps-able

    @classmethod
    def from_dict(cls, data: dict) -> "History":
        return cls(**json.loads(json.dumps(data)))  # a deep copy: no list is shared

    def last_eval(self, name: str) -> float:
        if name not in self.eval:
            raise KeyError(f"no eval metric {name!r}, only {sorted(self.eval)}")
        return self.eval[name][-1]

    def add(self, table_name: str, values: dict, what: str) -> None:
        """Append each value (a float or a str) to its list in ``table_name`` (train,
        eval or text); the names must be the same at every step, or the lists would no
        longer line up with their steps."""
        table = getattr(self, table_name)
        if table and set(values) != set(table):
            raise ValueError(
                f"{what} returned {sorted(values)}, but earlier steps returned "
                f"{sorted(table)}"
            )
        for name, value in values.items():
            if not isinstance(value, str):  # a number or a one-element tensor
                value = (
                    value.detach().item() if torch.is_tensor(value) else float(value)
                )
            table.setdefault(name, []).append(value)
