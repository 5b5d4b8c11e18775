"""A character-level language model trained on Shakespeare: one recipe that the GPT page runs and explains, that
later pages start from (generation), and that trains a Llama-style decoder on exactly the same data and budget
(the modern-decoder page).

    corpus = shakespeare_characters()         # 84 characters; every seventh work held out
    model, history = train_char_model(corpus)  # trained, or loaded from this build's checkpoint

The GPT is nanoGPT's CPU recipe (4 layers, 4 heads, 128 channels, a context of 64, 12 windows per step); the Llama
has the same depth, width and heads, with the feed-forward width chosen so that the two have about as many
parameters. Each evaluation also writes a sample from the prompt "ROMEO:", kept in ``history.text["sample"]``.

    >>> corpus = shakespeare_characters()
    >>> corpus.tokenizer.vocab_size, corpus.held_out[:2]
    (84, ['alls_well_that_ends_well', 'henry_iv_part_1'])
"""

from dataclasses import asdict, dataclass
from functools import lru_cache

import torch
from torch import nn

from minformers import data
from minformers.generation import generate
from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.language_modeling import CharTokenizer, random_windows
from minformers.llama import LlamaConfig, LlamaForCausalLM
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
class CharRun:
    """What one training run is: the architecture, the schedule, the batch, the sample written at each evaluation."""

    architecture: str = "gpt"  # or "llama"
    schedule: TrainConfig = TrainConfig(steps=250, lr=3e-3, warmup_steps=25, eval_every=50)
    batch_size: int = 12  # windows of max_len characters per step
    validation_windows: int = 64  # fixed held-out windows scored at every evaluation
    sample_length: int = 57  # characters generated after the prompt at each evaluation (temperature 0.8): with the
    # prompt, 64, the context, so the KV cache serves the whole sample
    model_changes: tuple[tuple[str, object], ...] = ()  # config overrides, e.g. (("n_layers", 2),)
    init_seed: int = 0  # the initial weights; change it to measure how much a result depends on them

    def __post_init__(self):
        if self.architecture not in ("gpt", "llama"):
            raise ValueError(f"architecture must be 'gpt' or 'llama', got {self.architecture!r}")
        for name in ("batch_size", "validation_windows", "sample_length"):
            check_size(name, getattr(self, name))

    def config(self, corpus: CharCorpus) -> GPTConfig | LlamaConfig:
        vocab_size, changes = corpus.tokenizer.vocab_size, dict(self.model_changes)
        if self.architecture == "gpt":
            return GPTConfig.tiny(vocab_size=vocab_size, **changes)
        # GPT's shape, with 2 key/value heads for its 4 query heads; SwiGLU's three matrices of width 384 hold about
        # as many parameters as GPT's two of width 512, which also covers GPT's position table.
        sizes = {"d_model": 128, "n_layers": 4, "n_heads": 4, "n_kv_heads": 2, "d_ff": 384, "max_len": 64}
        return LlamaConfig.tiny(vocab_size=vocab_size, **{**sizes, **changes})

    def build(self, corpus: CharCorpus) -> nn.Module:
        config = self.config(corpus)
        return GPT(config) if self.architecture == "gpt" else LlamaForCausalLM(config)


def sample(model: nn.Module, tokenizer: CharTokenizer, length: int, prompt: str = PROMPT, temperature: float = 0.8,
           seed: int = 0) -> str:
    """``length`` characters after ``prompt``, with the same random draws for a given seed. The KV cache is used
    when prompt and sample fit the context; longer samples slide a window over the text."""
    ids = torch.tensor([tokenizer.encode(prompt)])
    fits = ids.shape[1] + length <= model.config.max_len
    out = generate(model, ids, length, temperature=temperature, generator=torch.Generator().manual_seed(seed),
                   use_cache=fits)
    return tokenizer.decode(out[0])


def train_char_model(corpus: CharCorpus, run: CharRun = CharRun(),
                     progress: bool | None = None) -> tuple[nn.Module, History]:
    """Train the character model; return it (in eval mode) and its History: "loss", "val_loss", and at every
    evaluation a sample in ``history.text["sample"]``. The batch for step s is seeded by s, so two architectures
    trained with the same run see the same windows in the same order."""
    config = run.config(corpus)
    validation = random_windows(corpus.validation_ids, config.max_len, run.validation_windows,
                                torch.Generator().manual_seed(12345))

    def batch_for_step(step: int) -> torch.Tensor:
        return random_windows(corpus.train_ids, config.max_len, run.batch_size, torch.Generator().manual_seed(step))

    def loss_for_batch(model: nn.Module, windows: torch.Tensor) -> torch.Tensor:
        return language_model_loss(model(windows), windows)

    def evaluate(model: nn.Module) -> dict:
        return {"val_loss": loss_for_batch(model, validation),
                "sample": sample(model, corpus.tokenizer, run.sample_length)}

    torch.manual_seed(run.init_seed)  # the initial weights: the same model whatever ran before in the session
    model = run.build(corpus)
    settings = {"run": asdict(run), "config": asdict(config), "vocab": corpus.tokenizer.id_to_char,
                "held_out": corpus.held_out}
    history = train(model, batch_for_step, loss_for_batch, run.schedule, evaluate=evaluate,
                    checkpoint=checkpoint_path(f"{run.architecture}-shakespeare-chars", settings), progress=progress)
    return model.eval(), history
