"""Fine-tuning the course's shared encoder for the sentiment of movie reviews: the body
pretrained by the encoder-pretraining page (``bert_pretraining.shared_encoder``) or, as
the control, the same network from random weights, each with a new classification head
(BERT's, on the pooled ``[CLS]``, or one on the mean of the last hidden states), trained
on the labels and scored on the whole dev split. ``fine_tune_encoder_on_reviews`` is one
whole run, so that a page can send several seeds of each to worker processes
(``parallel.map_in_workers``).

    >>> run = EncoderFineTuneRun(pretrained=False, seed=2, pooling="mean")
    >>> # sentences drawn in one run: more than half the training split
    >>> run.schedule.steps * run.batch_size
    4800
"""

from dataclasses import dataclass

import torch

from minformers.bert import BertForSequenceClassification, BertModel
from minformers.finetuning import FineTuneResult, encode_sentences, fine_tune_and_score
from minformers.recipes.bert_pretraining import ENCODER_RUN, shared_encoder
from minformers.recipes.news import news_corpus
from minformers.recipes.transfer import MeanPoolClassifier
from minformers.support import data
from minformers.train import TrainConfig


@dataclass(frozen=True)
class EncoderFineTuneRun:
    """One fine-tuning run of the tiny BERT on the review sentences."""

    # False: the same network from random weights, the control for pretraining
    pretrained: bool = True
    # the random weights (body of the control, head of both) and the order of the
    # batches
    seed: int = 0
    # "cls": BERT's head, on the pooled [CLS]; "mean": on the mean of the last hidden
    # states
    pooling: str = "cls"
    schedule: TrainConfig = TrainConfig(
        steps=150, lr=1e-3, warmup_steps=15, eval_every=50
    )
    batch_size: int = 32

    def __post_init__(self):
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {self.pooling!r}")


def encoder_classifier(
    run: EncoderFineTuneRun, body: BertModel | None = None
) -> BertForSequenceClassification | MeanPoolClassifier:
    """The run's starting point: the shared encoder's body, or the same network's random
    weights at ``run.seed``, and a two-class head (on the pooled ``[CLS]`` or on the
    mean, as ``run.pooling`` says) drawn from ``run.seed``. ``body``, if given, is the
    starting body instead (of the shared encoder's shape, trained further, say)."""
    if body is None and run.pretrained:
        body = shared_encoder().bert
    torch.manual_seed(run.seed)
    if body is None:
        body = BertModel(ENCODER_RUN.config(news_corpus()))
    if run.pooling == "mean":
        return MeanPoolClassifier(body, n_classes=2)
    return BertForSequenceClassification.from_body(body, n_classes=2)


def fine_tune_encoder_on_reviews(
    run: EncoderFineTuneRun, body: BertModel | None = None
) -> FineTuneResult:
    """Fine-tune ``encoder_classifier(run, body)`` on the training split's sentences
    (cut to the encoder's length), scored on the whole dev split. Prints nothing: runs
    go to worker processes, whose lines would interleave."""
    corpus, splits = news_corpus(), data.movie_review_splits()
    (train_texts, train_labels), (dev_texts, dev_labels) = (
        zip(*splits[part], strict=True) for part in ("train", "dev")
    )
    train_inputs, dev_inputs = (
        encode_sentences(corpus.tokenizer, texts, corpus.max_len)
        for texts in (train_texts, dev_texts)
    )
    train_labels, dev_labels = torch.tensor(train_labels), torch.tensor(dev_labels)
    return fine_tune_and_score(
        encoder_classifier(run, body),
        train_inputs,
        train_labels,
        dev_inputs,
        dev_labels,
        run.schedule,
        batch_size=run.batch_size,
        seed=run.seed,
    )
