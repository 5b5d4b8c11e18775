"""A character-level GPT trained on Shakespeare: one recipe that the GPT page runs and explains, and that later
pages (generation) start from.

    corpus = shakespeare_characters()            # 84 characters; every seventh work held out
    model, history = train_shakespeare_gpt(corpus)  # trained, or loaded from this build's checkpoint

The model is nanoGPT's CPU recipe (4 layers, 4 heads, 128 channels, a context of 64, 12 windows per step). Each
evaluation also writes a sample from the prompt "ROMEO:", kept in ``history.text["sample"]``.

    >>> corpus = shakespeare_characters()
    >>> corpus.tokenizer.vocab_size, corpus.held_out[:2]
    (84, ['alls_well_that_ends_well', 'henry_iv_part_1'])
"""

from dataclasses import asdict, dataclass
from functools import lru_cache

import torch

from minformers import data
from minformers.generation import generate
from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.language_modeling import CharTokenizer, random_windows
from minformers.train import History, TrainConfig, checkpoint_path, train
from minformers.validation import check_size

PROMPT = "ROMEO:\n"


@dataclass(frozen=True)
class CharCorpus:
    tokenizer: CharTokenizer  # the characters of all 42 works
    train_ids: torch.Tensor  # (N,), the 36 training works, concatenated
    validation_ids: torch.Tensor  # (M,), the held-out works
    held_out: list[str]  # their names: every seventh work in alphabetical order, as in the tokenization chapter


@lru_cache(maxsize=1)
def shakespeare_characters() -> CharCorpus:
    works = data.shakespeare_works()
    held_out = sorted(works)[::7]
    train_text = "".join(text for name, text in works.items() if name not in held_out)
    validation_text = "".join(works[name] for name in held_out)
    tokenizer = CharTokenizer(train_text + validation_text)
    return CharCorpus(tokenizer, torch.tensor(tokenizer.encode(train_text)),
                      torch.tensor(tokenizer.encode(validation_text)), held_out)


@dataclass(frozen=True)
class CharGPTRun:
    """What one training run is: the schedule, the batch, the sample written at each evaluation."""

    schedule: TrainConfig = TrainConfig(steps=300, lr=3e-3, warmup_steps=30, eval_every=50)
    batch_size: int = 12  # windows of max_len characters per step
    validation_windows: int = 64  # fixed held-out windows scored at every evaluation
    sample_length: int = 120  # characters generated after the prompt at each evaluation, temperature 0.8
    model_changes: tuple[tuple[str, object], ...] = ()  # GPTConfig.tiny overrides, e.g. (("n_layers", 2),)

    def __post_init__(self):
        for name in ("batch_size", "validation_windows", "sample_length"):
            check_size(name, getattr(self, name))

    def config(self, corpus: CharCorpus) -> GPTConfig:
        return GPTConfig.tiny(vocab_size=corpus.tokenizer.vocab_size, **dict(self.model_changes))


def sample(model: GPT, tokenizer: CharTokenizer, length: int, prompt: str = PROMPT, temperature: float = 0.8,
           seed: int = 0) -> str:
    """``length`` characters after ``prompt``, with the same random draws for a given seed (a sliding window, so
    any length works)."""
    ids = torch.tensor([tokenizer.encode(prompt)])
    out = generate(model, ids, length, temperature=temperature, generator=torch.Generator().manual_seed(seed),
                   use_cache=False)
    return tokenizer.decode(out[0])


def train_shakespeare_gpt(corpus: CharCorpus, run: CharGPTRun = CharGPTRun(),
                          progress: bool | None = None) -> tuple[GPT, History]:
    """Train the character GPT; return it (in eval mode) and its History: "loss", "val_loss", and at every
    evaluation a sample in ``history.text["sample"]``. The batch for step s is seeded by s."""
    config = run.config(corpus)
    validation = random_windows(corpus.validation_ids, config.max_len, run.validation_windows,
                                torch.Generator().manual_seed(12345))

    def batch_for_step(step: int) -> torch.Tensor:
        return random_windows(corpus.train_ids, config.max_len, run.batch_size, torch.Generator().manual_seed(step))

    def loss_for_batch(model: GPT, windows: torch.Tensor) -> torch.Tensor:
        return language_model_loss(model(windows), windows)

    def evaluate(model: GPT) -> dict:
        return {"val_loss": loss_for_batch(model, validation),
                "sample": sample(model, corpus.tokenizer, run.sample_length)}

    torch.manual_seed(0)  # the initial weights: the same model whatever ran before in the session
    model = GPT(config)
    settings = {"run": asdict(run), "config": asdict(config), "vocab": corpus.tokenizer.id_to_char,
                "held_out": corpus.held_out}
    history = train(model, batch_for_step, loss_for_batch, run.schedule, evaluate=evaluate,
                    checkpoint=checkpoint_path("gpt-shakespeare-chars", settings), progress=progress)
    return model.eval(), history
