"""Reinforcement learning with a verifiable reward on the instruction-tuned character
GPT (recipes.instruction_tuning): it reverses a held-out word right in some of its
samples, and a program can say which.

Each step draws ``prompts_per_step`` training words, samples ``group_size`` answers to
each at temperature 1, scores each with ``reward`` (1 for the right answer, plus a small
format reward for stopping with the end token) and takes one GRPO step (minformers.grpo)
on the sampled tokens. The control, ``method="sft"``, spends the same steps on
supervised fine-tuning: as many examples a step as GRPO scores answers, with the right
answers written out, so it trains on at least as much as GRPO and needs no sampling.

    >>> example = Example("reverse", "dew")
    >>> reward(example, "wed@")
    1.1
    >>> reward(example, "wet@"), reward(example, "wed")  # wrong, stops; right, no stop
    (0.1, 1.0)
"""

import contextlib
import io
from dataclasses import asdict, dataclass
from math import comb

import torch

from minformers.grpo import group_advantages, grpo_loss
from minformers.recipes.instruction_tuning import (
    END,
    Example,
    SFTRun,
    encode,
    fine_tune,
    held_out_examples,
    task_words,
)
from minformers.recipes.shakespeare_gpt import shakespeare_characters
from minformers.sft import continuations, sft_batch, sft_loss, token_log_probs
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.train import TrainConfig, train

TASK = "reverse"  # the task the instruction-tuned model gets right only sometimes
FORMAT_REWARD = 0.1  # for an answer that ends with the end token
EVAL_WORDS = 64  # held-out words scored
EVAL_SAMPLES = 8  # answers to each for pass@1 during training
PASS_AT_K_SAMPLES = 16  # and for pass@k, k up to 16, before and after


def reward(example: Example, written: str) -> float:
    """1 if ``written`` (the text after the prompt) is the right answer, plus
    FORMAT_REWARD if it ends with the end token."""
    answer = written.removesuffix(END)
    return float(answer == example.response[: -len(END)]) + FORMAT_REWARD * (
        written.endswith(END)
    )


@dataclass(frozen=True)
class RLRun:
    """One run from the instruction-tuned model on TASK's training words."""

    method: str = "grpo"  # or "sft": the same steps of supervised fine-tuning
    scale_advantages: bool = True  # divide by the group's std (False: Dr. GRPO)
    prompts_per_step: int = 8
    group_size: int = 8  # answers sampled per prompt (TRL's default)
    epsilon: float = 0.2  # the ratio's clip
    # a constant rate after warmup (the runs are short); 1e-3 undid the start's skill
    schedule: TrainConfig = TrainConfig(
        steps=40, lr=3e-4, warmup_steps=4, min_lr_ratio=1.0, eval_every=20
    )
    seed: int = 0  # the draw of the words and of the samples

    def __post_init__(self):
        if self.method not in ("grpo", "sft"):
            raise ValueError(f'method must be "grpo" or "sft", got {self.method!r}')
        if self.group_size < 2:
            raise ValueError(
                "group_size must be at least 2: an answer alone in its group has "
                "no group to be measured against"
            )


def end_id() -> int:
    return shakespeare_characters().tokenizer.encode(END)[0]


def prompt_ids(examples: list[Example]) -> list[list[int]]:
    tokenizer = shakespeare_characters().tokenizer
    return [tokenizer.encode(example.prompt) for example in examples]


def answer_room(examples: list[Example]) -> int:
    """Tokens a model may write: the longest right answer's, and two more."""
    return max(len(example.response) for example in examples) + 2


