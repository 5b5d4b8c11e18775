"""In-context learning on a synthetic task: every sequence carries its own random
key -> value map, shown as examples, then queried. The map is new each time, so the
weights cannot memorise it: the answer is only in the prompt, and a model that beats
chance must read it there.

A prompt is ``n`` example tokens, each one (key, value) pair, then ``n_queries`` query
tokens; after each query the model predicts the key's value. Keys are shown at most
once, so a query about a key that was not shown can only be guessed.

Shape legend: B batch, n examples, Q queries.

    >>> task = KeyValueTask(n_keys=4, n_values=3, n_queries=2)
    >>> batch = task.batch(seed=0, n_examples=2, batch_size=1)
    >>> # 2 examples and 2 queries, one answer per query
    >>> batch.input_ids.shape, batch.answers.shape
    (torch.Size([1, 4]), torch.Size([1, 2]))
    >>> # half the keys shown: right on those, 1 in 3 on the rest
    >>> task.ideal_accuracy(n_examples=2)
    0.6666666666666666
    >>> batch = task.batch(seed=4, n_examples=2, batch_size=1)
    >>> # examples: key 0 = 1 (token 1), key 1 = 0 (token 3)
    >>> # queries: key 2? (token 14), key 1? (token 13)
    >>> batch.input_ids
    tensor([[ 1,  3, 14, 13]])
    >>> # the example holding each query's key: none for key 2, the second for key 1
    >>> task.matching_example(batch)
    tensor([[-1,  1]])

A model reads the prompt with attention: ``weight_on_match`` measures, for every head,
how much of a query's weight lands on the example that holds its key, the one token
worth reading.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.support.arguments import require_size


@dataclass(frozen=True)
class KeyValueBatch:
    input_ids: torch.Tensor  # (B, n + Q): example tokens, then query tokens
    answers: torch.Tensor  # (B, Q) answer-token ids: the value of each query's key
    shown: torch.Tensor  # (B, Q) bool: was the query's key among the examples?


@dataclass(frozen=True)
class KeyValueTask:
    """Token layout: ``n_keys * n_values`` example tokens (one per (key, value) pair),
    then one query token per key, then one answer token per value."""

    n_keys: int = 8  # keys per map; a prompt shows at most all of them
    # each key's value is drawn uniformly from these, so chance is 1 / n_values
    n_values: int = 8
    n_queries: int = 8  # queries after the examples, each about a uniformly drawn key

    def __post_init__(self):
        for name in ("n_keys", "n_values", "n_queries"):
            require_size(name, getattr(self, name))

    @property
    def vocab_size(self) -> int:
        return self.n_keys * self.n_values + self.n_keys + self.n_values

    @property
    def max_len(self) -> int:
        return self.n_keys + self.n_queries  # the longest prompt: every key shown

    def example_token(self, key, value):
        return key * self.n_values + value

    def query_token(self, key):
        return self.n_keys * self.n_values + key

    def answer_token(self, value):
        return self.n_keys * self.n_values + self.n_keys + value

    def batch(
        self, seed: int, n_examples: int | None = None, batch_size: int = 32
    ) -> KeyValueBatch:
        """``batch_size`` prompts, each with a fresh random map; ``n_examples`` distinct
        keys shown (None: one count from 1 to n_keys drawn for the whole batch). The
        same seed gives the same batch."""
        draw = torch.Generator().manual_seed(seed)
        if n_examples is None:
            n_examples = int(torch.randint(1, self.n_keys + 1, (1,), generator=draw))
        if not 0 <= n_examples <= self.n_keys:
            raise ValueError(
                f"n_examples must be in [0, n_keys={self.n_keys}], got {n_examples}"
            )
        require_size("batch_size", batch_size)
        # (B, keys): key -> value
        maps = torch.randint(self.n_values, (batch_size, self.n_keys), generator=draw)
        order = torch.argsort(
            torch.rand(batch_size, self.n_keys, generator=draw), dim=1
        )
        shown_keys = order[:, :n_examples]  # (B, n): distinct keys in random order
        # (B, Q)
        queries = torch.randint(
            self.n_keys, (batch_size, self.n_queries), generator=draw
        )
        examples = self.example_token(shown_keys, maps.gather(1, shown_keys))  # (B, n)
        # (B, n + Q)
        input_ids = torch.cat([examples, self.query_token(queries)], dim=1)
        # (B, Q, n) -> (B, Q)
        shown = (queries[:, :, None] == shown_keys[:, None, :]).any(dim=-1)
        return KeyValueBatch(
            input_ids, self.answer_token(maps.gather(1, queries)), shown
        )

    def matching_example(self, batch: KeyValueBatch) -> torch.Tensor:
        """(B, Q): the position of the example that shows each query's key, -1 where the
        key was not shown."""
        n = batch.input_ids.shape[1] - self.n_queries
        example_keys = batch.input_ids[:, :n] // self.n_values  # (B, n)
        query_keys = batch.input_ids[:, n:] - self.query_token(0)  # (B, Q)
        # (B, Q, n): at most one True per query
        same_key = query_keys[:, :, None] == example_keys[:, None, :]
        if n == 0:
            return torch.full(query_keys.shape, -1)
        return torch.where(same_key.any(dim=-1), same_key.int().argmax(dim=-1), -1)

    def ideal_accuracy(self, n_examples: int) -> float:
        """A perfect reader of the prompt: right on every shown key, chance
        on the others."""
        shown = n_examples / self.n_keys
        return shown + (1 - shown) / self.n_values


def query_logits(model: nn.Module, batch: KeyValueBatch) -> torch.Tensor:
    """The model's next-token logits at the query positions:
    (B, n + Q, V) -> (B, Q, V)."""
    return model(batch.input_ids)[:, -batch.answers.shape[1] :]


def query_loss(model: nn.Module, batch: KeyValueBatch) -> torch.Tensor:
    """Cross-entropy of the answers, over every query: the only positions trained on."""
    return F.cross_entropy(
        query_logits(model, batch).flatten(0, 1), batch.answers.flatten()
    )


@torch.no_grad()
def query_correct(model: nn.Module, batch: KeyValueBatch) -> torch.Tensor:
    """(B, Q) bool: did the model's most likely next token answer each query? Split
    it with ``batch.shown``."""
    return query_logits(model, batch).argmax(dim=-1) == batch.answers


def weight_on_match(
    task: KeyValueTask, weights: torch.Tensor, batch: KeyValueBatch
) -> torch.Tensor:
    """(L, H): the attention weight each head puts, from a query about a shown key, on
    the example showing that key, averaged over such queries. ``weights`` is
    (L, B, H, T, T), as ``attention.recorded_attention`` records them;
    ``attention_patterns.uniform_causal_weights`` gives the even-spread yardstick."""
    if (
        weights.dim() != 5
        or weights.shape[1] != len(batch.input_ids)
        or weights.shape[-1] != batch.input_ids.shape[1]
    ):
        raise ValueError(
            "weights must be (L, B, H, T, T) for this batch's "
            f"{tuple(batch.input_ids.shape)} ids, got {tuple(weights.shape)}"
        )
    matching = task.matching_example(batch)  # (B, Q)
    shown = matching >= 0
    if not shown.any():
        raise ValueError(
            "no query's key was shown: there is no matching example to weigh"
        )
    from_queries = weights[..., -task.n_queries :, :]  # (L, B, H, Q, T)
    index = matching.clamp(min=0)[None, :, None, :, None].expand(
        *from_queries.shape[:-1], 1
    )
    on_match = from_queries.gather(-1, index).squeeze(-1)  # (L, B, H, Q)
    counted = shown[None, :, None, :]  # (1, B, 1, Q)
    return (on_match * counted).sum(dim=(1, 3)) / counted.sum()
