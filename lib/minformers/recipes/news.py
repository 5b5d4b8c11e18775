"""The BBC news corpus that the encoder pages pretrain on: 2,225 articles from the
`bbc-news` data package, deduplicated, every tenth held out, cut into sentences and
tokenized with a vocabulary trained on the training articles (WordPiece, or the
byte-level BPE that RoBERTa uses).

    corpus = news_corpus()  # NSP pairs, documents of sentence ids, the tokenizer

The vocabularies and the tokenized corpus are cached in this build's checkpoints, and
the corpus per process too, so pages and calls with the same settings share one.

    >>> tokenizer = NewsByteBPE(*train_bpe("news news news", 265, SPECIALS))
    >>> ids = tokenizer.encode(" news")
    >>> tokenizer.special_ids["mask"], [tokenizer.id_to_token[i] for i in ids]
    (4, ['Ġnews'])
"""

import hashlib
import os
import random
from dataclasses import dataclass
from functools import lru_cache

import torch

from minformers.bpe import ByteBPETokenizer, train_bpe
from minformers.finetuning import encode_sentences
from minformers.objectives import SentencePair, sentence_pairs, split_sentences
from minformers.support import data
from minformers.support.arguments import require_size
from minformers.support.checkpoints import cached_in_build, checkpoint_path
from minformers.wordpiece import WordPieceTokenizer, train_wordpiece

# BERT's, with [PAD] = 0 as BertConfig.pad_id expects
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# what each of SPECIALS is called in WordPieceTokenizer.special_ids
ROLES = ("pad", "unk", "cls", "sep", "mask")


class NewsByteBPE(ByteBPETokenizer):
    """RoBERTa's kind of tokenizer: a byte-level BPE, with BERT's special tokens under
    the names the pretraining recipe looks them up by (``special_ids``,
    ``id_to_token``), so it can stand in for WordPiece. No text is unknown to it:
    ``[UNK]`` is kept only so that both vocabularies hold the same special tokens."""

    def __init__(self, vocab: dict[int, bytes], merges, special_tokens=SPECIALS):
        if tuple(special_tokens) != SPECIALS:
            raise ValueError(
                f"special_tokens must be {SPECIALS}, got {tuple(special_tokens)}"
            )
        super().__init__(vocab, merges, special_tokens)
        self.special_ids = {
            role: self._special_ids[token]
            for role, token in zip(ROLES, SPECIALS, strict=True)
        }
        # readable names for the ids, as GPT-2 and RoBERTa print them:
        # a space becomes "Ġ"
        self.id_to_token = [
            self.vocab[i].decode("utf-8", errors="replace").replace(" ", "Ġ")
            for i in range(self.vocab_size)
        ]


@dataclass(frozen=True)
class NewsCorpus:
    # trained on the training articles; its ids are the model's
    tokenizer: WordPieceTokenizer | NewsByteBPE
    # the BBC articles used, as data.bbc_news() gives them
    articles: list[dict[str, str]]
    train_pairs: list[SentencePair]  # NSP pairs from 9 articles in 10
    validation_pairs: list[SentencePair]  # from every tenth article, never trained on
    max_len: int  # the longest pair, [CLS] and both [SEP] included
    # the same 9 articles in 10: sentences of ids, for contiguous blocks
    train_documents: list[list[list[int]]]
    validation_documents: list[list[list[int]]]  # and every tenth

    def train_text(self) -> str:
        """The training articles' text, one per line: what the vocabulary was trained on
        (every tenth article, the validation split, left out)."""
        return "\n".join(
            article["text"]
            for index, article in enumerate(self.articles)
            if _is_train(index)
        )


def _is_train(index: int) -> bool:
    return index % 10 != 0  # every tenth article is held out for validation


@lru_cache(maxsize=4)
def news_corpus(
    vocab_size: int = 3_000,
    max_len: int = 32,
    article_stride: int = 3,
    tokenizer: str = "wordpiece",
) -> NewsCorpus:
    """NSP pairs from every ``article_stride``-th distinct BBC article, tokenized with a
    ``vocab_size``-piece WordPiece vocabulary trained on the training articles
    (``tokenizer="byte_bpe"``: a byte-level BPE of the same size, as RoBERTa uses).
    Every tenth article is held out for validation.

    The vocabulary ranks merges by frequency, as HF's WordPieceTrainer does: on a corpus
    this small, the likelihood score would spend it on rare words and leave "the" in two
    pieces (see ``train_wordpiece``). Cached, so pages and calls with the same settings
    share one corpus.
    """
    require_size("vocab_size", vocab_size)
    require_size("max_len", max_len, minimum=5)
    require_size("article_stride", article_stride)
    if tokenizer not in ("wordpiece", "byte_bpe"):
        raise ValueError(
            f"tokenizer must be 'wordpiece' or 'byte_bpe', got {tokenizer!r}"
        )
    settings = dict(
        vocab_size=vocab_size,
        max_len=max_len,
        article_stride=article_stride,
        tokenizer=tokenizer,
    )
    # tokenizing every sentence takes seconds, in each page and worker that asks
    return cached_in_build("news-corpus", settings, lambda: _news_corpus(**settings))


def distinct_articles() -> list[dict[str, str]]:
    """The BBC articles with each text once, in ``data.bbc_news()``'s order: 133 of the
    2,225 texts occur twice, and one copy could land in each split."""
    unique: dict[str, dict[str, str]] = {}
    for article in data.bbc_news():
        unique.setdefault(article["text"], article)
    return list(unique.values())


