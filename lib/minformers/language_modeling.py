"""Character-level language modelling data: a tokenizer whose tokens are characters, and batches of random windows
of a long text. In a window of T tokens, position t predicts token t + 1 (``gpt.language_model_loss``).

    >>> tokenizer = CharTokenizer("hello world")
    >>> tokenizer.vocab_size, tokenizer.decode(tokenizer.encode("low"))
    (8, 'low')
    >>> ids = torch.arange(100)
    >>> random_windows(ids, block_size=4, batch_size=2, generator=torch.Generator().manual_seed(0)).shape
    torch.Size([2, 4])
"""

import torch

from minformers.validation import check_size


class CharTokenizer:
    """One token per distinct character of a training text, in sorted order. Characters it never saw cannot be
    encoded: a character-level vocabulary is closed, which is fine for one corpus and useless for the open web."""

    def __init__(self, text: str):
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty str: the vocabulary is its characters")
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


def random_windows(ids: torch.Tensor, block_size: int, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """``batch_size`` windows of ``block_size`` consecutive tokens from the 1-D ``ids``, at random starts: (B, T)."""
    check_size("block_size", block_size)
    check_size("batch_size", batch_size)
    if ids.dim() != 1 or len(ids) < block_size:
        raise ValueError(f"ids must be 1-D and at least block_size={block_size} long, got shape {tuple(ids.shape)}")
    starts = torch.randint(len(ids) - block_size + 1, (batch_size,), generator=generator)  # (B,)
    return ids[starts[:, None] + torch.arange(block_size)]  # (B, 1) + (T,) -> (B, T)
