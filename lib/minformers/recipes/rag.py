"""Retrieval-augmented generation on BBC news: a library of passages, questions made
from it, and a small instruction-tuned decoder (SmolLM2-135M) answering them with or
without a retrieved passage.

Questions are made by rule, so that each has a known answer in a known passage: take a
sentence of a passage that holds a number (not a year), blank out its digits, and keep
the words around the blank.

    >>> passages = split_passages(
    ...     "Sales rose 5% to $11bn in 2004. Profits fell. "
    ...     "The firm has 300 staff in Leeds and Hull.",
    ...     max_words=9,
    ... )
    >>> passages
    ['Sales rose 5% to $11bn in 2004. Profits fell.', 'The firm has 300 staff in Leeds and Hull.']
    >>> question = fact_questions(passages, seed=0, window=3, min_words=6)[0]
    >>> # the digits are blanked; the unit stays
    >>> question.text, question.answer, question.passage
    ('rose 5% to $____bn in 2004.', '11', 0)
    >>> (
    ...     exact_match(" 11.", "11"),
    ...     exact_match("it was $11bn", "11"),
    ...     exact_match(" 1 1", "11"),
    ... )
    (True, True, False)
"""

import random
import re
from dataclasses import dataclass

import torch

from minformers.bpe import ByteBPETokenizer, gpt2_token_bytes
from minformers.generation import generate
from minformers.objectives import split_sentences
from minformers.support import data
from minformers.support.arguments import require_size

BLANK = "____"
# A number as news prose writes it: an optional currency sign, the digits (with . or ,
# inside: group "value"), an optional % or bn/m/k (billions, millions, thousands); not
# part of a longer word or number.
NUMBER = re.compile(
    r"(?<![\w£$€.,])[£$€]?(?P<value>\d+(?:[.,]\d+)*)(?:%|bn|m|k)?(?![\w%])"
)
_YEAR = re.compile(r"(1[89]|20)\d\d")


def unique_articles() -> list[dict[str, str]]:
    """The BBC articles of ``data.bbc_news()`` with repeated texts dropped (133 occur
    twice), in the same order."""
    unique: dict[str, dict[str, str]] = {}
    for article in data.bbc_news():
        unique.setdefault(article["text"], article)
    return list(unique.values())


