"""Fine-tuning GPT for classification, as GPT-1 did (Radford et al., 2018): a linear
head reads the last block's hidden state at an *extract* token appended to the text, and
training may keep the language-modelling loss as an auxiliary objective,

    L3 = L2 + lambda * L1,
    L2 = cross-entropy of the classes,   L1 = next-token loss on the same inputs.

The pretraining text here is the movie reviews' training sentences (unlabelled), with a
byte-level BPE trained on them; ``finetuning.fit_classifier(..., lm_weight=lambda)``
minimises L3. ``fine_tune_on_reviews`` is one whole run (a body pretrained or random, a
lambda, a seed) that a worker process can run alone, so that a page can compare several
seeds of each setting in the time of a few.

    >>> from minformers.bpe import ByteBPETokenizer, train_bpe
    >>> vocab, merges = train_bpe("good film bad film", 260, SPECIAL_TOKENS)
    >>> tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=SPECIAL_TOKENS)
    >>> ids, lengths = encode_for_classifier(tokenizer, ["good", "bad film"], max_len=8)
    >>> [tokenizer.decode(row[:n]) for row, n in zip(ids.tolist(), lengths)]
    ['<|endoftext|>good<|classify|>', '<|endoftext|>bad film<|classify|>']
"""

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bpe import ByteBPETokenizer, train_bpe
from minformers.finetuning import FineTuneResult, fine_tune_and_score
from minformers.gpt import GPT
from minformers.language_modeling import TextCorpus
from minformers.objectives import pad
from minformers.recipes.language_model_run import LMRun, train_language_model
from minformers.support import data
from minformers.support.arguments import require_size
from minformers.support.checkpoints import cached_in_build
from minformers.train import TrainConfig

# ends (and so starts) each text; GPT-1's extract token
END, CLASSIFY = "<|endoftext|>", "<|classify|>"
SPECIAL_TOKENS = (END, CLASSIFY)


@lru_cache(maxsize=2)
def review_corpus(vocab_size: int = 2048) -> TextCorpus:
    """The training split's review sentences as one stream of BPE tokens, each sentence
    followed by ``END``; the dev split's sentences, the same way, for validation (their
    labels are not used). The BPE is trained on the training sentences, with
    ``CLASSIFY`` reserved: it never occurs in the text, so pretraining never sees it.
    Cached in this build's checkpoints: training the BPE takes seconds, in each page
    and worker that asks."""
    return cached_in_build(
        "reviews-corpus", {"vocab_size": vocab_size}, lambda: _review_corpus(vocab_size)
    )


def _review_corpus(vocab_size: int) -> TextCorpus:
    splits = data.movie_review_splits()
    train_text, dev_text = (
        "".join(text + END for text, _ in splits[part]) for part in ("train", "dev")
    )
    vocab, merges = train_bpe(train_text, vocab_size, special_tokens=SPECIAL_TOKENS)
    tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=SPECIAL_TOKENS)
    return TextCorpus(
        f"reviews-bpe{vocab_size}",
        tokenizer,
        torch.tensor(tokenizer.encode(train_text)),
        torch.tensor(tokenizer.encode(dev_text)),
        ["the dev split's sentences"],
        END,
    )


def review_pretraining() -> LMRun:
    """The language model the GPT fine-tuning pages start from: the GPT page's design,
    smaller (2 layers, a 40-token context), 800 steps of 16 windows of the reviews."""
    return LMRun(
        schedule=TrainConfig(steps=800, lr=3e-3, warmup_steps=16, eval_every=200),
        batch_size=16,
        sample_length=30,
        model_changes=(("n_layers", 2), ("max_len", 40)),
    )


