"""Shakespeare as characters: the corpus that the GPT page trains on (with
``language_model_run.train_language_model``), that later pages start from
(generation), and on which the modern-decoder page trains a Llama-style decoder with
exactly the same data and budget.

    corpus = shakespeare_characters()  # 84 characters, every seventh work held out
    model, history = train_language_model(corpus)  # trained, or this build's checkpoint

Each evaluation of that recipe writes a sample from the prompt "ROMEO:",
kept in ``history.text["sample"]``.

    >>> corpus = shakespeare_characters()
    >>> corpus.tokenizer.vocab_size, corpus.held_out[:2]
    (84, ['alls_well_that_ends_well', 'henry_iv_part_1'])
"""

import contextlib
import io
from functools import lru_cache

import torch
from torch import nn

from minformers.generation import generate
from minformers.language_modeling import CharTokenizer, TextCorpus
from minformers.recipes.language_model_run import LMRun, train_language_model
from minformers.support import data
from minformers.support.checkpoints import cached_in_build
from minformers.support.history import History

PROMPT = "ROMEO:\n"


@lru_cache(maxsize=1)
def shakespeare_characters() -> TextCorpus:
    """The 42 works as characters: the 36 training works concatenated, and the held-out
    ones (every seventh work in alphabetical order, as in the tokenization chapter); the
    vocabulary is the characters of all 42. Cached in this build's checkpoints:
    encoding five million characters takes a second or two, in each page and worker."""
    return cached_in_build("shakespeare-chars", {}, _shakespeare_characters)


def _shakespeare_characters() -> TextCorpus:
    works = data.shakespeare_works()
    held_out = sorted(works)[::7]
    train_text = "".join(text for name, text in works.items() if name not in held_out)
    validation_text = "".join(works[name] for name in held_out)
    tokenizer = CharTokenizer(train_text + validation_text)
    return TextCorpus(
        "shakespeare-chars",
        tokenizer,
        torch.tensor(tokenizer.encode(train_text)),
        torch.tensor(tokenizer.encode(validation_text)),
        held_out,
        PROMPT,
    )


def trained_quietly(run: LMRun) -> tuple[nn.Module, History]:
    """Train ``run`` on these characters, or load it from this build's checkpoints,
    printing nothing: one of several runs on worker processes
    (``parallel.map_in_workers``), whose lines would interleave."""
    with contextlib.redirect_stderr(io.StringIO()):
        return train_language_model(shakespeare_characters(), run, progress=False)


def train_quietly(run: LMRun) -> History:
    """``trained_quietly``'s History alone."""
    return trained_quietly(run)[1]


def write_samples(
    options: dict, prompt: str, samples: int, length: int, seed: int
) -> list[str]:
    """``samples`` texts of ``length`` characters that the GPT page's model writes after
    ``prompt``, with ``generation.generate``'s ``options`` (temperature, top_k, top_p)
    and the random draws of ``seed``: one setting of the generation page's sweep,
    importable by name so that the settings can be shared out over
    ``parallel.map_in_workers``. The model is loaded from this build's checkpoint
    (trained first, quietly, if there is none)."""
    corpus = shakespeare_characters()
    with contextlib.redirect_stderr(io.StringIO()):
        model = train_language_model(corpus, progress=False)[0]
    # one prompt, other draws per row
    batch = torch.tensor([corpus.tokenizer.encode(prompt)]).expand(samples, -1)
    out = generate(
        model,
        batch,
        length,
        generator=torch.Generator().manual_seed(seed),
        use_cache=False,
        **options,
    )
    return [corpus.tokenizer.decode(row[batch.shape[1] :]) for row in out.tolist()]
