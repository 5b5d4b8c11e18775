"""Pretraining a tiny BERT on BBC news: one recipe that the BERT page runs and explains, and that the fine-tuning
page starts from.

    corpus = news_corpus()                      # NSP pairs and a 3,000-piece vocabulary, cached
    model, history = pretrain_tiny_bert(corpus)  # trained, or loaded from this build's checkpoint

A batch pads the pairs and masks them afresh:

    >>> tokenizer = WordPieceTokenizer([*SPECIALS, "news", "today", "rain"])
    >>> pair = SentencePair(input_ids=[2, 5, 3, 6, 7, 3], segment_ids=[0, 0, 0, 1, 1, 1], is_next=1)
    >>> batch = pretraining_batch(tokenizer, [pair] * 4, torch.Generator().manual_seed(0))
    >>> batch.input_ids.shape, batch.nsp_labels.tolist()  # is_next=1 becomes NSP label 0, as in BERT
    (torch.Size([4, 6]), [0, 0, 0, 0])
    >>> bool((batch.mlm_labels[:, [0, 2, 5]] == -100).all())  # [CLS] and [SEP] are never chosen
    True

The recipe is sized for one CPU core: 2 layers, 128 channels, a 3,000-piece vocabulary trained on the articles,
pairs of at most 32 pieces.
``pretrain_tiny_bert`` saves a checkpoint named by everything that shapes the run, so a second page of the same build
(or a second call) loads the model instead of training it again.
"""

import hashlib
import os
import random
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch

from minformers import data
from minformers.bert import IGNORE_INDEX, BertConfig, BertForPreTraining
from minformers.objectives import SentencePair, mask_tokens, pad, sentence_order_pairs, sentence_pairs, split_sentences
from minformers.train import History, TrainConfig, checkpoint_path, train
from minformers.validation import check_size
from minformers.wordpiece import WordPieceTokenizer, train_wordpiece

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # BERT's, with [PAD] = 0 as BertConfig.pad_id expects


@dataclass(frozen=True)
class NewsCorpus:
    tokenizer: WordPieceTokenizer  # the subset vocabulary; its ids are the model's
    articles: list[dict[str, str]]  # the BBC articles used, as data.bbc_news() gives them
    train_pairs: list[SentencePair]  # NSP pairs from 9 articles in 10
    validation_pairs: list[SentencePair]  # from every tenth article, never trained on
    max_len: int  # the longest pair, [CLS] and both [SEP] included


@lru_cache(maxsize=4)
def news_corpus(vocab_size: int = 3_000, max_len: int = 32, article_stride: int = 3) -> NewsCorpus:
    """NSP pairs from every ``article_stride``-th distinct BBC article, tokenized with a ``vocab_size``-piece WordPiece
    vocabulary trained on the training articles. Every tenth article is held out for validation.

    The vocabulary ranks merges by frequency, as HF's WordPieceTrainer does: on a corpus this small, the likelihood
    score would spend it on rare words and leave "the" in two pieces (see ``train_wordpiece``).
    Cached, so pages and calls with the same settings share one corpus.
    """
    check_size("vocab_size", vocab_size)
    check_size("max_len", max_len, minimum=5)
    check_size("article_stride", article_stride)
    unique: dict[str, dict[str, str]] = {}
    for article in data.bbc_news():  # 133 of the 2,225 texts occur twice; one copy could land in each split
        unique.setdefault(article["text"], article)
    articles = list(unique.values())[::article_stride]
    documents = [split_sentences(article["text"]) for article in articles]
    is_train = [index % 10 != 0 for index in range(len(documents))]
    train_text = "\n".join(article["text"] for article, keep in zip(articles, is_train, strict=True) if keep)
    tokenizer = _news_vocabulary(train_text, vocab_size)
    encoded = [[tokenizer.encode(sentence) for sentence in document] for document in documents]
    cls_id, sep_id = tokenizer.special_ids["cls"], tokenizer.special_ids["sep"]
    train_documents = [document for document, keep in zip(encoded, is_train, strict=True) if keep]
    validation_documents = [document for document, keep in zip(encoded, is_train, strict=True) if not keep]
    return NewsCorpus(
        tokenizer=tokenizer,
        articles=articles,
        train_pairs=sentence_pairs(train_documents, max_len, cls_id, sep_id, random.Random(0)),
        validation_pairs=sentence_pairs(validation_documents, max_len, cls_id, sep_id, random.Random(1)),
        max_len=max_len,
    )


def _news_vocabulary(train_text: str, vocab_size: int) -> WordPieceTokenizer:
    """Train the vocabulary, or read it from this build's checkpoints: training takes seconds, and both BERT pages
    need it."""
    settings = {"text": hashlib.sha256(train_text.encode()).hexdigest(), "vocab_size": vocab_size}
    path = checkpoint_path("news-wordpiece", settings, suffix=".txt")
    if not path.exists():
        vocab = train_wordpiece(train_text, vocab_size, SPECIALS, score="frequency")
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
        os.replace(partial, path)  # atomic, so a page running at the same time never reads half a file
    return WordPieceTokenizer.from_vocab_file(path)


@dataclass
class PretrainingBatch:
    input_ids: torch.Tensor  # (B, T), after masking
    segment_ids: torch.Tensor  # (B, T), 0 for [CLS] A [SEP], 1 for B [SEP], 0 on padding
    attention_mask: torch.Tensor  # (B, T), 1 on real tokens
    mlm_labels: torch.Tensor  # (B, T), the original id where a token was chosen for MLM, -100 elsewhere
    nsp_labels: torch.Tensor  # (B,), 0 = B follows A, 1 = B is random (BERT's and HF's convention)