def encode_for_classifier(
    tokenizer: ByteBPETokenizer, texts: Sequence[str], max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``END pieces CLASSIFY`` for each text, at most ``max_len`` tokens (later pieces
    are dropped, the extract token is kept), right-padded with ``END``: (ids (N, T),
    lengths (N,))."""
    require_size("max_len", max_len, minimum=3)
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    end, classify = (tokenizer.encode(token)[0] for token in SPECIAL_TOKENS)
    rows = [[end, *tokenizer.encode(text)[: max_len - 2], classify] for text in texts]
    ids, attention_mask = pad(rows, end)
    return ids, attention_mask.sum(dim=1)


@dataclass
class ClassifierOutput:
    logits: torch.Tensor  # (B, classes), from the extract token's hidden state
    lm_loss: torch.Tensor  # L1, scalar: mean next-token loss over the texts' own tokens


class GPTClassifier(nn.Module):
    """A GPT body and a linear head on the hidden state of each row's last token
    (the extract token)."""

    def __init__(self, gpt: GPT, num_classes: int = 2):
        super().__init__()
        self.gpt = gpt
        self.head = nn.Linear(
            gpt.config.d_model, require_size("num_classes", num_classes, minimum=2)
        )

    def forward(
        self, input_ids: torch.Tensor, lengths: torch.Tensor
    ) -> ClassifierOutput:
        if lengths.shape != input_ids.shape[:1] or not bool(
            ((lengths >= 3) & (lengths <= input_ids.shape[1])).all()
        ):
            raise ValueError(
                f"lengths must be (B,) = {tuple(input_ids.shape[:1])} with values in "
                f"[3, T={input_ids.shape[1]}], as encode_for_classifier returns them"
            )
        hidden = self.gpt.hidden_states(input_ids)  # (B, T, C)
        rows = torch.arange(len(input_ids), device=input_ids.device)
        logits = self.head(hidden[rows, lengths - 1])  # (B, C) -> (B, classes)
        lm_logits = hidden @ self.gpt.token_embedding.weight.T  # tied output: (B, T, V)
        return ClassifierOutput(logits, text_lm_loss(lm_logits, input_ids, lengths))


def text_lm_loss(
    lm_logits: torch.Tensor, input_ids: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """L1 on classifier inputs, (B, T, V), (B, T), (B,) -> scalar: the mean next-token
    cross-entropy over each row's text pieces, tokens 1 .. length-2. Position t predicts
    token t + 1; the padding is no target, nor is the extract token (at length-1), which
    no text ever continues with.

    >>> ids, lengths = torch.tensor([[0, 3, 4, 1, 0]]), torch.tensor([4])
    >>> # uniform logits over 7 tokens: ln 7 at each of the two text predictions
    >>> round(text_lm_loss(torch.zeros(1, 5, 7), ids, lengths).item(), 4)
    1.9459
    """
    # the index of each target token
    positions = torch.arange(1, input_ids.shape[1], device=input_ids.device)
    # (B, T-1); -100: no target
    targets = input_ids[:, 1:].masked_fill(positions >= lengths[:, None] - 1, -100)
    return F.cross_entropy(
        lm_logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=-100
    )


@dataclass(frozen=True)
class FineTuneRun:
    """One fine-tuning run on the review sentences: the body, the weight of L1, the
    seed, the schedule."""

    # the body's pretraining on ``review_corpus()``, loaded from this build's checkpoint
    pretraining: LMRun
    schedule: TrainConfig
    lm_weight: float = 0.0  # lambda in L3 = L2 + lambda L1
    seed: int = 0  # the head's initial weights and the order of the batches
    # False: the same network from random weights, the control for pretraining
    pretrained: bool = True
    batch_size: int = 16
    classify_len: int = 24  # tokens per classified sentence, the extract token included


def body_for(pretraining: LMRun, seed: int, pretrained: bool = True) -> GPT:
    """The pretrained body (or, for a control, the same network's random weights at
    ``seed``); the global seed is then ``seed``, for the head. The pretraining is loaded
    from this build's checkpoint, quietly (trained, if this build has not trained it
    yet)."""
    with contextlib.redirect_stderr(io.StringIO()):
        language_model, _ = train_language_model(
            review_corpus(), pretraining, progress=False
        )
    torch.manual_seed(seed)
    body = GPT(language_model.config)
    if pretrained:
        body.load_state_dict(language_model.state_dict())
    return body


def classifier_for(run: FineTuneRun) -> GPTClassifier:
    """The run's starting point: ``body_for`` its pretraining, and a head
    drawn from ``run.seed``."""
    return GPTClassifier(body_for(run.pretraining, run.seed, run.pretrained))


def fine_tune_on_reviews(run: FineTuneRun) -> FineTuneResult:
    """Fine-tune ``classifier_for(run)`` on the training split's sentences, scored on
    the whole dev split. Prints nothing: runs go to worker processes
    (``parallel.map_in_workers``), whose lines would interleave."""
    tokenizer, splits = review_corpus().tokenizer, data.movie_review_splits()
    (train_texts, train_labels), (dev_texts, dev_labels) = (
        zip(*splits[part], strict=True) for part in ("train", "dev")
    )
    train_inputs, dev_inputs = (
        encode_for_classifier(tokenizer, texts, run.classify_len)
        for texts in (train_texts, dev_texts)
    )
    train_labels, dev_labels = torch.tensor(train_labels), torch.tensor(dev_labels)
    return fine_tune_and_score(
        classifier_for(run),
        train_inputs,
        train_labels,
        dev_inputs,
        dev_labels,
        run.schedule,
        batch_size=run.batch_size,
        lm_weight=run.lm_weight,
        seed=run.seed,
    )