def pick_articles(
    articles: list, library_size: int, training_size: int
) -> tuple[list, list]:
    """Two disjoint samples of ``articles``, each spread evenly over the list
    (``data.bbc_news`` sorts it by topic, so both cover every topic): the library to
    search, and the articles whose questions may be trained on.

    >>> pick_articles(list(range(10)), library_size=2, training_size=3)
    ([0, 4], [2, 6, 8])
    """
    require_size("library_size", library_size)
    require_size("training_size", training_size, minimum=0)
    total = library_size + training_size
    if total > len(articles):
        raise ValueError(
            f"library_size + training_size must be <= {len(articles)} articles, got "
            f"{total}"
        )
    # distinct: total <= len
    spread = [articles[index * len(articles) // total] for index in range(total)]
    library_slots = {slot * total // library_size for slot in range(library_size)}
    return (
        [spread[i] for i in sorted(library_slots)],
        [spread[i] for i in range(total) if i not in library_slots],
    )


def split_passages(text: str, max_words: int = 60) -> list[str]:
    """Consecutive whole sentences of ``text``, grouped into passages of at most
    ``max_words`` words (a single longer sentence is a passage of its own). Example at
    the top of the module."""
    require_size("max_words", max_words)
    passages, current, length = [], [], 0
    for sentence in split_sentences(text):
        words = len(sentence.split())
        if current and length + words > max_words:
            passages.append(" ".join(current))
            current, length = [], 0
        current.append(sentence)
        length += words
    if current:
        passages.append(" ".join(current))
    return passages


@dataclass(frozen=True)
class Library:
    passages: list[str]  # every passage of every article, article by article
    article_of: list[int]  # the article each passage comes from (an index into titles)
    titles: list[str]  # each article's headline
    # each article's first passage (its opening, which a headline usually sums up)
    first_passage: list[int]


def build_library(articles: list[dict[str, str]], max_words: int = 60) -> Library:
    """Split each article (a ``data.bbc_news()`` dict) into passages."""
    if not articles:
        raise ValueError("articles must not be empty")
    passages, article_of, first_passage = [], [], []
    for index, article in enumerate(articles):
        first_passage.append(len(passages))
        for passage in split_passages(article["text"], max_words):
            passages.append(passage)
            article_of.append(index)
    return Library(
        passages, article_of, [article["title"] for article in articles], first_passage
    )


@dataclass(frozen=True)
class Question:
    # the words around the blank: what the retrievers and the reader are given
    text: str
    # the blanked digits as the passage writes them, e.g. "11.1" of "$11.1bn" (the unit
    # stays in text)
    answer: str
    sentence: str  # the whole sentence it was made from
    passage: int  # the passage it was made from


def fact_questions(
    passages: list[str], seed: int = 0, window: int = 5, min_words: int = 8
) -> list[Question]:
    """At most one question per passage: among the passage's sentences of at least
    ``min_words`` words, pick (with a generator seeded by ``seed``) one number that is
    not a year and whose digits no other number of the sentence shares; blank out its
    digits (a currency sign or unit stays) and keep ``window`` words on each side of the
    blank. Passages without such a number give none."""
    require_size("window", window)
    require_size("min_words", min_words)
    draw = random.Random(seed)
    questions = []
    for index, passage in enumerate(passages):
        options = []
        for sentence in split_sentences(passage):
            if len(sentence.split()) < min_words:
                continue
            numbers = list(NUMBER.finditer(sentence))
            values = [number["value"] for number in numbers]
            options += [
                (sentence, number)
                for number in numbers
                if not _YEAR.fullmatch(number.group())
                and values.count(number["value"]) == 1
            ]
        if not options:
            continue
        sentence, number = draw.choice(options)
        start, end = number.span("value")
        words = (sentence[:start] + BLANK + sentence[end:]).split()
        at = next(position for position, word in enumerate(words) if BLANK in word)
        text = " ".join(words[max(0, at - window) : at + window + 1])
        questions.append(Question(text, number["value"], sentence, index))
    return questions


def relevant_passages(questions: list[Question], passages: list[str]) -> list[set[int]]:
    """Per question, every passage that holds its whole sentence (its own passage, and
    any copy elsewhere)."""
    return [
        {
            index
            for index, passage in enumerate(passages)
            if question.sentence in passage
        }
        | {question.passage}
        for question in questions
    ]


def normalise_number(text: str) -> str:
    """The digits of the first number in ``text``, without thousands commas ("" if there
    is none): "$1,200m" -> "1200"."""
    found = NUMBER.search(text)
    return "" if found is None else found["value"].replace(",", "")


def exact_match(reply: str, answer: str) -> bool:
    """Does the first number in ``reply`` have the answer's digits (a currency sign,
    unit or thousands commas aside)? A reply without a number is wrong."""
    return normalise_number(reply) != "" and normalise_number(
        reply
    ) == normalise_number(answer)


# The reader: SmolLM2-135M-Instruct, from its GGUF file, in our LlamaForCausalLM.


def gguf_tokenizer(gguf_file) -> ByteBPETokenizer:
    """The byte-level BPE stored in a GGUF file (read by ``gguf_file.read_gguf``), with
    the file's ids.

    GGUF spells ordinary tokens as GPT-2's vocab files do ("Ġ" for a space) and stores
    special tokens such as "<|im_start|>" as they are written. SmolLM2's vocabulary
    lacks 21 single bytes (control characters and bytes that never occur in UTF-8); they
    get ids past the model's vocabulary, so a text holding one is rejected by the model
    rather than silently mis-encoded.
    """
    metadata = gguf_file.metadata
    tokens = metadata["tokenizer.ggml.tokens"]
    # 1 = normal; others (3 = control) are special tokens
    kinds = metadata["tokenizer.ggml.token_type"]
    vocab = {
        index: gpt2_token_bytes(token) if kind == 1 else token.encode("utf-8")
        for index, (token, kind) in enumerate(zip(tokens, kinds, strict=True))
    }
    present = set(vocab.values())
    for byte in range(256):
        if bytes([byte]) not in present:
            vocab[len(vocab)] = bytes([byte])
    merges = [
        tuple(gpt2_token_bytes(part) for part in merge.split(" "))
        for merge in metadata["tokenizer.ggml.merges"]
    ]
    special = [token for token, kind in zip(tokens, kinds, strict=True) if kind != 1]
    return ByteBPETokenizer(vocab, merges, special_tokens=special)


def load_smollm2():
    """(model, tokenizer): SmolLM2-135M-Instruct in our ``LlamaForCausalLM`` (eval mode)
    and its tokenizer, read from the pinned GGUF file in one pass."""
    from minformers.convert.gguf_file import read_gguf
    from minformers.convert.llama import load_gguf_llama

    path = data.smollm2_gguf()
    gguf_file = read_gguf(path)
    return load_gguf_llama(path, gguf_file).eval(), gguf_tokenizer(gguf_file)


# the chat template's default
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def reply_start(question: str) -> str:
    """The question's words before the blank: the reply starts with them, so that the
    model only has to carry on copying (or, without the passage, guessing); "The missing
    number is " when the blank comes first.

    >>> reply_start("profits rose ____% to $284m"), reply_start("____ people came")
    ('profits rose ', 'The missing number is ')
    """
    before = question.split(BLANK)[0]
    return before if before.strip() else "The missing number is "


def reader_prompt(
    question: str, passage: str | None = None, start: str | None = None
) -> str:
    """SmolLM2's chat format: a user turn asking to fill the blank (after the passage,
    if any), and the start of the assistant's reply (``start``, by default
    ``reply_start(question)``)."""
    user = (
        f"Passage: {passage}\n" if passage is not None else ""
    ) + f"Fill in the blank: {question}"
    start = reply_start(question) if start is None else start
    return f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n{start}"


def read_answer(
    model,
    tokenizer: ByteBPETokenizer,
    question: str,
    passage: str | None = None,
    start: str | None = None,
    max_new_tokens: int = 8,
) -> str:
    """The model's greedy continuation of ``reader_prompt`` (after the reply's given
    start), cut at its end-of-turn token."""
    prompt = torch.tensor([tokenizer.encode(reader_prompt(question, passage, start))])
    tokens = generate(model, prompt, max_new_tokens=max_new_tokens, temperature=0.0)
    return tokenizer.decode(tokens[0, prompt.shape[1] :].tolist()).split("<|im_end|>")[
        0
    ]
