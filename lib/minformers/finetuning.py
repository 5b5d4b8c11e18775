"""Sentence classification with an encoder: encode sentences for BERT, fit a classifier
(a fine-tuned BERT or a linear probe on frozen features) with the course's training
loop, and read off accuracy on held-out sentences.

Encoding, features, probes and fine-tuning stay in one file because they are one
pipeline, shared by the encoder and GPT fine-tuning pages.

    >>> from minformers.wordpiece import WordPieceTokenizer
    >>> specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> tokenizer = WordPieceTokenizer([*specials, "a", "b", "c"])
    >>> ids, mask = encode_sentences(tokenizer, ["a b c a b c", "b"], max_len=5)
    >>> ids  # [CLS] a b c [SEP]: the pieces are cut, the closing [SEP] is kept
    tensor([[2, 5, 6, 7, 3],
            [2, 6, 3, 0, 0]])
"""

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from minformers.objectives import pad
from minformers.similarity import mean_pool
from minformers.support.arguments import require_size
from minformers.support.history import History
from minformers.train import TrainConfig, make_optimizer, train


def encode_sentences(
    tokenizer, texts: Sequence[str], max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] pieces [SEP]`` for each text, at most ``max_len`` tokens (pieces past
    ``max_len - 2`` are dropped), right-padded to the longest: (ids, attention_mask),
    each (N, T) with T <= max_len."""
    require_size("max_len", max_len, minimum=3)
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    special = tokenizer.special_ids
    rows = [
        [special["cls"], *tokenizer.encode(text)[: max_len - 2], special["sep"]]
        for text in texts
    ]
    return pad(rows, special["pad"])


@torch.no_grad()
def sentence_features(
    body: nn.Module,
    ids: torch.Tensor,
    attention_mask: torch.Tensor,
    pooling: str = "cls",
    batch_size: int = 128,
) -> torch.Tensor:
    """A frozen encoder's vector for each sentence, (N, C): ``"cls"`` is BERT's pooled
    [CLS] output (what its classifier reads), ``"mean"`` the average of the last hidden
    states over real tokens (what sentence-transformers models such as MiniLM are
    trained to give). Computed once, so a probe trains on fixed features.

    Rows are sorted by length and each batch is cut to its longest row, which skips most
    of the padding; so rows must be right-padded, as ``encode_sentences`` pads them. The
    result depends on ``batch_size`` only by float rounding.
    """
    if pooling not in ("cls", "mean"):
        raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
    if ids.shape != attention_mask.shape or not bool(
        (attention_mask[:, 1:] <= attention_mask[:, :-1]).all()
    ):
        raise ValueError(
            "ids and attention_mask must be (N, T), right-padded: each mask row is 1s, "
            "then 0s"
        )
    body = getattr(body, "bert", body).eval()
    features = None
    lengths = attention_mask.sum(dim=1)
    # similar lengths together: each batch is cut to its longest row
    order = torch.argsort(lengths, stable=True)
    for start in range(0, len(ids), batch_size):
        rows = order[start : start + batch_size]
        # right padding: every real token of these rows lies before `width`
        width = int(lengths[rows].max())
        batch_ids, batch_mask = ids[rows, :width], attention_mask[rows, :width]
        output = body(batch_ids, attention_mask=batch_mask)
        vectors = (
            output.pooled
            if pooling == "cls"
            else mean_pool(output.hidden_states, batch_mask)
        )
        if features is None:
            features = vectors.new_empty(len(ids), vectors.shape[1])
        features[rows] = vectors  # back in the callers' order
    return features


def _logits(output) -> torch.Tensor:
    # BertForSequenceClassification's output, or a plain nn.Linear's
    return getattr(output, "logits", output)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return (logits.argmax(-1) == labels).float().mean()


def fit_classifier(
    model: nn.Module,
    train_inputs: tuple[torch.Tensor, ...],
    train_labels: torch.Tensor,
    dev_inputs: tuple[torch.Tensor, ...],
    dev_labels: torch.Tensor,
    schedule: TrainConfig,
    batch_size: int = 32,
    progress: bool | None = None,
    lm_weight: float = 0.0,
    build_optimizer=make_optimizer,
    seed: int = 0,
    record: dict | None = None,
) -> History:
    """Train ``model`` so that ``model(*inputs)`` (logits, or an output with
    ``.logits``) predicts the labels.

    Each step draws ``batch_size`` training rows at random, seeded by the step and
    ``seed`` (another ``seed``, another batch order; seed 0 is the order this loop has
    always drawn); the dev set is scored whole at every evaluation ("dev_loss",
    "dev_accuracy"). The same loop fits a whole BERT (inputs: ids and attention mask)
    and a linear probe (inputs: features), so their curves compare like for like.

    An output that also has ``.lm_loss`` (a ``gpt_classifier.GPTClassifier``'s) is
    trained on GPT-1's L3 = L2 + lm_weight * L1, where L2 is the classes' cross-entropy
    and L1 that language-modelling loss; both are logged on every batch
    ("classifier_loss", "lm_loss") and on the dev set ("dev_lm_loss"), whatever the
    weight. ``build_optimizer`` is passed to ``train``. A ``record`` dict receives the
    dev predictions of each evaluation, (N,) class ids, under "dev_predictions": after
    the run, the final model's, without another pass over the dev set.
    """
    require_size("batch_size", batch_size)
    require_size("seed", seed, minimum=0)
    if seed >= 2**12:
        raise ValueError(
            "seed must be below 4096 (it shares the generator's 32 seed bits with the "
            f"step), got {seed}"
        )
    if not lm_weight >= 0:
        raise ValueError(f"lm_weight must be >= 0, got {lm_weight}")
    if any(len(x) != len(train_labels) for x in train_inputs) or any(
        len(x) != len(dev_labels) for x in dev_inputs
    ):
        raise ValueError("every input tensor must have one row per label")

    def batch_for_step(step: int):
        # torch's CPU generator keeps only the low 32 bits of its seed: seed and step
        # share them, the step below 2**20 (a million steps), and seed 0 keeps the
        # orders this loop drew before it had a seed.
        generator = torch.Generator().manual_seed(seed * 2**20 + step)
        rows = torch.randint(len(train_labels), (batch_size,), generator=generator)
        return tuple(x[rows] for x in train_inputs), train_labels[rows]

    def loss_for_batch(model: nn.Module, batch) -> dict[str, torch.Tensor]:
        inputs, labels = batch
        output = model(*inputs)
        logits = _logits(output)
        classifier_loss = F.cross_entropy(logits, labels)
        if not hasattr(output, "lm_loss"):
            if lm_weight:
                raise ValueError(
                    "lm_weight needs a model whose output has .lm_loss, such as a "
                    "GPTClassifier"
                )
            return {"loss": classifier_loss, "accuracy": accuracy(logits, labels)}
        # 0: no L1 backward
        loss = (
            classifier_loss + lm_weight * output.lm_loss
            if lm_weight
            else classifier_loss
        )
        return {
            "loss": loss,
            "classifier_loss": classifier_loss,
            "lm_loss": output.lm_loss,
            "accuracy": accuracy(logits, labels),
        }

    def evaluate(model: nn.Module) -> dict[str, torch.Tensor]:
        output = model(*dev_inputs)
        logits = _logits(output)
        if record is not None:
            record["dev_predictions"] = logits.argmax(-1)
        scores = {
            "dev_loss": F.cross_entropy(logits, dev_labels),
            "dev_accuracy": accuracy(logits, dev_labels),
        }
        return scores | (
            {"dev_lm_loss": output.lm_loss} if hasattr(output, "lm_loss") else {}
        )

    return train(
        model,
        batch_for_step,
        loss_for_batch,
        schedule,
        evaluate=evaluate,
        progress=progress,
        build_optimizer=build_optimizer,
    )


@dataclass
class FineTuneResult:
    # "dev_accuracy" (and the other metrics of fit_classifier) at each evaluation
    history: History
    # (N,) bool: the final model's verdict on each dev example, for paired tests
    dev_correct: torch.Tensor

    @property
    def accuracy(self) -> float:
        """The final model's accuracy on the dev examples."""
        return self.dev_correct.float().mean().item()


def fine_tune_and_score(
    model: nn.Module,
    train_inputs: tuple[torch.Tensor, ...],
    train_labels: torch.Tensor,
    dev_inputs: tuple[torch.Tensor, ...],
    dev_labels: torch.Tensor,
    schedule: TrainConfig,
    **options,
) -> FineTuneResult:
    """``fit_classifier`` (``options`` are its keywords) without a printed line, then
    the final model's right/wrong flag on every dev example: one run of a comparison
    whose runs go to worker processes, whose lines would interleave, and whose models
    are compared example by example (``statistics.mcnemar``)."""
    record = {}
    # progress=False still logs a line per evaluation
    with contextlib.redirect_stderr(io.StringIO()):
        history = fit_classifier(
            model,
            train_inputs,
            train_labels,
            dev_inputs,
            dev_labels,
            schedule,
            **{"progress": False, **options},
            record=record,
        )
    # the last evaluation is at the last step: the final model's predictions
    return FineTuneResult(history, record["dev_predictions"] == dev_labels)


def count_trainable(model: nn.Module) -> int:
    """Parameters that receive gradients: for a linear probe, only the classifier's."""
    return sum(
        parameter.numel() for parameter in model.parameters() if parameter.requires_grad
    )


def predict(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Class ids, (N,), with the model in eval mode and no gradients."""
    model.eval()
    with torch.no_grad():
        return _logits(model(*inputs)).argmax(-1)


def linear_probe_accuracy(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    dev_features: torch.Tensor,
    dev_labels: torch.Tensor,
    l2: float = 1e-3,
) -> float:
    """Dev accuracy of a logistic-regression probe fitted to fixed features, (N, C)
    each: the features are standardised with the training set's mean and spread, then
    the weights minimise the mean cross-entropy plus ``l2`` times their squared norm, by
    L-BFGS to convergence. Deterministic and about a second, so a pretraining run can
    call it at every evaluation; ``fit_classifier`` with an ``nn.Linear`` does the same
    job by SGD.

    >>> features = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    >>> labels = torch.tensor([0, 0, 1, 1])
    >>> linear_probe_accuracy(features, labels, features, labels)
    1.0
    """
    n_classes = int(max(train_labels.max(), dev_labels.max())) + 1
    predicted = linear_probe_predictions(
        train_features, train_labels, dev_features, l2, n_classes
    )
    return (predicted == dev_labels).float().mean().item()


def linear_probe_predictions(
    train_features: torch.Tensor,
    train_labels: torch.Tensor,
    dev_features: torch.Tensor,
    l2: float = 1e-3,
    n_classes: int | None = None,
) -> torch.Tensor:
    """(N_dev,) the class that ``linear_probe_accuracy``'s probe gives each dev example:
    its verdicts one by one, for a paired test of two bodies on the same examples.
    ``n_classes`` defaults to the training labels' largest + 1.

    >>> features = torch.tensor([[0.0], [1.0], [2.0], [3.0]])
    >>> labels = torch.tensor([0, 0, 1, 1])
    >>> linear_probe_predictions(features, labels, torch.tensor([[0.5], [2.5]]))
    tensor([0, 1])
    """
    if train_features.dim() != 2 or dev_features.shape[1:] != train_features.shape[1:]:
        raise ValueError(
            "features must be (N, C) with the same C, got "
            f"{tuple(train_features.shape)} and {tuple(dev_features.shape)}"
        )
    probe = fit_linear_probe(train_features, train_labels, l2, n_classes)
    with torch.no_grad():
        return probe(dev_features).argmax(-1)


def fit_linear_probe(
    features: torch.Tensor,
    labels: torch.Tensor,
    l2: float = 1e-3,
    n_classes: int | None = None,
) -> nn.Linear:
    """``linear_probe_accuracy``'s probe itself: a Linear(C, n_classes) on raw
    features, (N, C), whose weights minimise the cross-entropy plus ``l2`` times their
    squared norm on standardised features, the standardisation then folded into the
    layer. So it can become a classifier's head and start fine-tuning where the probe
    ended (``n_classes`` defaults to the labels' largest + 1).

    >>> probe = fit_linear_probe(torch.tensor([[0.0], [1.0], [2.0], [3.0]]),
    ...                          torch.tensor([0, 0, 1, 1]))
    >>> probe(torch.tensor([[0.5], [2.5]])).argmax(-1)
    tensor([0, 1])
    """
    mean, spread = features.mean(0), features.std(0) + 1e-6
    standardised = (features - mean) / spread
    n_classes = int(labels.max()) + 1 if n_classes is None else n_classes
    probe = nn.Linear(features.shape[1], n_classes)
    nn.init.zeros_(probe.weight), nn.init.zeros_(probe.bias)
    optimizer = torch.optim.LBFGS(
        probe.parameters(), max_iter=100, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = (
            F.cross_entropy(probe(standardised), labels)
            + l2 * probe.weight.pow(2).sum()
        )
        loss.backward()
        return loss

    with torch.enable_grad():  # a caller's evaluation may run under no_grad
        optimizer.step(closure)
    with torch.no_grad():
        # w . (x - mean) / spread + b = (w / spread) . x + (b - (w / spread) . mean)
        probe.weight /= spread
        probe.bias -= probe.weight @ mean
    return probe


def sentiment_probe(
    tokenizer, max_len: int, train_size: int = 1000, dev_size: int = 400
):
    """``probe(body) -> dev accuracy``: a linear probe on ``body``'s mean-pooled
    features of the first ``train_size`` training and ``dev_size`` dev sentences of the
    movie-review split, encoded once here. ``probe(body, verdicts=True)`` gives instead
    each dev sentence's (dev_size,) right-or-wrong flag, for a paired test of two bodies
    (``statistics.compare_over_seeds``)."""
    # here, not at the top: data pulls in the artifact downloader
    from minformers.support import data

    splits = data.movie_review_splits()
    texts = {
        name: [text for text, _ in splits[name][:size]]
        for name, size in (("train", train_size), ("dev", dev_size))
    }
    labels = {
        name: torch.tensor([label for _, label in splits[name][: len(texts[name])]])
        for name in texts
    }
    inputs = {name: encode_sentences(tokenizer, texts[name], max_len) for name in texts}

    def probe(body: nn.Module, verdicts: bool = False) -> float | torch.Tensor:
        vectors = {
            name: sentence_features(body, *inputs[name], pooling="mean")
            for name in inputs
        }
        if not verdicts:
            return linear_probe_accuracy(
                vectors["train"], labels["train"], vectors["dev"], labels["dev"]
            )
        return (
            linear_probe_predictions(vectors["train"], labels["train"], vectors["dev"])
            == labels["dev"]
        )

    return probe


def piece_shares(
    ids: torch.Tensor, attention_mask: torch.Tensor, vocab_size: int
) -> torch.Tensor:
    """(N, vocab_size): the share of each piece among a row's real tokens, a bag of
    pieces. A linear probe on these is a linear model on the mean of per-piece
    weights, blind to word order.

    >>> piece_shares(torch.tensor([[1, 2, 2, 0]]), torch.tensor([[1, 1, 1, 0]]), 3)
    tensor([[0.0000, 0.3333, 0.6667]])
    """
    mask = attention_mask.float()
    counts = torch.zeros(len(ids), vocab_size).scatter_add_(1, ids, mask)
    return counts / mask.sum(1, keepdim=True)