def sample(
    model: torch.nn.Module, examples: list[Example], n: int, generator: torch.Generator
) -> list[list[list[int]]]:
    """``n`` answers to each example at temperature 1, as token ids, each with its end
    token if it wrote one."""
    return continuations(
        model.eval(),
        prompt_ids(examples),
        answer_room(examples),
        end_id(),
        samples=n,
        temperature=1.0,
        generator=generator,
    )


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The chance that at least one of k answers drawn from n (``correct`` of them
    right) is right: Chen et al. (2021)'s unbiased estimate of pass@k.

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 4)
    (0.25, 0.5, 0.0)
    """
    return 1.0 - comb(n - correct, k) / comb(n, k)


def correct_counts(
    model: torch.nn.Module, examples: list[Example], n: int, seed: int = 0
) -> list[int]:
    """How many of ``n`` answers sampled for each example are right."""
    decode = shakespeare_characters().tokenizer.decode
    written = sample(model, examples, n, torch.Generator().manual_seed(seed))
    return [
        sum(reward(example, decode(answer)) >= 1 for answer in answers)
        for example, answers in zip(examples, written, strict=True)
    ]


def grpo_step_loss(
    model: torch.nn.Module, run: RLRun, examples: list[Example], generator
) -> dict:
    """Sample a group of answers to each example, score them, and return the GRPO loss
    (one update per batch, so the sampling policy is the current one, detached) with
    the mean reward, the share of right answers and the share of groups whose answers
    all scored alike."""
    decode = shakespeare_characters().tokenizer.decode
    written = sample(model, examples, run.group_size, generator)
    model.train()
    rewards = torch.tensor(
        [
            reward(example, decode(answer))
            for example, answers in zip(examples, written, strict=True)
            for answer in answers
        ]
    )
    advantages = group_advantages(rewards, run.group_size, run.scale_advantages)
    # a group whose answers all scored alike has advantages 0, so no gradient: it is
    # left out of the forward pass (DAPO's dynamic sampling, without the resampling)
    groups = rewards.view(-1, run.group_size)
    learns = (groups != groups[:, :1]).any(1)  # (prompts,): not all alike
    metrics = {
        "reward": rewards.mean(),
        "right": (rewards >= 1).float().mean(),
        "flat groups": 1 - learns.float().mean(),
    }
    teaching = learns.nonzero().flatten().tolist()
    if not teaching:  # a step that changes nothing but what Adam carries over
        zero = sum(parameter.sum() for parameter in model.parameters()) * 0.0
        return {"loss": zero, **metrics}
    prompts = prompt_ids(examples)
    texts = [prompts[g] + answer for g in teaching for answer in written[g]]
    starts = [len(prompts[g]) for g in teaching for _ in written[g]]
    ids, labels = sft_batch(texts, starts, end_id())
    policy = token_log_probs(model(ids), labels)  # (B, T - 1)
    kept = advantages.view(-1, run.group_size)[teaching].flatten()
    mask = labels[:, 1:] != -100
    loss = grpo_loss(policy, policy.detach(), kept, mask, run.epsilon)
    return {"loss": loss, **metrics}


def train_rl(
    run: RLRun = RLRun(), progress: bool | None = None
) -> tuple[torch.nn.Module, History]:
    """Train from the instruction-tuned model as ``run`` says (or load the result);
    every ``eval_every`` steps, pass@1 on the held-out words, estimated from
    EVAL_SAMPLES answers to each. Returns the model (eval mode) and History ("loss",
    and for GRPO "reward", "right" and "flat groups"; eval "pass@1")."""
    with contextlib.redirect_stderr(io.StringIO()):
        model, _ = fine_tune(SFTRun(), progress=False)
    by_length: dict[int, list[str]] = {}
    for word in task_words()["train"]:
        by_length.setdefault(len(word), []).append(word)
    lengths = sorted(by_length)
    held_out = held_out_words()
    generator = torch.Generator().manual_seed(run.seed)

    def examples_for_step(step: int) -> list[Example]:
        """Words of one length, so that their answers are sampled in one batch."""
        draw = torch.Generator().manual_seed(run.seed * 1_000_003 + step)
        words = by_length[lengths[torch.randint(len(lengths), (1,), generator=draw)]]
        size = run.prompts_per_step * (run.group_size if run.method == "sft" else 1)
        chosen = torch.randint(len(words), (size,), generator=draw).tolist()
        return [Example(TASK, words[i]) for i in chosen]

    def loss_for_batch(model: torch.nn.Module, examples: list[Example]):
        if run.method == "grpo":
            return grpo_step_loss(model, run, examples, generator)
        texts, prompt_lengths = encode(examples)
        ids, labels = sft_batch(texts, prompt_lengths, end_id())
        return sft_loss(model(ids), labels)

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        counts = correct_counts(model, held_out, EVAL_SAMPLES)
        return {"pass@1": sum(counts) / (len(counts) * EVAL_SAMPLES)}

    history = train(
        model,
        examples_for_step,
        loss_for_batch,
        run.schedule,
        evaluate=evaluate,
        checkpoint=checkpoint_path("rl-shakespeare", asdict(run)),
        progress=progress,
    )
    return model.eval(), history


@dataclass
class Outcome:
    history: History
    held_out: list[int]  # right answers of PASS_AT_K_SAMPLES, per held-out word
    practised: list[int]  # of EVAL_SAMPLES, per word of practised_words()


def outcome(run: RLRun) -> Outcome:
    """Train as ``run`` says (or load it) and count its right answers on the held-out
    words and on words it trains on, quietly: one of several runs shared out over
    ``parallel.map_in_workers``."""
    with contextlib.redirect_stderr(io.StringIO()):
        model, history = train_rl(run, progress=False)
    return Outcome(
        history,
        correct_counts(model, held_out_words(), PASS_AT_K_SAMPLES),
        correct_counts(model, practised_words(), EVAL_SAMPLES),
    )


def held_out_words() -> list[Example]:
    """EVAL_WORDS held-out words, the same every time."""
    return held_out_examples(EVAL_WORDS, (TASK,))


def practised_words() -> list[Example]:
    """EVAL_WORDS of the training words, the same every time: words that supervised
    fine-tuning showed the model and that the runs draw from."""
    words = task_words()["train"]
    draw = torch.Generator().manual_seed(0)
    chosen = torch.randperm(len(words), generator=draw)[:EVAL_WORDS].tolist()
    return [Example(TASK, words[i]) for i in chosen]
