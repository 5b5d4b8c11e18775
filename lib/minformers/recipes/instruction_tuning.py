"""Instruction tuning of the GPT page's character model: small tasks on Shakespeare's
words with answers a program can check, in one plain-text format.

    Q: reverse night
    A: thgin@

The prompt is "Q: <task> <word>\\nA: ", the response the answer and the end token "@"
(7 times in the 5 M characters of Shakespeare: the model meets it only here). The words
are Shakespeare's; every fourth of them, in sorted order, is held out, so that a model
scored on them cannot have learned their answers by heart.

    >>> example = Example("reverse", "night")
    >>> example.prompt + example.response
    'Q: reverse night\\nA: thgin@'
    >>> [Example(task, "dew").response for task in TASKS]
    ['wed@', 'd-e-w@', 'DEW@']
"""

import contextlib
import io
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch

from minformers.lora import apply_lora
from minformers.recipes.language_model_run import LMRun, train_language_model
from minformers.recipes.shakespeare_gpt import shakespeare_characters
from minformers.sft import greedy_responses, sft_batch, sft_loss
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.support.sample_quality import words
from minformers.train import TrainConfig, train

END = "@"
TASKS = {
    "reverse": lambda word: word[::-1],
    "spell": lambda word: "-".join(word),
    "shout": str.upper,
}
# for the LoRA page, taught to the instruction-tuned model: two skills it has, at once
LATER_TASKS = {"spell-shout": lambda word: "-".join(word.upper())}
# every linear layer of the GPT (PEFT's "all-linear"); embedding and head stay frozen
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "out_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Example:
    task: str  # one of TASKS or LATER_TASKS
    word: str

    @property
    def prompt(self) -> str:
        return f"Q: {self.task} {self.word}\nA: "

    @property
    def response(self) -> str:
        return (TASKS | LATER_TASKS)[self.task](self.word) + END


@lru_cache(maxsize=1)
def task_words() -> dict[str, list[str]]:
    """{"train": [...], "held_out": [...]}: the lowercase words of 3 to 7 letters that
    occur at least 5 times in the training works; every fourth, in sorted order, held
    out."""
    corpus = shakespeare_characters()
    counts: dict[str, int] = {}
    for word in words(corpus.tokenizer.decode(corpus.train_ids.tolist())):
        if word.isascii() and word.isalpha() and word.islower() and 3 <= len(word) <= 7:
            counts[word] = counts.get(word, 0) + 1
    frequent = sorted(word for word, count in counts.items() if count >= 5)
    return {
        "train": [w for i, w in enumerate(frequent) if i % 4],
        "held_out": frequent[::4],
    }


def held_out_examples(
    per_task: int = 50, tasks: tuple[str, ...] = tuple(TASKS)
) -> list[Example]:
    """``per_task`` held-out words for each of ``tasks``, the same ones every time."""
    draw = torch.Generator().manual_seed(0)
    pool = task_words()["held_out"]
    chosen = torch.randperm(len(pool), generator=draw)[:per_task].tolist()
    return [Example(task, pool[i]) for task in tasks for i in chosen]


@dataclass(frozen=True)
class SFTRun:
    """One fine-tuning run of the GPT page's network on the instruction tasks."""

    # "pretrained": start from the GPT page's model; "scratch": the same network with
    # random weights, the control that says what pretraining contributed;
    # "instruction-tuned": from SFTRun()'s result
    start: str = "pretrained"
    tasks: tuple[str, ...] = tuple(TASKS)  # what the examples ask, drawn alike
    # "response": the loss on the response's tokens only; "all": on every token,
    # the prompt's too
    loss_on: str = "response"
    # nine runs of this, on two workers, fit the page's budget
    schedule: TrainConfig = TrainConfig(
        steps=400, lr=3e-3, warmup_steps=40, eval_every=400
    )
    batch_size: int = 16  # examples per step, drawn from every task alike
    # None: every weight trains; r: only LoRA's A and B of rank r, on LORA_TARGETS
    lora_rank: int | None = None
    lora_alpha: float = 8.0  # the update is scaled by lora_alpha / lora_rank
    seed: int = 0  # the draw of the examples (and of the scratch weights)
    # the pretraining run whose network (and, with start="pretrained", weights) this
    # starts from: the GPT page's
    base: LMRun = LMRun()

    def __post_init__(self):
        starts = ("pretrained", "scratch", "instruction-tuned")
        if self.start not in starts:
            raise ValueError(f"start must be one of {starts}, got {self.start!r}")
        unknown = set(self.tasks) - set(TASKS | LATER_TASKS)
        if unknown or not self.tasks:
            raise ValueError(
                f"unknown tasks {sorted(unknown)}; choose from "
                f"{sorted(TASKS | LATER_TASKS)}"
            )
        if self.loss_on not in ("response", "all"):
            raise ValueError(
                f"loss_on must be 'response' or 'all', got {self.loss_on!r}"
            )


