"""GPT-1's input transformations (Radford et al., 2018): a task with structure (a pair
of texts, a context and candidate answers) becomes one or more ordinary token sequences,
texts joined by a delimiter and closed by the extract token, so that the pretrained body
is fine-tuned unchanged. Two tasks built from the movie reviews try them, beside the
zero-shot score GPT-1 also measured: the language model's own likelihood, untrained for
the task.

    >>> from minformers.bpe import ByteBPETokenizer, train_bpe
    >>> vocab, merges = train_bpe("good film bad", 262, special_tokens=SPECIAL_TOKENS)
    >>> tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=SPECIAL_TOKENS)
    >>> ids, lengths = encode_sequences(tokenizer, [[("good", "bad")]], max_len=12)
    >>> tokenizer.decode(ids[0, 0, : lengths[0, 0]].tolist())
    '<|endoftext|>good<|endoftext|>bad<|classify|>'
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from minformers.bpe import ByteBPETokenizer
from minformers.finetuning import FineTuneResult, fine_tune_and_score
from minformers.gpt import GPT
from minformers.objectives import IGNORE_INDEX, pad
from minformers.recipes.gpt_classifier import SPECIAL_TOKENS, body_for, review_corpus
from minformers.recipes.language_model_run import LMRun
from minformers.support import data
from minformers.support.arguments import require_size
from minformers.train import TrainConfig


def encode_sequences(
    tokenizer: ByteBPETokenizer,
    rows: Sequence[Sequence[Sequence[str]]],
    max_len: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-1's input transformations for structured inputs. Each row holds K token
    sequences; each sequence is text segments joined by ``END`` (GPT-1's delimiter;
    here also the text boundary the body was pretrained on),
    ``END seg_1 END seg_2 ... CLASSIFY``, each segment cut to an equal share of
    ``max_len``. Returns ids (N, K, T), right-padded with ``END``, and lengths (N, K).

    A pair with no order (similarity) is given in both orders, ((a, b), (b, a)); a
    multiple choice is one sequence per candidate,
    ((context, answer_1), (context, answer_2), ...).
    """
    require_size("max_len", max_len, minimum=3)
    k = len(rows[0]) if rows else 0
    if any(len(row) != k for row in rows):
        raise ValueError("every row must hold the same number of sequences")
    end, classify = (tokenizer.encode(token)[0] for token in SPECIAL_TOKENS)
    sequences = []
    for row in rows:
        for segments in row:
            # room for each segment's END and for the extract token
            share = (max_len - 1 - len(segments)) // len(segments)
            if share < 1:
                raise ValueError(
                    f"max_len={max_len} leaves no room for {len(segments)} segments"
                )
            pieces = [(end, *tokenizer.encode(text)[:share]) for text in segments]
            sequences.append([piece for part in pieces for piece in part] + [classify])
    ids, attention_mask = pad(sequences, end)
    return ids.view(len(rows), k, -1), attention_mask.sum(dim=1).view(len(rows), k)


