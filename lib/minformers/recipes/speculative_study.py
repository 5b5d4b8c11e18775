"""What the speculative decoding page measures, with the GPT page's model as the target:
three drafts of rising quality, the first two tokens that speculative sampling writes
after one prefix, many times over, against the target's own distribution of them, and
decoding time against the number of guesses, plain and speculative in turn.

    >>> ONE_LAYER.steps, ONE_LAYER.shape()["n_layers"]
    (320, 1)
"""

import contextlib
import io
import statistics
import time

import torch

from minformers.generation import generate
from minformers.language_modeling import TextCorpus
from minformers.recipes.language_model_run import train_language_model
from minformers.recipes.scaling_sweep import SweepRun
from minformers.speculative import (
    BigramDraft,
    Reader,
    SpeculativeStats,
    speculative_generate,
    speculative_round,
)
from minformers.support.statistics import chi_square

# the scaling page's widest model at its longest budget, loaded from this build's
# checkpoints; and a 1-layer model, cheap enough to train here
TWO_LAYER = SweepRun(d_model=40, tokens=640 * 16 * 64)
ONE_LAYER = SweepRun(d_model=32, tokens=320 * 16 * 64, n_layers=1)


def drafts(corpus: TextCorpus) -> dict:
    """name -> draft model for the GPT page's model, weakest first."""
    bigram = BigramDraft.from_ids(corpus.train_ids, corpus.tokenizer.vocab_size)
    with contextlib.redirect_stderr(io.StringIO()):  # the training log: build talk
        one_layer, two_layer = (
            train_language_model(corpus, run.lm_run(), progress=False)[0]
            for run in (ONE_LAYER, TWO_LAYER)
        )
    return {
        "bigram table": bigram,
        "1-layer GPT, 32 wide": one_layer,
        "2-layer GPT, 40 wide": two_layer,
    }


def _readers(models, prefix: torch.Tensor, rows: int) -> list[Reader]:
    """Readers that have read all of ``prefix`` (1, T) but its last token, once,
    copied to ``rows`` rows."""
    readers = [Reader(model.eval()) for model in models]
    for reader in readers:
        if prefix.shape[1] > 1:
            reader(prefix[:, :-1])
        reader.repeat(rows)
    return readers


@torch.no_grad()
def speculative_pairs(
    target, draft, prefix, rows: int, gamma: int, generator=None
) -> torch.Tensor:
    """(rows, 2): the first two tokens that speculative sampling (temperature 1) writes
    after ``prefix`` (1, T), independently in each row. A round that writes one token
    only is followed by a round from the prefix and that token, for all such rows at
    once."""
    readers = _readers((target, draft), prefix, rows)
    tokens = prefix.expand(rows, -1)
    drafted, kept, after = speculative_round(*readers, tokens, gamma, 1.0, generator)
    first = torch.where(kept > 0, drafted[:, 0], after)
    second = torch.where(kept > 1, drafted[:, 1], after) if gamma > 1 else after.clone()
    for token in first[kept == 0].unique():
        alone = ((kept == 0) & (first == token)).nonzero().flatten()
        longer = torch.cat([prefix, token.view(1, 1)], 1)
        readers = _readers((target, draft), longer, len(alone))
        drafted2, kept2, after2 = speculative_round(
            *readers, longer.expand(len(alone), -1), gamma, 1.0, generator
        )
        second[alone] = torch.where(kept2 > 0, drafted2[:, 0], after2)
    return torch.stack([first, second], 1)


@torch.no_grad()
def target_pairs(target, prefix, rows: int, generator=None) -> torch.Tensor:
    """(rows, 2): the first two tokens that plain sampling from ``target`` writes."""
    (reader,) = _readers((target,), prefix, rows)
    tokens = prefix.expand(rows, -1)
    for _ in range(2):
        probs = reader(tokens)[:, -1].softmax(-1)
        tokens = torch.cat(
            [tokens, torch.multinomial(probs, 1, generator=generator)], 1
        )
    return tokens[:, -2:]


