"""Speculative decoding: a cheap draft model guesses the next ``gamma`` tokens, the
target model scores all the guesses in one forward pass, and a rejection rule keeps a
prefix of them, so that every token written still follows the target's distribution
exactly (Leviathan et al., 2023; Chen et al., 2023).

The rule, at guess i, where the draft drew x_i from its distribution q_i and the
target's distribution there is p_i:

- accept x_i with probability min(1, p_i(x_i) / q_i(x_i)) and go on to guess i + 1;
- at the first rejection, draw the token from the residual max(0, p_i - q_i),
  normalised, and end the round;
- if all the guesses are accepted, draw one more token from the target's distribution
  after them, which the same forward pass gave.

A token the draft proposes more often than the target would write it is trimmed, and the
residual hands out exactly the mass trimmed: the token written follows p_i. At
temperature 0 both distributions are one-hot on their argmax, so the rule accepts while
the draft's guess is the target's argmax and writes the target's argmax at the first
miss: greedy speculative decoding writes the target's greedy text.

A round costs ``gamma`` draft calls and one target call, and writes 1 to gamma + 1
tokens; if each guess is accepted with probability alpha, independently, a round writes
(1 - alpha^(gamma + 1)) / (1 - alpha) tokens on average (``expected_tokens_per_round``).

    >>> p = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]])  # target: at the guess, and after
    >>> q = torch.tensor([[[0.0, 1.0]]])  # draft: sure of token 1, which p rules out
    >>> verify(p, q, torch.tensor([[1]]))  # none kept; the residual writes token 0
    (tensor([0]), tensor([0]))
"""

from dataclasses import astuple, dataclass

import torch

from minformers.kv_cache import KVCache


def probabilities(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(..., V) logits -> (..., V) probabilities at ``temperature``; at 0, one-hot on
    the argmax (greedy decoding as a distribution)."""
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(
            -1, logits.argmax(-1, keepdim=True), 1.0
        )
    return (logits / temperature).softmax(-1)


def verify(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    drafted: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rule on B rows of k guesses at once: ``target_probs`` (B, k + 1, V),
    ``draft_probs`` (B, k, V), ``drafted`` (B, k) -> (kept (B,): how many of each row's
    guesses are accepted, next (B,): the token written after them)."""
    B, k = drafted.shape
    p = target_probs[:, :k].gather(-1, drafted[..., None]).squeeze(-1)  # (B, k)
    q = draft_probs.gather(-1, drafted[..., None]).squeeze(-1)  # (B, k)
    # u < p / q, written so that q = 0 cannot divide: accepted with min(1, p / q)
    accepted = torch.rand(B, k, generator=generator) * q < p
    kept = accepted.long().cumprod(-1).sum(-1)  # guesses before the first rejection
    # a zero row after the guesses: with all k kept, the residual is p after them
    q_padded = torch.cat(
        [draft_probs, draft_probs.new_zeros(B, 1, target_probs.shape[-1])], 1
    )
    rows = torch.arange(B)
    replacement = residual(target_probs[rows, kept], q_padded[rows, kept])  # (B, V)
    return kept, torch.multinomial(replacement, 1, generator=generator).squeeze(-1)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What a rejected guess is replaced from: max(0, p - q), normalised, (..., V). It
    is only asked for where a guess was rejected, so p differs from q there and the
    sum is positive.

    >>> residual(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.6, 0.2]))
    tensor([1., 0., 0.])
    """
    weights = (p - q).clamp(min=0)
    return weights / weights.sum(-1, keepdim=True)


class Reader:
    """A model reading a growing text, given each time the whole text and fed only the
    tokens it has not read. A model with a KV cache (one with ``config.n_layers``)
    keeps its keys and values; any other, such as ``BigramDraft``, reads the whole
    text again, which costs a table lookup per token."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        config = getattr(model, "config", None)
        self.cache = None if config is None else KVCache(config.n_layers)
        self.read = 0  # tokens of the text read so far

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, T) the text so far -> (B, T - read, V) the logits after
        each unread token."""
        if self.cache is None:
            logits = self.model(tokens)[:, self.read :]
        else:
            logits = self.model(tokens[:, self.read :], cache=self.cache)
        self.read = tokens.shape[1]
        return logits

    def forget_after(self, length: int) -> None:
        """Forget the tokens read after the first ``length`` (rejected guesses)."""
        self.read = min(self.read, length)
        if self.cache is not None:
            self.cache.crop(self.read)

    def repeat(self, rows: int) -> None:
        """Copy a one-row reading ``rows`` times: many continuations of one prefix."""
        if self.cache is not None:
            self.cache.reorder(torch.zeros(rows, dtype=torch.long))


def speculative_round(
    target: Reader,
    draft: Reader,
    tokens: torch.Tensor,
    gamma: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One round on every row of ``tokens`` (B, T): ``gamma`` guesses drawn from the
    draft, one target pass over them, and ``verify``. Returns (drafted (B, gamma),
    kept (B,), next (B,)). The readers are left having read the guesses: the caller
    makes them forget the rejected ones."""
    guesses, draft_probs = tokens, []
    for _ in range(gamma):
        q = probabilities(draft(guesses)[:, -1], temperature)  # (B, V)
        guess = torch.multinomial(q, 1, generator=generator)  # (B, 1)
        guesses, draft_probs = torch.cat([guesses, guess], 1), [*draft_probs, q]
    # the target after the text's last token and after each guess, in one pass
    p = probabilities(target(guesses)[:, -(gamma + 1) :], temperature)
    q = torch.stack(draft_probs, 1) if gamma else p[:, :0]  # (B, gamma, V)
    drafted = guesses[:, tokens.shape[1] :]
    return (drafted, *verify(p, q, drafted, generator))


