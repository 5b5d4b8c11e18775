"""Denoising objectives for encoder-decoders: corrupt a text, and train the model to
undo the corruption.

- **T5 span corruption** (Raffel et al., 2020): 15% of the tokens, in spans of mean
  length 3, are cut out; each span becomes one sentinel token in the input, and the
  target lists each sentinel followed by the tokens it hid, then one more sentinel. The
  decoder writes only what was removed.
- **BART text infilling** (Lewis et al., 2020): spans with Poisson(3) lengths, 30% of
  the tokens in all, are each replaced by a single mask token (a span of length 0
  inserts one); the decoder writes the whole original text, so the model must also work
  out how many tokens each mask hides.

Both take lists of token ids and a ``random.Random``, so a seed fixes the corruption.

    >>> tokens = list(range(100, 120))  # 20 tokens: 3 noise tokens, in 1 span
    >>> inputs, targets = span_corruption(
    ...     tokens, sentinels=[1, 2, 3, 4], rng=random.Random(1)
    ... )
    >>> inputs, targets
    ([100, 101, 1, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119], [1, 102, 103, 104, 2])
    >>> restore_spans(inputs, targets, sentinels=[1, 2, 3, 4]) == tokens
    True
"""

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from minformers.support.arguments import require_size


def _composition(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` split into ``parts`` positive integers, uniformly among
    all such splits."""
    # distinct cut points between 1 and total - 1
    cuts = sorted(rng.sample(range(1, total), parts - 1))
    return [end - start for start, end in zip([0, *cuts], [*cuts, total], strict=True)]


def random_noise_mask(
    n: int,
    rng: random.Random,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> list[bool]:
    """Which of ``n`` tokens T5 corrupts: True = noise.

    round(n * noise_density) tokens are noise (at least 1), in
    round(noise / mean_span_length) spans (at least 1); the noise and the kept tokens
    are each split into that many non-empty runs at random, and the runs alternate.
    T5's own code always starts with kept tokens, so its last token is always noise;
    here a coin decides whether the text ends with noise (T5's layout) or with kept
    tokens (then its first run of kept tokens may be empty), so either end can be noise.
    """
    if not 0.0 < noise_density < 1.0:
        raise ValueError(f"noise_density must be in (0, 1), got {noise_density}")
    if not mean_span_length >= 1.0:
        raise ValueError(f"mean_span_length must be >= 1, got {mean_span_length}")
    if n < 2:
        raise ValueError(
            f"tokens must hold at least 2 ids (one kept, one noise), got {n}"
        )
    n_noise = min(max(round(n * noise_density), 1), n - 1)
    n_spans = min(max(round(n_noise / mean_span_length), 1), n_noise, n - n_noise)
    # then n_spans + 1 kept runs, the first may be empty
    ends_kept = rng.random() < 0.5 and n - n_noise > n_spans
    kept_runs = _composition(n - n_noise + ends_kept, n_spans + ends_kept, rng)
    if ends_kept:
        # compositions are positive: shift the first run down so that it can be 0
        kept_runs[0] -= 1
    noise_runs = _composition(n_noise, n_spans, rng) + [0] * ends_kept
    return [
        noise
        for kept, span in zip(kept_runs, noise_runs, strict=True)
        for noise in [False] * kept + [True] * span
    ]


def sentinel_corruption(
    tokens: Sequence[int], noise_mask: Sequence[bool], sentinels: Sequence[int]
) -> tuple[list[int], list[int]]:
    """T5's format: each run of noise tokens becomes the next sentinel in the inputs;
    the targets list each sentinel followed by the tokens it replaced, then one more
    sentinel.

    >>> sentinel_corruption(
    ...     [5, 6, 7, 8, 9], [False, True, True, False, True], sentinels=[1, 2, 3]
    ... )
    ([5, 1, 8, 2], [1, 6, 7, 2, 9, 3])
    """
    if len(noise_mask) != len(tokens):
        raise ValueError(
            f"noise_mask must have one entry per token: {len(noise_mask)} for "
            f"{len(tokens)} tokens"
        )
    inputs, targets, span = [], [], 0
    for position, (token, noise) in enumerate(zip(tokens, noise_mask, strict=True)):
        if not noise:
            inputs.append(token)
            continue
        if position == 0 or not noise_mask[position - 1]:  # a new span starts here
            if span >= len(sentinels) - 1:
                raise ValueError(
                    f"more spans than the {len(sentinels)} sentinels allow (one is "
                    "kept for the end)"
                )
            inputs.append(sentinels[span])
            targets.append(sentinels[span])
            span += 1
        targets.append(token)
    return inputs, targets + [sentinels[span]]


def span_corruption(
    tokens: Sequence[int],
    sentinels: Sequence[int],
    rng: random.Random,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> tuple[list[int], list[int]]:
    """T5's objective for one sequence: (inputs, targets) = ``sentinel_corruption``
    of a ``random_noise_mask``."""
    return sentinel_corruption(
        tokens,
        random_noise_mask(len(tokens), rng, noise_density, mean_span_length),
        sentinels,
    )


def restore_spans(
    inputs: Sequence[int], targets: Sequence[int], sentinels: Sequence[int]
) -> list[int]:
    """Undo ``span_corruption``: put each sentinel's tokens from the targets back in its
    place in the inputs."""
    index = {sentinel: i for i, sentinel in enumerate(sentinels)}
    spans: dict[int, list[int]] = {}
    current = None
    for token in targets:
        if token in index:
            current = spans.setdefault(index[token], [])
        elif current is None:
            raise ValueError("targets must start with a sentinel")
        else:
            current.append(token)
    restored = []
    for token in inputs:
        restored += spans.get(index[token], []) if token in index else [token]
    return restored


def poisson(rate: float, rng: random.Random) -> int:
    """A Poisson(rate) draw, by Knuth's method: count uniforms until their product
    falls below e^-rate."""
    limit, count, product = math.exp(-rate), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


@dataclass(frozen=True)
class Infilled:
    inputs: list[int]  # the text with each span replaced by one mask token
    targets: list[int]  # the original text: BART's decoder reconstructs all of it
    # (start in the original, length) of each span; length 0 inserts a mask
    spans: list[tuple[int, int]]


def text_infilling(
    tokens: Sequence[int],
    mask_id: int,
    rng: random.Random,
    mask_ratio: float = 0.3,
    mean_span_length: float = 3.0,
) -> Infilled:
    """BART's text infilling for one sequence.

    Span lengths are drawn from Poisson(mean_span_length) until they cover
    round(len * mask_ratio) tokens (the last one cut to fit); the spans go at random
    places, never touching, so two masks never merge.
    """
    if not 0.0 < mask_ratio < 1.0:
        raise ValueError(f"mask_ratio must be in (0, 1), got {mask_ratio}")
    n = require_size("len(tokens)", len(tokens))
    budget = round(n * mask_ratio)
    lengths: list[int] = []
    while sum(lengths) < budget:
        lengths.append(min(poisson(mean_span_length, rng), budget - sum(lengths)))
    kept = n - budget
    if len(lengths) > kept + 1:  # k spans need k separate gaps among the kept tokens
        lengths = lengths[: kept + 1]
    # span i goes before the gaps[i]-th kept token
    gaps = sorted(rng.sample(range(kept + 1), len(lengths)))
    inputs, spans, position, kept_so_far = [], [], 0, 0
    for gap, length in zip(gaps, lengths, strict=True):
        take = gap - kept_so_far  # kept tokens before this span
        inputs += tokens[position : position + take]
        position, kept_so_far = position + take, gap
        spans.append((position, length))
        inputs.append(mask_id)
        position += length
    inputs += tokens[position:]
    return Infilled(inputs, list(tokens), spans)