@torch.no_grad()
def pair_distribution(target, prefix) -> torch.Tensor:
    """(V, V): the target's probability of each pair of next two tokens after
    ``prefix``, from one pass for the first and one for every possible second."""
    V = target.config.vocab_size
    (reader,) = _readers((target,), prefix, 1)
    first = reader(prefix)[0, -1].softmax(-1)  # (V,)
    reader.repeat(V)
    second = reader(torch.cat([prefix.expand(V, -1), torch.arange(V)[:, None]], 1))
    return first[:, None] * second[:, -1].softmax(-1)  # (V, V)


def outcome_counts(pairs: torch.Tensor, distribution: torch.Tensor, top: int) -> tuple:
    """The ``top`` likeliest pairs under ``distribution`` (V, V) and "any other": the
    counts of ``pairs`` (n, 2) in each, and each one's probability, (top + 1,) both."""
    V = distribution.shape[0]
    likeliest = distribution.flatten().topk(top).indices  # (top,)
    index = pairs[:, 0] * V + pairs[:, 1]
    counts = torch.bincount(index, minlength=V * V)
    probability = distribution.flatten()
    other = 1 - probability[likeliest].sum()
    return (
        torch.cat([counts[likeliest], (len(pairs) - counts[likeliest].sum()).view(1)]),
        torch.cat([probability[likeliest], other.view(1)]),
    )


def power(
    expected: torch.Tensor,
    rows: int,
    shift: float = 0.01,
    level: float = 0.01,
    trials: int = 400,
) -> float:
    """How often ``chi_square`` at ``level`` catches a sampler that moves ``shift`` of
    probability from the likeliest outcome of ``expected`` to the next: simulated with
    ``trials`` draws of ``rows``."""
    wrong = expected.double().clone()
    order = wrong.argsort(descending=True)
    wrong[order[0]] -= shift
    wrong[order[1]] += shift
    generator = torch.Generator().manual_seed(0)
    caught = 0
    for _ in range(trials):
        draws = torch.multinomial(wrong, rows, replacement=True, generator=generator)
        caught += (
            chi_square(torch.bincount(draws, minlength=len(wrong)), expected)[2] < level
        )
    return caught / trials


@torch.no_grad()
def call_seconds(model, prompt: torch.Tensor, new: int = 1, repeats: int = 20) -> float:
    """Seconds for one cached call of ``model`` that reads the last ``new`` tokens of
    ``prompt`` (1, T) after the others: the median of ``repeats``, a typical call."""
    reader = Reader(model.eval())
    reader(prompt[:, :-new])
    length = prompt.shape[1] - new
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        reader(prompt)
        seconds.append(time.perf_counter() - started)
        reader.forget_after(length)
    return statistics.median(seconds)


@torch.no_grad()
def decoding_seconds(
    target, draft, prompts: list, new_tokens: int, gamma: int, repeats: int = 3
) -> tuple[list[float], list[float], SpeculativeStats]:
    """(plain seconds, speculative seconds, SpeculativeStats): ``repeats`` timings of
    each way of writing ``new_tokens`` after each of ``prompts`` ((1, T) each) at
    temperature 1. The two take turns, plain then speculative, so that repeat i of
    each is a pair for ``statistics.speedup_interval``; each repeat draws the same
    text (the generator restarts), so only the machine's noise differs."""
    seconds = {"plain": [], "speculative": []}
    for _ in range(repeats):
        for way, timings in seconds.items():
            generator = torch.Generator().manual_seed(0)
            started, stats = time.perf_counter(), SpeculativeStats()
            for prompt in prompts:
                if way == "plain":
                    generate(target, prompt, new_tokens, generator=generator)
                else:
                    stats += speculative_generate(
                        target, draft, prompt, new_tokens, gamma, 1.0, generator
                    )[1]
            timings.append(time.perf_counter() - started)
    return seconds["plain"], seconds["speculative"], stats
