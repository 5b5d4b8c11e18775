"""Memorisation of training data, measured with planted canaries (Carlini et al., 2019,
"The Secret Sharer").

A canary is a fake secret in a fixed sentence, "Alice's phone number is 4829104857.",
planted in the training text a chosen number of times. After training we ask two
questions of the model:

- **exposure**: how highly does the model rank the true secret among other possible
  secrets? Each candidate secret is scored by its log-likelihood after the prefix; with
  the true secret at rank r in a candidate space R, exposure = log2 |R| - log2 r. A
  secret the model knows nothing about lands at a random rank (exposure about 1-2
  bits); a memorised one ranks first (exposure log2 |R|, the most there is).
- **extraction**: does greedy decoding from the prefix write the secret out?

The space of 10-digit secrets has 10^10 members, too many to score, so the rank is
estimated on a random sample of candidates (``exposure``), or, past what a sample can
resolve, from a normal distribution fitted to the candidates' scores
(``extrapolated_exposure``, Carlini et al.'s second estimate, with a normal where they
fit a skew-normal).

    >>> # rank 3 among 8
    >>> exposure(-3.0, torch.tensor([-1.0, -2.0, -4.0, -5.0, -6.0, -7.0, -8.0]))
    1.415...
    >>> canaries = make_canaries((1, 4), seed=0)
    >>> [(c.prefix, c.repetitions) for c in canaries]
    [("Alice's phone number is ", 1), ("Bruno's phone number is ", 4)]
"""

import math
import random
from dataclasses import dataclass

import torch

from minformers.kv_cache import KVCache
from minformers.support.arguments import require_size

