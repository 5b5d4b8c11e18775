"""Fine-tuning the course's shared encoder as a classifier, on two tasks: the sentiment
of movie reviews, and the topic of BBC articles it never read (``news.topic_task``).
The body is the one the encoder-pretraining page trained
(``bert_pretraining.shared_encoder``) or, as the control, the same network from random
weights; the head is new (BERT's, on the pooled ``[CLS]``, or one on the mean of the
last hidden states), and it can start as the frozen body's linear probe
(``probe_first``). Each function here is one whole run, so that a page can send several
seeds of each to worker processes (``parallel.map_in_workers``).

    >>> run = EncoderFineTuneRun(pretrained=False, seed=2, pooling="mean")
    >>> # sentences drawn in one run: more than half the training split
    >>> run.schedule.steps * run.batch_size
    4800
"""

import copy
from dataclasses import dataclass

import torch

from minformers.bert import BertForSequenceClassification, BertModel
from minformers.finetuning import (
    FineTuneResult,
    encode_sentences,
    fine_tune_and_score,
    fit_linear_probe,
    sentence_features,
)
from minformers.recipes.bert_pretraining import ENCODER_RUN, shared_encoder
from minformers.recipes.news import news_corpus, topic_task
from minformers.recipes.transfer import MeanPoolClassifier
from minformers.support import data
from minformers.train import TrainConfig


@dataclass(frozen=True)
class EncoderFineTuneRun:
    """One fine-tuning run of the tiny BERT on the review sentences."""

    # False: the same network from random weights, the control for pretraining
    pretrained: bool = True
    # the random weights (body of the control, head of both) and the batch order
    seed: int = 0
    # "cls": BERT's head, on the pooled [CLS]; "mean": on the mean of the
    # last hidden states
    pooling: str = "cls"
    schedule: TrainConfig = TrainConfig(
        steps=150, lr=1e-3, warmup_steps=15, eval_every=50
    )
    batch_size: int = 32
    # True: the head starts as the linear probe of the frozen body's features (the
    # mean head only), so the first steps do not push a random head's errors into it
    probe_first: bool = False

    def __post_init__(self):
        if self.pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {self.pooling!r}")
        if self.probe_first and self.pooling != "mean":
            raise ValueError("probe_first needs pooling='mean', the probe's read-out")


@dataclass(frozen=True)
class TopicFineTuneRun(EncoderFineTuneRun):
    """One fine-tuning run on the topic of unseen news: ``per_topic`` labelled
    articles of each topic from the pool, scored on the ``split`` ("selection" or
    "scoring")."""

    pooling: str = "mean"
    schedule: TrainConfig = TrainConfig(
        steps=60, lr=1e-3, warmup_steps=6, eval_every=60
    )
    batch_size: int = 16
    per_topic: int = 16
    split: str = "scoring"

    def __post_init__(self):
        super().__post_init__()
        if self.split not in ("selection", "scoring"):
            raise ValueError(
                f"split must be 'selection' or 'scoring', got {self.split!r}"
            )


def encoder_classifier(
    run: EncoderFineTuneRun, body: BertModel | None = None, n_classes: int = 2
) -> BertForSequenceClassification | MeanPoolClassifier:
    """The run's starting point: a copy of the shared encoder's body, or the same
    network's random weights at ``run.seed``, and an ``n_classes`` head (on the pooled
    ``[CLS]`` or on the mean, as ``run.pooling`` says) drawn from ``run.seed``.
    ``body``, if given, is the starting body instead (of the shared encoder's shape,
    trained further, say)."""
    if body is None and run.pretrained:
        body = copy.deepcopy(shared_encoder().bert)
    torch.manual_seed(run.seed)
    if body is None:
        body = BertModel(ENCODER_RUN.config(news_corpus()))
    if run.pooling == "mean":
        return MeanPoolClassifier(body, n_classes)
    return BertForSequenceClassification.from_body(body, n_classes)


def fine_tune_encoder(
    run: EncoderFineTuneRun,
    train: tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor],
    dev: tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor],
    body: BertModel | None = None,
) -> FineTuneResult:
    """Fine-tune ``encoder_classifier(run, body)`` on ``train`` = ((ids, mask),
    labels), scored on ``dev`` alike. With ``run.probe_first`` the head starts as the
    linear probe fitted to the frozen body's mean vectors of the training inputs.
    Prints nothing: runs go to worker processes, whose lines would interleave."""
    (train_inputs, train_labels), (dev_inputs, dev_labels) = train, dev
    n_classes = int(max(train_labels.max(), dev_labels.max())) + 1
    model = encoder_classifier(run, body, n_classes)
    if run.probe_first:
        features = sentence_features(model.bert, *train_inputs, pooling="mean")
        probe = fit_linear_probe(features, train_labels, n_classes=n_classes)
        model.classifier.load_state_dict(probe.state_dict())
    return fine_tune_and_score(
        model,
        train_inputs,
        train_labels,
        dev_inputs,
        dev_labels,
        run.schedule,
        batch_size=run.batch_size,
        seed=run.seed,
    )


def fine_tune_encoder_on_reviews(
    run: EncoderFineTuneRun, body: BertModel | None = None
) -> FineTuneResult:
    """``fine_tune_encoder`` on the review sentences of the training split (cut to the
    encoder's length), scored on the whole dev split."""
    corpus, splits = news_corpus(), data.movie_review_splits()
    train, dev = (
        (
            encode_sentences(corpus.tokenizer, texts, corpus.max_len),
            torch.tensor(labels),
        )
        for texts, labels in (
            zip(*splits[part], strict=True) for part in ("train", "dev")
        )
    )
    return fine_tune_encoder(run, train, dev, body)


def fine_tune_encoder_on_topics(run: TopicFineTuneRun) -> FineTuneResult:
    """``fine_tune_encoder`` on ``run.per_topic`` labelled articles of each topic
    (drawn by ``run.seed``), scored on ``run.split``."""
    task = topic_task()
    rows = task.labelled(run.per_topic, run.seed)
    split = getattr(task, run.split)
    train = task.inputs(rows), task.labels[rows]
    return fine_tune_encoder(run, train, (task.inputs(split), task.labels[split]))
