"""The SmolLM2 LoRA recipe's reading of given replies (recipes.smollm2_lora), on a tiny GPT and a character
tokenizer: one padded batch reads each reply as it would be read alone."""

import torch

from minformers.gpt import GPT, GPTConfig
from minformers.recipes.smollm2_lora import END, reply_log_probs

torch.set_num_threads(1)


class Characters:
    """A stand-in tokenizer: the end of a turn is one token (0), every other character its own."""

    def encode(self, text: str) -> list[int]:
        pieces = text.split(END)
        ids = []
        for i, piece in enumerate(pieces):
            ids += [1 + ord(c) % 60 for c in piece] + ([0] if i < len(pieces) - 1 else [])
        return ids


def test_one_padded_batch_reads_each_reply_as_it_would_be_read_alone():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_len=64, dropout=0.0))
    questions, replies = ["Opposite of up?", "Hi"], ["down", "Hello there, friend"]
    together = reply_log_probs(model, Characters(), questions, replies)
    for q, r, read in zip(questions, replies, together, strict=True):
        (alone,) = reply_log_probs(model, Characters(), [q], [r])
        assert read.shape == (len(Characters().encode(r)), 61)
        torch.testing.assert_close(read, alone, rtol=0, atol=1e-5)  # float32 rounding of a different batch shape