def _news_corpus(
    vocab_size: int, max_len: int, article_stride: int, tokenizer: str
) -> NewsCorpus:
    articles = distinct_articles()[::article_stride]
    documents = [split_sentences(article["text"]) for article in articles]
    is_train = [_is_train(index) for index in range(len(documents))]
    train_text = "\n".join(
        article["text"]
        for article, keep in zip(articles, is_train, strict=True)
        if keep
    )
    vocabulary = _news_vocabulary(train_text, vocab_size, tokenizer)
    # A byte-level BPE spells a word with the space before it (" word"), so every
    # sentence after a document's first starts with the space that separated it;
    # WordPiece drops whitespace, and gets the same ids either way.
    encoded = [
        [
            vocabulary.encode(sentence if index == 0 else " " + sentence)
            for index, sentence in enumerate(document)
        ]
        for document in documents
    ]
    cls_id, sep_id = vocabulary.special_ids["cls"], vocabulary.special_ids["sep"]
    train_documents = [
        document for document, keep in zip(encoded, is_train, strict=True) if keep
    ]
    validation_documents = [
        document for document, keep in zip(encoded, is_train, strict=True) if not keep
    ]
    return NewsCorpus(
        tokenizer=vocabulary,
        articles=articles,
        train_pairs=sentence_pairs(
            train_documents, max_len, cls_id, sep_id, random.Random(0)
        ),
        validation_pairs=sentence_pairs(
            validation_documents, max_len, cls_id, sep_id, random.Random(1)
        ),
        max_len=max_len,
        train_documents=train_documents,
        validation_documents=validation_documents,
    )


def _news_vocabulary(
    train_text: str, vocab_size: int, kind: str
) -> WordPieceTokenizer | NewsByteBPE:
    """Train the vocabulary, or read it from this build's checkpoints: training takes
    seconds, and several pages need it."""
    settings = {
        "text": hashlib.sha256(train_text.encode()).hexdigest(),
        "vocab_size": vocab_size,
    }
    path = checkpoint_path(
        f"news-{kind}", settings, suffix=".txt" if kind == "wordpiece" else ".json"
    )
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        if kind == "wordpiece":
            vocab = train_wordpiece(train_text, vocab_size, SPECIALS, score="frequency")
            partial.write_text(
                "".join(f"{token}\n" for token in vocab), encoding="utf-8"
            )
        else:
            NewsByteBPE(*train_bpe(train_text, vocab_size, SPECIALS)).save(partial)
        # atomic, so a page running at the same time never reads half a file
        os.replace(partial, path)
    if kind == "wordpiece":
        return WordPieceTokenizer.from_vocab_file(path)
    tokenizer = ByteBPETokenizer.load(path)
    return NewsByteBPE(tokenizer.vocab, tokenizer.merges)


@dataclass(frozen=True)
class TopicTask:
    """The topic of the BBC articles the shared encoder never read: every distinct
    article that ``news_corpus()`` skipped (it keeps every third), read as its first
    ``max_len`` tokens and labelled with one of five topics. Split once, at random: a
    pool that labels are drawn from, a selection split on which a recipe is chosen,
    and a scoring split that only the final comparisons read."""

    topics: list[str]
    ids: torch.Tensor  # (N, T): [CLS], the article's first pieces, [SEP], padding
    mask: torch.Tensor  # (N, T): 1 on real tokens
    labels: torch.Tensor  # (N,) the index of each article's topic
    pool: list[list[int]]  # for each topic, the rows its labels are drawn from
    selection: torch.Tensor  # rows for choosing a recipe
    scoring: torch.Tensor  # rows the comparisons are scored on

    def labelled(self, per_topic: int, seed: int) -> torch.Tensor:
        """Rows of ``per_topic`` pool articles of each topic, drawn by ``seed``."""
        smallest = min(map(len, self.pool))
        if not 1 <= per_topic <= smallest:
            raise ValueError(
                f"per_topic must be 1 to {smallest} (the pool's smallest topic), "
                f"got {per_topic}"
            )
        draw = random.Random(seed)
        return torch.tensor(
            [row for rows in self.pool for row in draw.sample(rows, per_topic)]
        )

    def inputs(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.ids[rows], self.mask[rows]


@lru_cache(maxsize=1)
def topic_task(selection_size: int = 200, scoring_size: int = 600) -> TopicTask:
    """``TopicTask`` for the shared encoder's corpus, ``news_corpus()``: its tokenizer
    and length, and the articles it skipped."""
    corpus = news_corpus()
    read = {article["text"] for article in corpus.articles}
    unseen = [article for article in distinct_articles() if article["text"] not in read]
    random.Random(0).shuffle(unseen)
    topics = sorted({article["topic"] for article in unseen})
    ids, mask = encode_sentences(
        corpus.tokenizer, [article["text"] for article in unseen], corpus.max_len
    )
    labels = torch.tensor([topics.index(article["topic"]) for article in unseen])
    first_pool_row = selection_size + scoring_size
    return TopicTask(
        topics=topics,
        ids=ids,
        mask=mask,
        labels=labels,
        pool=[
            [row for row in range(first_pool_row, len(unseen)) if labels[row] == topic]
            for topic in range(len(topics))
        ],
        selection=torch.arange(scoring_size, first_pool_row),
        scoring=torch.arange(scoring_size),
    )