# The LoRA page: the instruction-tuned model learns the LATER_TASKS alone, briefly; LoRA
# takes a larger step than full fine-tuning (each rate the better of two in a trial)
LATER_SCHEDULE = TrainConfig(steps=40, lr=3e-3, warmup_steps=4, eval_every=40)
LORA_SCHEDULE = TrainConfig(steps=40, lr=1e-2, warmup_steps=4, eval_every=40)


def later_task_run(lora_rank: int | None = None, seed: int = 0) -> SFTRun:
    """The LoRA page's run: the LATER_TASKS from the instruction-tuned model, every
    weight training (``lora_rank`` None) or LoRA of that rank."""
    return SFTRun(
        start="instruction-tuned",
        tasks=tuple(LATER_TASKS),
        lora_rank=lora_rank,
        schedule=LATER_SCHEDULE if lora_rank is None else LORA_SCHEDULE,
        batch_size=12,  # 18 of these runs share one page's budget
        seed=seed,
    )


def starting_model(run: SFTRun) -> torch.nn.Module:
    """The base run's model (trained quietly if this build has not), or the same
    network freshly initialised with the run's seed."""
    corpus = shakespeare_characters()
    if run.start == "scratch":
        torch.manual_seed(run.seed)
        return run.base.build(corpus).train()
    if run.start == "instruction-tuned":
        with contextlib.redirect_stderr(io.StringIO()):
            model, _ = fine_tune(SFTRun(base=run.base), progress=False)
        return model.train()
    with contextlib.redirect_stderr(io.StringIO()):
        model, _ = train_language_model(corpus, run.base, progress=False)
    return model.train()


def encode(examples: list[Example]) -> tuple[list[list[int]], list[int]]:
    """Token ids of each example (prompt then response) and each prompt's length."""
    tokenizer = shakespeare_characters().tokenizer
    prompts = [tokenizer.encode(example.prompt) for example in examples]
    texts = [
        p + tokenizer.encode(e.response) for p, e in zip(prompts, examples, strict=True)
    ]
    return texts, [len(p) for p in prompts]


def fine_tune(
    run: SFTRun = SFTRun(), progress: bool | None = None
) -> tuple[torch.nn.Module, History]:
    """Fine-tune as ``run`` says, or load the result from this build's checkpoint;
    return the model (in eval mode) and its History ("loss")."""
    model = starting_model(run)
    if run.lora_rank is not None:
        torch.manual_seed(run.seed)  # A's initial draw
        apply_lora(model, LORA_TARGETS, run.lora_rank, run.lora_alpha)
    train_words = task_words()["train"]
    tasks = list(run.tasks)
    pad_id = shakespeare_characters().tokenizer.encode(END)[0]

    def batch_for_step(step: int) -> tuple[torch.Tensor, torch.Tensor]:
        draw = torch.Generator().manual_seed(run.seed * 1_000_003 + step)
        chosen = torch.randint(len(train_words), (run.batch_size,), generator=draw)
        task_of = torch.randint(len(tasks), (run.batch_size,), generator=draw)
        examples = [
            Example(tasks[t], train_words[w])
            for t, w in zip(task_of.tolist(), chosen.tolist(), strict=True)
        ]
        texts, prompt_lengths = encode(examples)
        return sft_batch(
            texts, prompt_lengths, pad_id, response_only=run.loss_on == "response"
        )

    def loss_for_batch(model: torch.nn.Module, batch) -> torch.Tensor:
        ids, labels = batch
        return sft_loss(model(ids), labels)

    history = train(
        model,
        batch_for_step,
        loss_for_batch,
        run.schedule,
        checkpoint=checkpoint_path("sft-shakespeare", asdict(run)),
        progress=progress,
    )
    return model.eval(), history


def answers(model: torch.nn.Module, examples: list[Example]) -> list[str]:
    """What ``model`` answers, greedily up to its end token, to each prompt."""
    tokenizer = shakespeare_characters().tokenizer
    prompts = [tokenizer.encode(example.prompt) for example in examples]
    longest = max(len(example.response) for example in examples) + 2
    end_id = tokenizer.encode(END)[0]
    written = greedy_responses(model, prompts, longest, end_id)
    return [tokenizer.decode(tokens) for tokens in written]


def exact_match(model: torch.nn.Module, examples: list[Example]) -> list[bool]:
    """Whether each answer is exactly the expected one."""
    given = answers(model, examples)
    return [a == e.response[: -len(END)] for a, e in zip(given, examples, strict=True)]


def held_out_correct(
    run: SFTRun, tasks: tuple[str, ...] = tuple(TASKS), per_task: int = 50
) -> list[bool]:
    """Fine-tune as ``run`` says (or load it) and score it on
    ``held_out_examples(per_task, tasks)``, quietly: one of several runs shared out
    over ``parallel.map_in_workers``."""
    with contextlib.redirect_stderr(io.StringIO()):
        model, _ = fine_tune(run, progress=False)
    return exact_match(model, held_out_examples(per_task, tasks))
