"""NSP and SOP in the sentence world (``minformers.sentence_world``): pretrain a tiny
BERT with MLM plus one sentence task, then score it on both tasks, pair by pair.

The cross-evaluation is ALBERT's Table 5 (Lan et al., 2020): a model trained on one
sentence task, asked the other. ``sentence_task_correct`` returns one flag per held-out
pair, so that two models scored on the same pairs can be compared pair by pair.

    >>> run = WorldRun("sop", seed=0, steps=2)
    >>> model = train_in_world(run)
    >>> sentence_task_correct(model, run.world, "nsp", n=4).shape
    torch.Size([4])
"""

import contextlib
import io
from dataclasses import dataclass, field

import torch

from minformers.bert import BertConfig, BertForPreTraining
from minformers.objectives import pad
from minformers.recipes.bert_pretraining import pretraining_batch, pretraining_losses
from minformers.sentence_world import TASKS, SentenceWorld
from minformers.train import TrainConfig, train

HELD_OUT_SEED = 10**6  # held-out pairs come from a seed no training batch uses


@dataclass(frozen=True)
class WorldRun:
    """MLM plus ``task`` (nsp or sop) in ``world``, for ``steps`` steps of ``batch_size``
    fresh pairs. From random weights, SOP's learning is a lottery at these sizes: 3 of 3
    seeds at 1,500 steps in one process, 1 of 2 in one-thread workers (.wip/README.md)."""

    task: str
    seed: int = 0
    steps: int = 1500
    batch_size: int = 32
    lr: float = 2e-3
    d_model: int = 64
    n_heads: int = 4
    world: SentenceWorld = field(default_factory=SentenceWorld)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")

    def config(self) -> BertConfig:
        return BertConfig.tiny(
            self.world.vocab_size,
            max_len=32,
            d_model=self.d_model,
            d_ff=4 * self.d_model,
            n_heads=self.n_heads,
        )


def train_in_world(run: WorldRun) -> BertForPreTraining:
    """A tiny BERT trained from random weights (seeded by ``run.seed``) on MLM plus
    ``run.task``, each step on pairs it has not seen."""
    torch.manual_seed(run.seed)
    model = BertForPreTraining(run.config())

    def batch_for_step(step: int):
        pairs = run.world.pairs(run.task, run.batch_size, seed=run.seed * 10**5 + step)
        return pretraining_batch(run.world, pairs, torch.Generator().manual_seed(step))

    schedule = TrainConfig(
        steps=run.steps, lr=run.lr, warmup_steps=run.steps // 10, eval_every=run.steps
    )
    with contextlib.redirect_stderr(io.StringIO()):  # the final step's line: build talk
        train(model, batch_for_step, pretraining_losses, schedule, progress=False)
    return model.eval()


def sentence_task_correct(
    model: BertForPreTraining,
    world: SentenceWorld,
    task: str,
    n: int = 1000,
    seed: int = HELD_OUT_SEED,
) -> torch.Tensor:
    """(n,) booleans: whether the model's sentence head gets each of ``n`` held-out,
    unmasked pairs of ``task`` right (the same pairs for every model, given ``seed``)."""
    pairs = world.pairs(task, n, seed=seed)
    input_ids, attention_mask = pad(
        [p.input_ids for p in pairs], world.special_ids["pad"]
    )
    segment_ids, _ = pad([p.segment_ids for p in pairs], 0, input_ids.shape[1])
    # the sentence head's convention: 0 = B follows A
    labels = torch.tensor([0 if p.is_next else 1 for p in pairs])
    with torch.no_grad():
        logits = model.eval()(input_ids, segment_ids, attention_mask).nsp_logits
    return logits.argmax(-1) == labels


def cross_evaluation(run: WorldRun, n: int = 1000) -> dict[str, torch.Tensor]:
    """Train ``run`` and score it on both tasks' held-out pairs: task -> (n,) flags.
    Top level, so that ``map_in_workers`` can send it to a worker."""
    model = train_in_world(run)
    return {task: sentence_task_correct(model, run.world, task, n) for task in TASKS}
