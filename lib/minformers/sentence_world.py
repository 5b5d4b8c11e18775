"""A small world of documents built for the sentence tasks, where each cue NSP and SOP
could use is known and a tiny encoder learns in seconds.

A document has a topic and a chain of links, drawn at random for each document.
Sentence i reads ``[link i] w ... w [link i+1]``: the words are drawn from the topic's
own words, and each sentence ends with the link the next one begins with. So:

- whether two sentences share a topic shows only by reading both (each topic's words
  are equally common), and a sentence from another document almost never does;
- the order of two sentences of one document shows only across the pair: in order,
  A's last link is B's first; swapped, B's last link is A's first. A sentence alone
  says nothing, since every document draws its own links.

NSP's random second sentence differs from the first in topic, and shares no link;
SOP's swapped pair differs only in where the shared link sits. A model trained on NSP
can win by the topic alone and learn nothing about order; one trained on SOP must find
the shared link, which a random sentence does not have. That is the asymmetry of
ALBERT's Table 5 (Lan et al., 2020), built here so that it can be tested.

    >>> world = SentenceWorld(n_topics=2, words_per_topic=3, n_links=5, words=2)
    >>> world.vocab_size  # 5 specials, 5 links, 2 x 3 topic words
    16
    >>> pair = world.pairs("sop", 1, seed=0)[0]
    >>> pair.input_ids  # [CLS] link word word link [SEP] link word word link [SEP]
    [2, 5, 14, 15, 6, 3, 8, 14, 14, 5, 3]
    >>> pair.is_next  # B ends with the link A begins with (token 5): swapped
    0

``pairs`` returns ``objectives.SentencePair``s and ``special_ids`` and ``vocab_size``
are those of a tokenizer, so ``recipes.bert_pretraining.pretraining_batch`` pads and
masks them as it does real text.
"""

import random
from dataclasses import dataclass

from minformers.objectives import SentencePair
from minformers.support.arguments import require_size

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # the news corpus's ids
TASKS = ("nsp", "sop")


@dataclass(frozen=True)
class SentenceWorld:
    n_topics: int = 8
    words_per_topic: int = 8
    n_links: int = 16  # a pair draws five distinct ones (NSP's random B, two fresh)
    words: int = 6  # topic words in a sentence, between its two links

    def __post_init__(self):
        for name in ("n_topics", "words_per_topic", "words"):
            require_size(name, getattr(self, name))
        if self.n_topics < 2 or self.n_links < 5:
            raise ValueError(
                "NSP needs two topics and a random sentence two fresh links: "
                f"n_topics >= 2 and n_links >= 5, got {self.n_topics} and {self.n_links}"
            )

    @property
    def special_ids(self) -> dict[str, int]:
        return {name.strip("[]").lower(): i for i, name in enumerate(SPECIALS)}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + self.n_links + self.n_topics * self.words_per_topic

    def link_token(self, link: int) -> int:
        return len(SPECIALS) + link

    def topic_word(self, topic: int, word: int) -> int:
        return len(SPECIALS) + self.n_links + topic * self.words_per_topic + word

    def token_names(self, ids: list[int]) -> str:
        """``ids`` written out: specials by name, links as L0, L1, ..., and topic t's
        words as the t-th letter and the word's number (a0, a1, ..., b0, ...).

        >>> SentenceWorld(n_topics=2, words_per_topic=3, n_links=5, words=2).token_names(
        ...     [2, 5, 14, 15, 6, 3]
        ... )
        '[CLS] L0 b1 b2 L1 [SEP]'
        """
        first_word = self.topic_word(0, 0)

        def name(token: int) -> str:
            if token < len(SPECIALS):
                return SPECIALS[token]
            if token < first_word:
                return f"L{token - len(SPECIALS)}"
            topic, word = divmod(token - first_word, self.words_per_topic)
            return f"{chr(ord('a') + topic)}{word}"

        return " ".join(name(token) for token in ids)

    def sentence(
        self, topic: int, first: int, last: int, rng: random.Random
    ) -> list[int]:
        words = [
            self.topic_word(topic, rng.randrange(self.words_per_topic))
            for _ in range(self.words)
        ]
        return [self.link_token(first), *words, self.link_token(last)]

    def pair(self, task: str, rng: random.Random) -> SentencePair:
        """One labelled pair: half of them in order (is_next=1). The other half is, for
        NSP, A then a sentence of another document (another topic, links A does not
        use); for SOP, the two sentences swapped."""
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        topic = rng.randrange(self.n_topics)
        links = rng.sample(range(self.n_links), 5)
        first = self.sentence(topic, links[0], links[1], rng)
        second = self.sentence(topic, links[1], links[2], rng)
        is_next = rng.random() < 0.5
        if not is_next and task == "sop":
            first, second = second, first
        elif not is_next:  # nsp: its own topic, its own links
            other = rng.choice([t for t in range(self.n_topics) if t != topic])
            second = self.sentence(other, links[3], links[4], rng)
        cls_id, sep_id = self.special_ids["cls"], self.special_ids["sep"]
        input_ids = [cls_id, *first, sep_id, *second, sep_id]
        segment_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        return SentencePair(input_ids, segment_ids, int(is_next))

    def pairs(self, task: str, n: int, seed: int) -> list[SentencePair]:
        """``n`` pairs of ``task``, drawn by a generator seeded with ``seed``."""
        rng = random.Random(seed)
        return [self.pair(task, rng) for _ in range(n)]
