"""The encoder-decoder pretraining page's recipe: a tiny encoder-decoder taught to undo
T5's span corruption or BART's text infilling (``minformers.denoising``) on review
sentences, with its loss split by what the input showed.

A denoiser's target mixes two kinds of token. Some were cut out of the input, and only
the context can say what they were (T5's span tokens, BART's masked spans). The others
the decoder can get without reading the context: BART's target repeats every token the
input kept, and T5's holds the sentinels, which come in a fixed order.
``Corrupted.hidden`` flags the first kind, so that a run can report the two losses
apart, as the BERT pages split MLM's loss at [MASK] from its loss at tokens the model
saw.

    >>> ids = DenoisingIds(mask=3, sentinels=(10, 11, 12))
    >>> tokens = [20, 21, 22, 23, 24, 25]
    >>> example = corrupt("BART text infilling", tokens, ids, random.Random(0))
    >>> example.targets == tokens + [EOS]  # BART's decoder writes the whole text
    True
    >>> len(example.hidden) == len(example.targets)
    True
"""

import contextlib
import hashlib
import io
import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from minformers.denoising import span_corruption, text_infilling
from minformers.encoder_decoder import (
    EOS,
    PAD,
    EncoderDecoder,
    TransformerConfig,
    sequence_loss,
    shift_right,
)
from minformers.objectives import pad
from minformers.support.checkpoints import checkpoint_path
from minformers.support.history import History
from minformers.train import TrainConfig, train

OBJECTIVES = ("T5 span corruption", "BART text infilling")


@dataclass(frozen=True)
class DenoisingIds:
    mask: int  # BART's <mask>
    sentinels: tuple[int, ...]  # T5's <extra_id_0>, <extra_id_1>, ...


@dataclass(frozen=True)
class Corrupted:
    inputs: list[int]  # what the encoder reads, ending with </s>
    targets: list[int]  # what the decoder writes, ending with </s>
    # per target token: True if cut out of the input, so that only the context gives it
    hidden: list[bool]


def corrupt(
    objective: str, tokens: Sequence[int], ids: DenoisingIds, rng: random.Random
) -> Corrupted:
    """A training example of ``objective``, one of OBJECTIVES, from a sentence's ids."""
    if objective == "T5 span corruption":
        inputs, targets = span_corruption(tokens, ids.sentinels, rng)
        # the target is sentinels and the spans' tokens
        hidden = [token not in ids.sentinels for token in targets]
    elif objective == "BART text infilling":
        infilled = text_infilling(tokens, ids.mask, rng)
        inputs, targets = infilled.inputs, infilled.targets
        hidden = [False] * len(targets)
        for start, length in infilled.spans:
            hidden[start : start + length] = [True] * length
    else:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    return Corrupted([*inputs, EOS], [*targets, EOS], [*hidden, False])


@dataclass(frozen=True)
class DenoisingBatch:
    sources: torch.Tensor  # (B, S), right-padded with PAD
    targets: torch.Tensor  # (B, T), right-padded with PAD
    hidden: torch.Tensor  # (B, T) bool: Corrupted.hidden, False on padding


def denoising_batch(
    objective: str, sentences: Sequence[Sequence[int]], ids: DenoisingIds, seed: int
) -> DenoisingBatch:
    """The sentences corrupted afresh, with a generator seeded by ``seed``; padded."""
    rng = random.Random(seed)
    examples = [corrupt(objective, tokens, ids, rng) for tokens in sentences]
    sources, _ = pad([example.inputs for example in examples], PAD)
    targets, _ = pad([example.targets for example in examples], PAD)
    hidden, _ = pad(
        [[int(flag) for flag in example.hidden] for example in examples],
        0,
        targets.shape[1],
    )
    return DenoisingBatch(sources, targets, hidden.bool())


def denoising_scores(model: EncoderDecoder, batch: DenoisingBatch) -> dict[str, float]:
    """Cross-entropy per target token (nats) over all of them ("loss"), over the hidden
    ones ("hidden_loss") and over the rest ("shown_loss"), and the share of the rest
    that the model's top choice gets right ("shown_accuracy")."""
    with torch.no_grad():
        logits = model(batch.sources, shift_right(batch.targets))  # (B, T, V)
    real = batch.targets != PAD
    # (B, T)
    losses = F.cross_entropy(logits.transpose(1, 2), batch.targets, reduction="none")
    shown = real & ~batch.hidden
    right = logits.argmax(-1) == batch.targets
    return {
        "loss": losses[real].mean().item(),
        "hidden_loss": losses[batch.hidden].mean().item(),
        "shown_loss": losses[shown].mean().item(),
        "shown_accuracy": right[shown].float().mean().item(),
    }


@dataclass(frozen=True)
class DenoisingRun:
    objective: str  # one of OBJECTIVES
    schedule: TrainConfig = TrainConfig(
        steps=600, lr=3e-3, warmup_steps=60, eval_every=120
    )
    # sentences per step, each corrupted afresh every time it is drawn
    batch_size: int = 24

    def config(self, vocab_size: int) -> TransformerConfig:
        """2 + 2 pre-LN layers of 128 channels, one embedding table for the encoder, the
        decoder and the output."""
        return TransformerConfig.tiny(
            vocab_size,
            vocab_size,
            d_model=128,
            norm_first=True,
            share_embeddings=True,
            max_len=96,
        )


def pretrain_denoiser(
    run: DenoisingRun,
    train_sentences: Sequence[Sequence[int]],
    dev_sentences: Sequence[Sequence[int]],
    ids: DenoisingIds,
    vocab_size: int,
    progress: bool | None = None,
) -> tuple[EncoderDecoder, History]:
    """Train ``run.config`` from seed 0 on ``run.objective``; return the model (eval
    mode) and its History, whose evaluations are ``denoising_scores`` on the dev
    sentences corrupted once ("val_" + each name). Checkpointed, so a second call with
    the same run and data loads the result."""
    if run.objective not in OBJECTIVES:
        raise ValueError(
            f"objective must be one of {OBJECTIVES}, got {run.objective!r}"
        )
    torch.manual_seed(0)
    model = EncoderDecoder(run.config(vocab_size))
    validation = denoising_batch(run.objective, dev_sentences, ids, seed=10**6)

    def batch_for_step(step: int) -> DenoisingBatch:
        rows = random.Random(step).sample(range(len(train_sentences)), run.batch_size)
        return denoising_batch(
            run.objective, [train_sentences[row] for row in rows], ids, seed=step
        )

    def loss_for_batch(model: EncoderDecoder, batch: DenoisingBatch) -> torch.Tensor:
        return sequence_loss(
            model(batch.sources, shift_right(batch.targets)), batch.targets
        )

    data = hashlib.sha256(
        json.dumps([list(train_sentences), list(dev_sentences), asdict(ids)]).encode()
    )
    settings = {"run": asdict(run), "vocab_size": vocab_size, "data": data.hexdigest()}
    history = train(
        model,
        batch_for_step,
        loss_for_batch,
        run.schedule,
        evaluate=lambda model: {
            f"val_{name}": value
            for name, value in denoising_scores(model, validation).items()
        },
        checkpoint=checkpoint_path("denoiser", settings),
        progress=progress,
    )
    return model.eval(), history


def pretrain_denoiser_quietly(job: tuple) -> tuple[EncoderDecoder, History]:
    """``pretrain_denoiser(*job)`` without a printed line: one run for a worker process
    (``parallel.map_in_workers``), where lines from two runs would interleave."""
    with contextlib.redirect_stderr(io.StringIO()):
        return pretrain_denoiser(*job, progress=False)