class GPTStructuredHead(nn.Module):
    """A GPT body that reads each of a row's K sequences (``encode_sequences``), and a
    linear head on their extract tokens' states, combined as GPT-1 did:

    - ``"sum"`` (similarity): the K states are added, then mapped to the classes;
    - ``"choose"`` (multiple choice): each state gets one score, and the K scores are
      the logits of the choice.
    """

    def __init__(self, gpt: GPT, combine: str, num_classes: int = 2):
        super().__init__()
        if combine not in ("sum", "choose"):
            raise ValueError(f"combine must be 'sum' or 'choose', got {combine!r}")
        self.gpt, self.combine = gpt, combine
        outputs = require_size("num_classes", num_classes, minimum=2)
        self.head = nn.Linear(gpt.config.d_model, outputs if combine == "sum" else 1)

    def forward(self, input_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(N, K, T) ids and (N, K) lengths -> logits, (N, classes) or (N, K)."""
        n, k, t = input_ids.shape
        hidden = self.gpt.hidden_states(input_ids.reshape(n * k, t))  # (N K, T, C)
        rows = torch.arange(n * k, device=input_ids.device)
        extract = hidden[rows, lengths.reshape(-1) - 1].view(n, k, -1)  # (N, K, C)
        if self.combine == "sum":
            return self.head(extract.sum(dim=1))  # (N, C) -> (N, classes)
        return self.head(extract).squeeze(-1)  # (N, K, 1) -> (N, K)


def review_pairs(split: str, seed: int = 0) -> tuple[list, torch.Tensor]:
    """A similarity task: each sentence of ``split`` paired with another drawn at
    random (seeded); label 1 when the two have the same sentiment. Returns the rows for
    ``encode_sequences`` (both orders of each pair) and the labels."""
    sentences = data.movie_review_splits()[split]
    generator = torch.Generator().manual_seed(seed)
    partners = torch.randperm(len(sentences), generator=generator).tolist()
    rows, labels = [], []
    for (text, label), partner in zip(sentences, partners, strict=True):
        other_text, other_label = sentences[partner]
        rows.append(((text, other_text), (other_text, text)))
        labels.append(int(label == other_label))
    return rows, torch.tensor(labels)


def shuffled_endings(
    split: str, seed: int = 0, keep_last: bool = True, min_words: int = 8
) -> tuple[list, torch.Tensor]:
    """A two-way multiple choice, after the Story Cloze test GPT-1 was scored on: the
    first half of a sentence's words is the context; the candidates are its second half
    as written and the same words shuffled, in a random order (seeded); the label is the
    place of the one as written. ``keep_last`` leaves the last word (usually the full
    stop) in its place in both, so that the ending's last piece gives nothing away.
    Sentences of fewer than ``min_words`` words, or whose shuffle cannot differ, are
    skipped."""
    rng = random.Random(seed)
    rows, labels = [], []
    for text, _ in data.movie_review_splits()[split]:
        words = text.split()
        if len(words) < min_words:
            continue
        context, ending = words[: len(words) // 2], words[len(words) // 2 :]
        movable, fixed = (ending[:-1], ending[-1:]) if keep_last else (ending, [])
        if len(set(movable)) < 2:
            continue
        shuffled = movable
        while shuffled == movable:
            shuffled = rng.sample(movable, len(movable))
        flip = rng.randrange(2)  # 1: the ending as written comes second
        candidates = [" ".join(ending), " ".join(shuffled + fixed)]
        if flip:
            candidates.reverse()
        rows.append(tuple((" ".join(context), candidate) for candidate in candidates))
        labels.append(flip)
    return rows, torch.tensor(labels)


# task name: the rows and labels of a split, and how the head combines the sequences
TASKS = {"similarity": (review_pairs, "sum"), "ending": (shuffled_endings, "choose")}


@dataclass(frozen=True)
class StructuredRun:
    """One fine-tuning run of GPT-1's input transformations on a task in ``TASKS``."""

    # the body's pretraining on ``review_corpus()``, loaded from this build's checkpoint
    pretraining: LMRun
    task: str
    schedule: TrainConfig
    seed: int = 0  # the head's initial weights and the order of the batches
    pretrained: bool = True  # False: the same network from random weights
    batch_size: int = 16
    max_len: int = 40  # tokens per sequence, the extract token included


@lru_cache(maxsize=4)
def encoded_task(
    task: str, split: str, max_len: int
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A task's split as the body reads it, encoded once per process:
    ((ids, lengths), labels)."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    rows, labels = TASKS[task][0](split)
    return encode_sequences(review_corpus().tokenizer, rows, max_len), labels


def fine_tune_structured(run: StructuredRun) -> FineTuneResult:
    """Fine-tune ``GPTStructuredHead`` on the task's training rows, scored on all of its
    dev rows. Prints nothing, so that runs can go to worker processes."""
    train_inputs, train_labels = encoded_task(run.task, "train", run.max_len)
    dev_inputs, dev_labels = encoded_task(run.task, "dev", run.max_len)
    body = body_for(run.pretraining, run.seed, run.pretrained)
    return fine_tune_and_score(
        GPTStructuredHead(body, TASKS[run.task][1]),
        train_inputs,
        train_labels,
        dev_inputs,
        dev_labels,
        run.schedule,
        batch_size=run.batch_size,
        seed=run.seed,
    )


def text_log_likelihoods(
    language_model: GPT, tokenizer: ByteBPETokenizer, texts: Sequence[str]
) -> torch.Tensor:
    """Zero-shot scores, (N,): the log-probability the language model gives each text,
    read as it was pretrained (``END`` text ``END``), cut to the model's context."""
    end = tokenizer.encode(SPECIAL_TOKENS[0])[0]
    room = language_model.config.max_len - 2
    ids, attention_mask = pad(
        [[end, *tokenizer.encode(t)[:room], end] for t in texts], end
    )
    targets = ids[:, 1:].masked_fill(attention_mask[:, 1:] == 0, IGNORE_INDEX)
    language_model.eval()
    with torch.no_grad():
        logits = language_model(ids)[:, :-1]  # position t predicts token t + 1
    losses = F.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE_INDEX, reduction="none"
    )
    return -losses.sum(dim=1)
