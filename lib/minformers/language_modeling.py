"""Language modelling on a long text: a tokenizer whose tokens are characters, batches
of random windows, and one training recipe (``LMRun``, ``train_language_model``) that
the decoder chapters share. The model reads windows of T tokens, and position t predicts
token t + 1: the last position's target is the token just after the window.

The default run is nanoGPT's CPU recipe (4 layers, 4 heads, 128 channels, a context of
64, 12 windows per step); its Llama has the same depth, width and heads, with the
feed-forward width chosen so that the two have about as many parameters.

    >>> tokenizer = CharTokenizer("hello world")
    >>> tokenizer.vocab_size, tokenizer.decode(tokenizer.encode("low"))
    (8, 'low')
    >>> ids = torch.arange(100)
    >>> random_windows(
    ...     ids, block_size=4, batch_size=2, generator=torch.Generator().manual_seed(0)
    ... ).shape
    torch.Size([2, 4])
"""

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.generation import generate
from minformers.gpt import GPT, GPTConfig
from minformers.llama import LlamaConfig, LlamaForCausalLM
from minformers.support.arguments import require_size
from minformers.support.sample_quality import words
from minformers.train import History, TrainConfig, checkpoint_path, train


class CharTokenizer:
    """One token per distinct character of a training text, in sorted order. Characters
    it never saw cannot be encoded: a character-level vocabulary is closed, which is
    fine for one corpus and useless for the open web."""

    def __init__(self, text: str):
        if not isinstance(text, str) or not text:
            raise ValueError(
                "text must be a non-empty str: the vocabulary is its characters"
            )
        self.id_to_char = sorted(set(text))
        self.char_to_id = {char: index for index, char in enumerate(self.id_to_char)}

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_char)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - self.char_to_id.keys())
        if unknown:
            raise ValueError(f"characters outside the vocabulary: {unknown[:10]}")
        return [self.char_to_id[char] for char in text]

    def decode(self, ids) -> str:
        return "".join(self.id_to_char[int(index)] for index in ids)


def random_windows(
    ids: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator
) -> torch.Tensor:
    """``batch_size`` windows of ``block_size`` consecutive tokens from the 1-D ``ids``,
    at random starts: (B, T)."""
    require_size("block_size", block_size)
    require_size("batch_size", batch_size)
    if ids.dim() != 1 or len(ids) < block_size:
        raise ValueError(
            f"ids must be 1-D and at least block_size={block_size} long, got shape "
            f"{tuple(ids.shape)}"
        )
    # (B,)
    starts = torch.randint(
        len(ids) - block_size + 1, (batch_size,), generator=generator
    )
    return ids[starts[:, None] + torch.arange(block_size)]  # (B, 1) + (T,) -> (B, T)


@dataclass(frozen=True)
class TextCorpus:
    """A tokenized text to model: what ``train_language_model`` needs, and what names
    its checkpoint."""

    name: str  # names the checkpoint, with the run's settings: say "shakespeare-chars"
    tokenizer: object  # encode(str) -> ids, decode(ids) -> str, vocab_size
    train_ids: torch.Tensor  # (N,), the training text
    validation_ids: torch.Tensor  # (M,), held-out text
    # what the held-out text is (say, the names of the held-out works)
    held_out: list[str]
    prompt: str  # the text each evaluation's sample continues

    def known_words(self) -> set[str]:
        """The words of the training text (``sample_quality.words``): what a sample's
        words are checked against."""
        return set(words(self.tokenizer.decode(self.train_ids.tolist())))


@dataclass(frozen=True)
class LMRun:
    """What one training run is: the architecture, the schedule, the batch, the sample
    written at each evaluation."""

    architecture: str = "gpt"  # or "llama"
    # as many steps as nanoGPT's CPU run (2,000); the gpt page prints the held-out loss
    # it reaches
    schedule: TrainConfig = TrainConfig(
        steps=2000, lr=3e-3, warmup_steps=200, eval_every=250
    )
    batch_size: int = 12  # windows per step, each giving max_len predictions
    validation_windows: int = 64  # fixed held-out windows scored at every evaluation
    # tokens generated after the prompt at each evaluation (temperature 0.8): with
    sample_length: int = 57
    # Shakespeare's 7-character prompt, 64, the context, so the KV cache serves the
    # whole sample; 0 = no sample config overrides, e.g. (("n_layers", 2),)
    model_changes: tuple[tuple[str, object], ...] = ()
    # the initial weights; change it to measure how much a result depends on them
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


def sample(
    model: nn.Module,
    tokenizer,
    length: int,
    prompt: str,
    temperature: float = 0.8,
    seed: int = 0,
) -> str:
    """``length`` tokens after ``prompt``, with the same random draws for a given seed.
    The KV cache is used when prompt and sample fit the context; longer samples slide a
    window over the text."""
    ids = torch.tensor([tokenizer.encode(prompt)])
    fits = ids.shape[1] + length <= model.config.max_len
    out = generate(
        model,
        ids,
        length,
        temperature=temperature,
        generator=torch.Generator().manual_seed(seed),
        use_cache=fits,
    )
    return tokenizer.decode(out[0].tolist())


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
    validation = random_windows(
        corpus.validation_ids,
        window,
        run.validation_windows,
        torch.Generator().manual_seed(12345),
    )

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