# none of them in Shakespeare
NAMES = ("Alice", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hiro")


@dataclass(frozen=True)
class Canary:
    """A fake secret in a fixed sentence, and how many times it is planted in
    the training text."""

    prefix: str  # what the model is prompted with: "Alice's phone number is "
    secret: str  # the digits it should not know: "4829104857"
    # copies planted in the training text; 0 = a control, never planted
    repetitions: int

    @property
    def line(self) -> str:
        """The planted line: "Alice's phone number is 4829104857.\\n"."""
        return f"{self.prefix}{self.secret}.\n"


def random_secrets(
    count: int, digits: int = 10, seed: int = 0, exclude: tuple[str, ...] = ()
) -> list[str]:
    """``count`` distinct random strings of ``digits`` decimal digits (leading zeros
    allowed), none in ``exclude``.

    >>> random_secrets(3, digits=4, seed=1)
    ['2914', '1777', '6317']
    """
    require_size("count", count)
    require_size("digits", digits)
    if count > 10**digits - len(set(exclude)):
        raise ValueError(
            f"count={count} exceeds the {10**digits} possible secrets of "
            f"digits={digits}"
        )
    rng, chosen, seen = random.Random(seed), [], set(exclude)
    while len(chosen) < count:
        secret = "".join(rng.choice("0123456789") for _ in range(digits))
        if secret not in seen:
            seen.add(secret)
            chosen.append(secret)
    return chosen


def make_canaries(
    repetitions: tuple[int, ...] = (0, 1, 4, 16, 64), digits: int = 10, seed: int = 0
) -> list[Canary]:
    """One canary per repetition count, each with its own name (so its own prefix) and
    its own random secret, so that all of them can share one training run. A count of 0
    makes a control canary that is never planted."""
    if not repetitions or len(repetitions) > len(NAMES):
        raise ValueError(
            f"repetitions must hold 1 to {len(NAMES)} counts, got {repetitions!r}"
        )
    for count in repetitions:
        require_size("repetitions", count, minimum=0)
    secrets = random_secrets(len(repetitions), digits, seed)
    return [
        Canary(f"{name}'s phone number is ", secret, count)
        for name, secret, count in zip(
            NAMES[: len(repetitions)], secrets, repetitions, strict=True
        )
    ]


def insert_canaries(text: str, canaries: list[Canary], seed: int = 0) -> str:
    """Plant each canary's line ``repetitions`` times in ``text``, at random line
    boundaries (seeded), so that no line of the text is cut. Removing the planted lines
    gives ``text`` back.

    >>> insert_canaries("a\\nb\\n", [Canary("x is ", "12", 2)], seed=0)
    'a\\nx is 12.\\nx is 12.\\nb\\n'
    """
    if not text:
        raise ValueError("text must be non-empty: the canaries go between its lines")
    lines = text.splitlines(keepends=True)
    planted = [canary.line for canary in canaries for _ in range(canary.repetitions)]
    rng = random.Random(seed)
    # before line i, so never glued to a last line
    boundaries = sorted(rng.randrange(len(lines)) for _ in planted)
    rng.shuffle(planted)
    out, start = [], 0
    for boundary, line in zip(boundaries, planted, strict=True):
        out.extend(lines[start:boundary])
        out.append(line)
        start = boundary
    out.extend(lines[start:])
    return "".join(out)


def planted_positions(text: str, canary: Canary) -> list[int]:
    """Where the canary's line starts in ``text``, as character offsets (token positions
    for a character model).

    >>> planted_positions("x is 12.\\nab\\nx is 12.\\n", Canary("x is ", "12", 2))
    [0, 12]
    """
    positions, start = [], text.find(canary.line)
    while start != -1:
        positions.append(start)
        start = text.find(canary.line, start + 1)
    return positions


def sightings(
    positions: list[int], length: int, window_starts: torch.Tensor, block_size: int
) -> int:
    """How many training windows (each ``block_size`` tokens from one of
    ``window_starts``) hold a whole copy of a ``length``-token line planted at
    ``positions``: the times the model saw the canary from start to end.

    >>> # the windows [7, 15) and [8, 16) hold all of [10, 15)
    >>> starts = torch.tensor([0, 7, 8, 11])
    >>> sightings([10], length=5, window_starts=starts, block_size=8)
    2
    """
    require_size("length", length)
    require_size("block_size", block_size)
    if not positions:
        return 0
    starts = torch.as_tensor(window_starts).reshape(-1, 1)  # (W, 1)
    planted = torch.as_tensor(positions).reshape(1, -1)  # (1, P)
    inside = (starts <= planted) & (planted + length <= starts + block_size)  # (W, P)
    return int(inside.sum())


@torch.no_grad()
def secret_log_likelihoods(
    model: torch.nn.Module,
    tokenizer,
    prefix: str,
    secrets: list[str],
    batch_size: int = 2048,
) -> torch.Tensor:
    """log P(secret | prefix) under ``model``, summed over the secret's tokens only, for
    each of ``secrets``: (N,).

    The prefix is read once into a KV cache that every candidate in a batch shares; the
    candidates then cost only their own tokens. All secrets must have the same length.
    """
    require_size("batch_size", batch_size)
    if not secrets or len({len(secret) for secret in secrets}) != 1:
        raise ValueError("secrets must be a non-empty list of strings of one length")
    model.eval()
    prefix_ids = torch.tensor([tokenizer.encode(prefix)])  # (1, P)
    prefix_cache = KVCache(model.config.n_layers)
    # (1, V): predicts the secret's first token
    first_logits = model(prefix_ids, cache=prefix_cache)[:, -1]
    scores = []
    for start in range(0, len(secrets), batch_size):
        # (B, S)
        ids = torch.tensor(
            [tokenizer.encode(secret) for secret in secrets[start : start + batch_size]]
        )
        cache = KVCache(model.config.n_layers)
        cache.keys, cache.values = list(prefix_cache.keys), list(prefix_cache.values)
        # the prefix, copied to every row
        cache.reorder(torch.zeros(len(ids), dtype=torch.long))
        # (B, S - 1, V): predicts tokens 2..S
        later_logits = model(ids[:, :-1], cache=cache)
        # (B, S, V)
        logits = torch.cat([first_logits.expand(len(ids), 1, -1), later_logits], dim=1)
        # (B, S)
        log_probs = logits.log_softmax(dim=-1).gather(-1, ids[..., None]).squeeze(-1)
        scores.append(log_probs.sum(dim=-1))
    return torch.cat(scores)


def _require_scores(true_score: float, candidate_scores: torch.Tensor) -> torch.Tensor:
    if not math.isfinite(float(true_score)):
        raise ValueError(
            f"true_score must be a finite log-likelihood, got {true_score}"
        )
    candidate_scores = torch.as_tensor(candidate_scores, dtype=torch.float64)
    if candidate_scores.dim() != 1 or len(candidate_scores) == 0:
        raise ValueError(
            "candidate_scores must be a non-empty 1-D tensor, got shape "
            f"{tuple(candidate_scores.shape)}"
        )
    return candidate_scores


def exposure(true_score: float, candidate_scores: torch.Tensor) -> float:
    """Exposure of a secret among sampled candidates: log2 |R| - log2 rank, in bits.

    R is the candidates plus the true secret (|R| = N + 1); rank is 1 plus the number of
    candidates scoring at least as high as the true secret, so a tie counts against the
    secret and exposure is never overstated. Ranked first, exposure is log2(N + 1);
    ranked last, 0.

    >>> exposure(0.0, torch.tensor([-1.0, -2.0, -3.0]))  # first of 4: log2 4
    2.0
    >>> # the tie counts against it: rank 3 of 4
    >>> exposure(-2.0, torch.tensor([-1.0, -2.0, -3.0]))
    0.415...
    """
    candidate_scores = _require_scores(true_score, candidate_scores)
    rank = 1 + int((candidate_scores >= float(true_score)).sum())
    return math.log2(len(candidate_scores) + 1) - math.log2(rank)


def extrapolated_exposure(
    true_score: float, candidate_scores: torch.Tensor, space_size: float = 1e10
) -> float:
    """Exposure estimated as -log2 P(score >= true_score), with P a normal distribution
    fitted to the candidates' scores, capped at log2(space_size). It reaches beyond the
    log2(N + 1) that N sampled candidates can resolve; it is only as good as the normal
    fit in the far tail.

    >>> # at the mean: P = 1/2, one bit
    >>> round(extrapolated_exposure(0.0, torch.tensor([-1.0, 1.0])), 3)
    1.0
    """
    candidate_scores = _require_scores(true_score, candidate_scores)
    if len(candidate_scores) < 2:
        raise ValueError(
            "candidate_scores needs at least 2 values to fit a normal distribution"
        )
    if not space_size > 1:
        raise ValueError(f"space_size must be > 1, got {space_size}")
    z = (float(true_score) - candidate_scores.mean()) / candidate_scores.std()
    # ln P(Z >= z), accurate far into the tail
    log_tail = torch.special.log_ndtr(-z).item()
    return min(-log_tail / math.log(2), math.log2(space_size))


@torch.no_grad()
def greedy_extraction(
    model: torch.nn.Module, tokenizer, canary: Canary
) -> tuple[str, int]:
    """Greedy decoding from the canary's prefix for as many tokens as its secret: (what
    it wrote, how many positions equal the secret's). All digits matching means the
    secret was extracted."""
    prefix_ids = torch.tensor([tokenizer.encode(canary.prefix)])  # (1, P)
    cache, ids, written = KVCache(model.config.n_layers), prefix_ids, []
    model.eval()
    for _ in range(len(canary.secret)):
        next_id = model(ids, cache=cache)[0, -1].argmax()
        written.append(int(next_id))
        ids = next_id.view(1, 1)
    text = tokenizer.decode(written)
    # a token may hold several
    return text, sum(a == b for a, b in zip(text, canary.secret, strict=False))


def measure_canaries(
    model: torch.nn.Module,
    tokenizer,
    canaries: list[Canary],
    candidates: list[str],
    space_size: float | None = None,
) -> list[dict]:
    """One row per canary: its repetitions and secret, log P(secret | prefix), the
    exposure among ``candidates`` (sampled) and extrapolated over the whole space
    (10^digits secrets unless ``space_size`` is given), what greedy decoding writes and
    how many of its digits are right. Also "candidate_scores", for baselines."""
    rows = []
    for canary in canaries:
        # (N,)
        scores = secret_log_likelihoods(model, tokenizer, canary.prefix, candidates)
        true_score = secret_log_likelihoods(
            model, tokenizer, canary.prefix, [canary.secret]
        ).item()
        written, right = greedy_extraction(model, tokenizer, canary)
        space = 10.0 ** len(canary.secret) if space_size is None else space_size
        rows.append(
            {
                "repetitions": canary.repetitions,
                "secret": canary.secret,
                "log_likelihood": true_score,
                "exposure": exposure(true_score, scores),
                "extrapolated_exposure": extrapolated_exposure(
                    true_score, scores, space
                ),
                "greedy": written,
                "digits_right": right,
                "candidate_scores": scores,
            }
        )
    return rows
