"""The language-modelling recipe that the decoder chapters share: ``LMRun`` says what
one run is, and ``train_language_model`` trains it on a ``TextCorpus`` (or loads this
build's checkpoint of it).

The default run is nanoGPT's CPU recipe (4 layers, 4 heads, 128 channels, a context of
64, 12 windows per step); its Llama has the same depth, width and heads, with the
feed-forward width chosen so that the two have about as many parameters.

    >>> from minformers.language_modeling import CharTokenizer
    >>> tokenizer = CharTokenizer("to be or not to be")
    >>> corpus = TextCorpus(
    ...     "doctest", tokenizer, torch.tensor([0]), torch.tensor([0]), [], "to"
    ... )
    >>> LMRun().config(corpus).n_layers, LMRun("llama").config(corpus).n_kv_heads
    (4, 2)
"""

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.gpt import GPT, GPTConfig
from minformers.language_modeling import TextCorpus, random_windows, sample
from minformers.llama import LlamaConfig, LlamaForCausalLM
from minformers.support.arguments import require_size
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.train import TrainConfig, train


@dataclass(frozen=True)
class LMRun:
    """What one training run is: the architecture, the schedule, the batch, the sample
    written at each evaluation."""

    architecture: str = "gpt"  # or "llama"
    # as many steps as nanoGPT's CPU run, at a higher learning rate than its 1e-3
    schedule: TrainConfig = TrainConfig(
        steps=2000, lr=3e-3, warmup_steps=200, eval_every=250
    )
    batch_size: int = 12  # windows per step, each giving max_len predictions
    validation_windows: int = 64  # fixed held-out windows scored at every evaluation
    # Tokens sampled after the prompt at each evaluation (temperature 0.8), or 0 for no
    # sample. After Shakespeare's 7-character prompt, 57 fill the context of 64, so the
    # KV cache serves the whole sample.
    sample_length: int = 57
    # changes to the model's config, e.g. (("n_layers", 2),)
    model_changes: tuple[tuple[str, object], ...] = ()
    # seeds the initial weights; change it to measure how much a result depends on them
    init_seed: int = 0

    def __post_init__(self):
        if self.architecture not in ("gpt", "llama"):
            raise ValueError(
                f"architecture must be 'gpt' or 'llama', got {self.architecture!r}"
            )
        for name in ("batch_size", "validation_windows"):
            require_size(name, getattr(self, name))
        require_size("sample_length", self.sample_length, minimum=0)

    def config(self, corpus: TextCorpus) -> GPTConfig | LlamaConfig:
        vocab_size, changes = corpus.tokenizer.vocab_size, dict(self.model_changes)
        if self.architecture == "gpt":
            return GPTConfig.tiny(vocab_size=vocab_size, **changes)
        # GPT's shape, with 2 key/value heads for its 4 query heads; SwiGLU's three
        # matrices of width 384 hold about as many parameters as GPT's two of width 512,
        # which also covers GPT's position table.
        sizes = {
            "d_model": 128,
            "n_layers": 4,
            "n_heads": 4,
            "n_kv_heads": 2,
            "d_ff": 384,
            "max_len": 64,
        }
        return LlamaConfig.tiny(vocab_size=vocab_size, **{**sizes, **changes})

    def build(self, corpus: TextCorpus) -> nn.Module:
        config = self.config(corpus)
        return GPT(config) if self.architecture == "gpt" else LlamaForCausalLM(config)


def held_out_windows(corpus: TextCorpus, run: LMRun) -> torch.Tensor:
    """The run's held-out windows, (validation_windows, max_len + 1), the same for every
    run of that shape: "val_loss" is the mean loss over their next tokens."""
    return random_windows(
        corpus.validation_ids,
        run.config(corpus).max_len + 1,
        run.validation_windows,
        torch.Generator().manual_seed(12345),
    )


def train_language_model(
    corpus: TextCorpus, run: LMRun = LMRun(), progress: bool | None = None
) -> tuple[nn.Module, History]:
    """Train a language model on ``corpus``; return it (in eval mode) and its History:
    "loss", "val_loss", and at every evaluation a sample in ``history.text["sample"]``.
    The batch for step s is seeded by s, so two architectures trained with the same run
    see the same windows in the same order."""
    config = run.config(corpus)
    # Windows of max_len + 1 tokens: the model reads the first max_len, and each of its
    # positions, the last included, is scored on the token after it. Windows of max_len
    # tokens would leave the last position without a target: GPT's position embedding
    # for it would never be trained, and text generated past the context, in which every
    # token is predicted from that position, would fall apart.
    window = config.max_len + 1
    validation = held_out_windows(corpus, run)

    def batch_for_step(step: int) -> torch.Tensor:
        return random_windows(
            corpus.train_ids,
            window,
            run.batch_size,
            torch.Generator().manual_seed(step),
        )

    def loss_for_batch(model: nn.Module, windows: torch.Tensor) -> torch.Tensor:
        logits = model(windows[:, :-1])  # (B, T, V) for the (B, T + 1) windows
        # position t predicts token t + 1
        return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten())

    def evaluate(model: nn.Module) -> dict:
        if not run.sample_length:
            return {"val_loss": loss_for_batch(model, validation)}
        return {
            "val_loss": loss_for_batch(model, validation),
            "sample": sample(model, corpus.tokenizer, run.sample_length, corpus.prompt),
        }

    # the initial weights: the same model whatever ran before in the session
    torch.manual_seed(run.init_seed)
    model = run.build(corpus)
    vocab = [
        corpus.tokenizer.decode([index]) for index in range(corpus.tokenizer.vocab_size)
    ]
    settings = {
        "run": asdict(run),
        "config": asdict(config),
        "vocab": vocab,
        "held_out": corpus.held_out,
        "prompt": corpus.prompt,
    }
    history = train(
        model,
        batch_for_step,
        loss_for_batch,
        run.schedule,
        evaluate=evaluate,
        checkpoint=checkpoint_path(f"{run.architecture}-{corpus.name}", settings),
        progress=progress,
    )
    return model.eval(), history