@dataclass(frozen=True)
class SpeculativeStats:
    """What the rounds of one generation did."""

    rounds: int = 0  # target calls
    drafted: int = 0  # guesses made (draft calls)
    accepted: int = 0  # guesses kept
    rejected: int = 0  # rounds ended by a rejection (later guesses go unchecked)

    def __add__(self, other: "SpeculativeStats") -> "SpeculativeStats":
        return SpeculativeStats(
            *(a + b for a, b in zip(astuple(self), astuple(other), strict=True))
        )

    @property
    def acceptance_rate(self) -> float:
        """The share of the guesses checked that were kept: the alpha of
        ``expected_tokens_per_round``. Guesses after a rejection are never checked, so
        accepted / drafted would understate it, more so the more guesses a round."""
        checked = self.accepted + self.rejected
        return self.accepted / checked if checked else float("nan")

    @property
    def tokens_per_round(self) -> float:
        """Tokens written per target call: the kept guesses and one more each round."""
        return (self.accepted + self.rounds) / self.rounds


@torch.no_grad()
def speculative_generate(
    target: torch.nn.Module,
    draft: torch.nn.Module,
    prompt: torch.Tensor,
    max_new_tokens: int,
    gamma: int = 4,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, SpeculativeStats]:
    """Extend ``prompt`` (1, T) by ``max_new_tokens`` tokens that follow ``target``'s
    distribution at ``temperature`` (0: its greedy text), with ``draft`` guessing
    ``gamma`` tokens a round. Returns (tokens (1, T + max_new_tokens), stats)."""
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] == 0:
        raise ValueError(
            f"prompt must be one row of token ids, (1, T), got {tuple(prompt.shape)}"
        )
    if gamma < 0 or max_new_tokens < 0 or not temperature >= 0:
        raise ValueError(
            f"gamma, max_new_tokens and temperature must be >= 0, got {gamma}, "
            f"{max_new_tokens}, {temperature}"
        )
    end = prompt.shape[1] + max_new_tokens
    for name, model in (("target", target), ("draft", draft)):
        config = getattr(model, "config", None)
        if config is not None and end > config.max_len:
            raise ValueError(
                f"{prompt.shape[1]} prompt + {max_new_tokens} new tokens exceed the "
                f"{name}'s context of {config.max_len}"
            )
    target_reader, draft_reader = Reader(target.eval()), Reader(draft.eval())
    tokens, stats = prompt, SpeculativeStats()
    while tokens.shape[1] < end:
        guesses = min(gamma, end - tokens.shape[1] - 1)  # a round writes <= guesses + 1
        drafted, kept, next_token = speculative_round(
            target_reader, draft_reader, tokens, guesses, temperature, generator
        )
        tokens = torch.cat([tokens, drafted[:, : int(kept)], next_token[:, None]], 1)
        for reader in (target_reader, draft_reader):  # neither has read the last token
            reader.forget_after(tokens.shape[1] - 1)
        stats += SpeculativeStats(1, guesses, int(kept), int(kept < guesses))
    return tokens, stats


class BigramDraft(torch.nn.Module):
    """The crudest draft: the next token's log-probabilities given the current token
    alone, counted from a text (each count starts at 1, so that no token is ruled out).

    >>> draft = BigramDraft.from_ids(torch.tensor([0, 1, 0, 1, 0]), vocab_size=2)
    >>> draft(torch.tensor([[0]])).exp()  # after 0: 1 seen twice, 0 never
    tensor([[[0.2500, 0.7500]]])
    """

    def __init__(self, log_probs: torch.Tensor):
        super().__init__()
        self.register_buffer("log_probs", log_probs)  # (V, V): row = current token

    @classmethod
    def from_ids(cls, ids: torch.Tensor, vocab_size: int) -> "BigramDraft":
        counts = torch.ones(vocab_size, vocab_size)
        counts.index_put_(
            (ids[:-1], ids[1:]), torch.ones(len(ids) - 1), accumulate=True
        )
        return cls(counts.log() - counts.sum(1, keepdim=True).log())

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, V) log-probabilities of the token after each."""
        return self.log_probs[input_ids]


def expected_tokens_per_round(alpha: float, gamma: int) -> float:
    """Tokens a round writes on average if each guess is accepted with probability
    ``alpha``, independently: 1 + alpha + ... + alpha^gamma.

    >>> expected_tokens_per_round(0.5, 2)
    1.75
    """
    return float(gamma + 1) if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def predicted_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Tokens per unit of time against plain decoding, if a draft call costs
    ``cost_ratio`` target calls: a round writes ``expected_tokens_per_round`` tokens
    for the cost of gamma * cost_ratio + 1 target calls (Leviathan et al.'s formula;
    the rule's own bookkeeping is left out)."""
    return expected_tokens_per_round(alpha, gamma) / (gamma * cost_ratio + 1)
