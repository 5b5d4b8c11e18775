"""Language modelling on a long text: a tokenizer whose tokens are characters, batches
of random windows, the corpus a run trains on, and samples from a trained model. The
model reads windows of T tokens, and position t predicts token t + 1: the last
position's target is the token just after the window. The training recipe that the
decoder chapters share is ``recipes.language_model_run``.

    >>> tokenizer = CharTokenizer("hello world")
    >>> tokenizer.vocab_size, tokenizer.decode(tokenizer.encode("low"))
    (8, 'low')
    >>> ids = torch.arange(100)
    >>> random_windows(
    ...     ids, block_size=4, batch_size=2, generator=torch.Generator().manual_seed(0)
    ... ).shape
    torch.Size([2, 4])
"""

from dataclasses import dataclass

import torch
from torch import nn

from minformers.generation import generate
from minformers.support.arguments import require_size
from minformers.support.sample_quality import words


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
    """A tokenized text to model: what ``recipes.language_model_run.train_language_model``
    needs, and what names its checkpoint."""

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
