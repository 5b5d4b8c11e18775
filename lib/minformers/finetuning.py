"""Sentence classification with an encoder: encode sentences for BERT, fit a classifier (a fine-tuned BERT or a
linear probe on frozen features) with the course's training loop, and read off accuracy on held-out sentences.

    >>> from minformers.wordpiece import WordPieceTokenizer
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"])
    >>> ids, attention_mask = encode_sentences(tokenizer, ["a b c a b c", "b"], max_len=5)
    >>> ids  # [CLS] a b c [SEP]: the pieces are cut, the closing [SEP] is kept
    tensor([[2, 5, 6, 7, 3],
            [2, 6, 3, 0, 0]])
"""

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from minformers.objectives import pad
from minformers.similarity import mean_pool
from minformers.train import History, TrainConfig, train
from minformers.validation import check_size


def encode_sentences(tokenizer, texts: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] pieces [SEP]`` for each text, at most ``max_len`` tokens (pieces past ``max_len - 2`` are dropped),
    right-padded to the longest: (ids, attention_mask), each (N, T) with T <= max_len."""
    check_size("max_len", max_len, minimum=3)
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    special = tokenizer.special_ids
    rows = [[special["cls"], *tokenizer.encode(text)[: max_len - 2], special["sep"]] for text in texts]
    return pad(rows, special["pad"])


@torch.no_grad()
def sentence_features(body: nn.Module, ids: torch.Tensor, attention_mask: torch.Tensor, pooling: str = "cls",
                      batch_size: int = 128) -> torch.Tensor:
    """A frozen encoder's vector for each sentence, (N, C): ``"cls"`` is BERT's pooled [CLS] output (what its
    classifier reads), ``"mean"`` the average of the last hidden states over real tokens (what sentence-transformers
    models such as MiniLM are trained to give). Computed once, so a probe trains on fixed features.

    Rows are sorted by length and each batch is cut to its longest row, which skips most of the padding; so rows
    must be right-padded, as ``encode_sentences`` pads them. The result depends on ``batch_size`` only by float
    rounding.
    """
    if pooling not in ("cls", "mean"):
        raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
    if ids.shape != attention_mask.shape or not bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all()):
        raise ValueError("ids and attention_mask must be (N, T), right-padded: each mask row is 1s, then 0s")
    body = getattr(body, "bert", body).eval()
    features = None
    lengths = attention_mask.sum(dim=1)
    order = torch.argsort(lengths, stable=True)  # similar lengths together: each batch is cut to its longest row
    for start in range(0, len(ids), batch_size):
        rows = order[start : start + batch_size]
        width = int(lengths[rows].max())  # right padding: every real token of these rows lies before `width`
        batch_ids, batch_mask = ids[rows, :width], attention_mask[rows, :width]
        output = body(batch_ids, attention_mask=batch_mask)
        vectors = output.pooled if pooling == "cls" else mean_pool(output.hidden_states, batch_mask)
        if features is None:
            features = vectors.new_empty(len(ids), vectors.shape[1])
        features[rows] = vectors  # back in the callers' order
    return features


def _logits(output) -> torch.Tensor:
    return getattr(output, "logits", output)  # BertForSequenceClassification's output, or a plain nn.Linear's


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return (logits.argmax(-1) == labels).float().mean()


def fit_classifier(model: nn.Module, train_inputs: tuple[torch.Tensor, ...], train_labels: torch.Tensor,
                   dev_inputs: tuple[torch.Tensor, ...], dev_labels: torch.Tensor, schedule: TrainConfig,
                   batch_size: int = 32, progress: bool | None = None, lm_weight: float = 0.0) -> History:
    """Train ``model`` so that ``model(*inputs)`` (logits, or an output with ``.logits``) predicts the labels.

    Each step draws ``batch_size`` training rows at random, seeded by the step; the dev set is scored whole at every
    evaluation ("dev_loss", "dev_accuracy"). The same loop fits a whole BERT (inputs: ids and attention mask) and a
    linear probe (inputs: features), so their curves compare like for like.

    An output that also has ``.lm_loss`` (a ``gpt_classifier.GPTClassifier``'s) is trained on GPT-1's
    L3 = L2 + lm_weight * L1, where L2 is the classes' cross-entropy and L1 that language-modelling loss; both are
    logged on every batch ("classifier_loss", "lm_loss") and on the dev set ("dev_lm_loss"), whatever the weight.
    """
    check_size("batch_size", batch_size)
    if not lm_weight >= 0:
        raise ValueError(f"lm_weight must be >= 0, got {lm_weight}")
    if any(len(x) != len(train_labels) for x in train_inputs) or any(len(x) != len(dev_labels) for x in dev_inputs):
        raise ValueError("every input tensor must have one row per label")

    def batch_for_step(step: int):
        rows = torch.randint(len(train_labels), (batch_size,), generator=torch.Generator().manual_seed(step))
        return tuple(x[rows] for x in train_inputs), train_labels[rows]

    def loss_for_batch(model: nn.Module, batch) -> dict[str, torch.Tensor]:
        inputs, labels = batch
        output = model(*inputs)
        logits = _logits(output)
        classifier_loss = F.cross_entropy(logits, labels)
        if not hasattr(output, "lm_loss"):
            if lm_weight:
                raise ValueError("lm_weight needs a model whose output has .lm_loss, such as a GPTClassifier")
            return {"loss": classifier_loss, "accuracy": accuracy(logits, labels)}
        loss = classifier_loss + lm_weight * output.lm_loss if lm_weight else classifier_loss  # 0: no L1 backward
        return {"loss": loss, "classifier_loss": classifier_loss,
                "lm_loss": output.lm_loss, "accuracy": accuracy(logits, labels)}

    def evaluate(model: nn.Module) -> dict[str, torch.Tensor]:
        output = model(*dev_inputs)
        logits = _logits(output)
        scores = {"dev_loss": F.cross_entropy(logits, dev_labels), "dev_accuracy": accuracy(logits, dev_labels)}
        return scores | ({"dev_lm_loss": output.lm_loss} if hasattr(output, "lm_loss") else {})

    return train(model, batch_for_step, loss_for_batch, schedule, evaluate=evaluate, progress=progress)


def count_trainable(model: nn.Module) -> int:
    """Parameters that receive gradients: for a linear probe, only the classifier's."""
    return sum(parameter.numel() for parameter in model.parameters() if parameter.requires_grad)


def predict(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Class ids, (N,), with the model in eval mode and no gradients."""
    model.eval()
    with torch.no_grad():
        return _logits(model(*inputs)).argmax(-1)