def pretraining_batch(
    tokenizer: WordPieceTokenizer, pairs: list[SentencePair], generator: torch.Generator
) -> PretrainingBatch:
    """Pad the pairs and mask them afresh: a pair drawn twice gets two different masks (dynamic masking)."""
    pad_id = tokenizer.special_ids["pad"]
    input_ids, attention_mask = pad([pair.input_ids for pair in pairs], pad_id)
    segment_ids, _ = pad([pair.segment_ids for pair in pairs], 0, input_ids.shape[1])
    nsp_labels = torch.tensor([0 if pair.is_next else 1 for pair in pairs])
    special_ids = [tokenizer.vocab[token] for token in SPECIALS]
    masked, mlm_labels = mask_tokens(input_ids, tokenizer.vocab_size, tokenizer.special_ids["mask"], special_ids,
                                     generator=generator)
    return PretrainingBatch(masked, segment_ids, attention_mask, mlm_labels, nsp_labels)


def pretraining_losses(model: BertForPreTraining, batch: PretrainingBatch) -> dict[str, torch.Tensor]:
    """L = L_MLM + L_NSP, optimised as "loss"; the two parts and the accuracies are returned for the record."""
    output = model(batch.input_ids, batch.segment_ids, batch.attention_mask, mlm_labels=batch.mlm_labels,
                   nsp_labels=batch.nsp_labels)
    targets = batch.mlm_labels[batch.mlm_labels != IGNORE_INDEX]  # (N,), in the order of output.mlm_logits
    return {
        "loss": output.loss,
        "mlm_loss": output.mlm_loss,
        "nsp_loss": output.nsp_loss,
        "mlm_accuracy": (output.mlm_logits.argmax(-1) == targets).float().mean(),
        "nsp_accuracy": (output.nsp_logits.argmax(-1) == batch.nsp_labels).float().mean(),
    }


@dataclass(frozen=True)
class PretrainingRun:
    """What one pretraining run is: the model's shape, the schedule, the batch size and the validation set."""

    schedule: TrainConfig = TrainConfig(steps=360, lr=2e-3, warmup_steps=36, eval_every=90)
    batch_size: int = 16  # pairs per step, each freshly masked (for the same compute, 16 x 480 steps beat 32 x 240)
    validation_size: int = 256  # validation pairs, masked once with a fixed seed so every evaluation sees the same
    model_changes: tuple[tuple[str, object], ...] = ()  # BertConfig.tiny overrides, e.g. (("n_layers", 4),)
    sentence_task: str = "nsp"  # "nsp": next-sentence prediction (BERT); "sop": sentence-order prediction (ALBERT)

    def __post_init__(self):
        check_size("batch_size", self.batch_size)
        check_size("validation_size", self.validation_size)
        if self.sentence_task not in ("nsp", "sop"):
            raise ValueError(f"sentence_task must be 'nsp' or 'sop', got {self.sentence_task!r}")

    def pairs(self, pairs: list[SentencePair]) -> list[SentencePair]:
        """The corpus's NSP pairs, or (for "sop") the sentence-order pairs made from them, with a fixed seed."""
        return pairs if self.sentence_task == "nsp" else sentence_order_pairs(pairs, random.Random(0))

    def config(self, corpus: NewsCorpus) -> BertConfig:
        return BertConfig.tiny(vocab_size=corpus.tokenizer.vocab_size, max_len=corpus.max_len,
                               **dict(self.model_changes))


def pretrain_tiny_bert(corpus: NewsCorpus, run: PretrainingRun = PretrainingRun(),
                       progress: bool | None = None) -> tuple[BertForPreTraining, History]:
    """Pretrain ``BertConfig.tiny`` with MLM + NSP (or SOP, per ``run.sentence_task``) on ``corpus``; return the
    model (in eval mode) and its History.

    The batch for step s is drawn and masked with a generator seeded by s, so the run is reproducible and resumes
    exactly from its checkpoint. Training metrics are "loss", "mlm_loss", "nsp_loss", "mlm_accuracy" and
    "nsp_accuracy"; evaluation metrics are the same names prefixed with "val_".
    """
    config = run.config(corpus)
    train_pairs = run.pairs(corpus.train_pairs)
    validation = pretraining_batch(corpus.tokenizer, run.pairs(corpus.validation_pairs)[: run.validation_size],
                                   torch.Generator().manual_seed(12345))

    def batch_for_step(step: int) -> PretrainingBatch:
        generator = torch.Generator().manual_seed(step)
        chosen = torch.randint(len(train_pairs), (run.batch_size,), generator=generator).tolist()
        return pretraining_batch(corpus.tokenizer, [train_pairs[i] for i in chosen], generator)

    def evaluate(model: BertForPreTraining) -> dict[str, torch.Tensor]:
        return {f"val_{name}": value for name, value in pretraining_losses(model, validation).items()}

    torch.manual_seed(0)  # the initial weights: the same model whatever ran before in the session
    model = BertForPreTraining(config)
    settings = {"run": asdict(run), "config": asdict(config), "vocab": corpus.tokenizer.id_to_token,
                "articles": len(corpus.articles), "train_pairs": len(corpus.train_pairs)}
    history = train(model, batch_for_step, pretraining_losses, run.schedule, evaluate=evaluate,
                    checkpoint=checkpoint_path("bert-tiny-news", settings), progress=progress)
    return model.eval(), history
