"""The modern-decoder page's comparison of a GPT and a Llama-style decoder: a run of
``language_model_run``'s recipe on the Shakespeare characters, scored window by window
on the held-out windows that its ``val_loss`` averages. Two architectures trained with
the same initial-weight seeds are then compared over the same windows and seeds by a
paired bootstrap (``statistics.mean_difference_interval``), not by a t-interval over a
few seeds.

    history, losses = scored_run(LMRun("llama", init_seed=1))  # losses: one per window
    # the mean of the windows' losses is the recipe's own last val_loss

The floor that the page reads losses against, for characters of English text:

>>> floor = unigram_floor(shakespeare_characters(), LMRun())  # nats per character
>>> 2.5 < floor < 4.0
True

The windows are the recipe's own (``language_model_run.held_out_windows``); the page
checks that the mean of the windows' losses equals the recipe's last ``val_loss``.
"""

import torch
import torch.nn.functional as F

from minformers.language_modeling import TextCorpus
from minformers.recipes.language_model_run import (
    LMRun,
    held_out_windows,
)
from minformers.recipes.shakespeare_gpt import shakespeare_characters, trained_quietly
from minformers.support.history import History


def scored_run(run: LMRun) -> tuple[History, list[float]]:
    """``shakespeare_gpt.trained_quietly``'s run: its History and its mean loss on each
    held-out window (nats per character)."""
    model, history = trained_quietly(run)
    windows = held_out_windows(shakespeare_characters(), run)
    with torch.no_grad():
        logits = model(windows[:, :-1])  # (B, T, V): position t predicts token t + 1
    # (B, V, T) against (B, T) -> (B, T), then the mean over each window
    losses = F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")
    return history, losses.mean(dim=1).tolist()


def unigram_floor(corpus: TextCorpus, run: LMRun) -> float:
    """The loss of predicting every held-out character by its frequency in the training
    text (add-one), ignoring the context: the floor that "loss minus floor" reads
    against (nats per character, over the same targets as ``scored_run``)."""
    vocab_size = corpus.tokenizer.vocab_size
    counts = torch.bincount(corpus.train_ids, minlength=vocab_size).double() + 1
    targets = held_out_windows(corpus, run)[:, 1:]
    return -(counts / counts.sum()).log()[targets].mean().item()
