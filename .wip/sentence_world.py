"""A small world of documents built for the sentence tasks, where each cue NSP and SOP
could use is known and a tiny encoder learns in seconds.

A document has a topic and runs a clock. Sentence i of a document that starts at hour c
reads ``[hour (c + i) mod n_hours] w w ... w``: an hour token, then words drawn from
the topic's own words. The hours wrap around, so no hour is always first or last:

- whether two sentences share a topic shows only by reading both (each topic's words
  are equally common), and a sentence from another document almost never does;
- the order of two sentences of one document shows only in their hours (a document
  starts at a random hour), and nowhere else: their words are drawn alike.

NSP's random second sentence differs from the first in topic, and in hour by chance;
SOP's swapped pair differs only in order. A model trained on NSP can win by the topic
alone and learn nothing about order; one trained on SOP must compare the hours, which
also rejects most random sentences, whose hour is rarely the next one. That is the
asymmetry ALBERT's Table 5 reports (Lan et al., 2020), built here so that it can show.

    >>> world = SentenceWorld(n_topics=2, words_per_topic=3, n_hours=4, words=2)
    >>> world.vocab_size  # 5 specials, 4 hours, 2 x 3 topic words
    15
    >>> pair = world.pairs("sop", 1, seed=0)[0]
    >>> pair.input_ids  # [CLS] hour word word [SEP] hour word word [SEP]
    [2, 8, 12, 13, 3, 5, 14, 13, 3]
    >>> pair.is_next  # hours 3 then 0: in order (the clock wraps)
    1

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
    n_hours: int = 8  # hours on the clock: n_hours - 1 is followed by 0
    words: int = 4  # topic words in a sentence, after its hour

    def __post_init__(self):
        for name in ("n_topics", "words_per_topic", "words"):
            require_size(name, getattr(self, name))
        if self.n_hours < 3:
            raise ValueError(f"n_hours must be at least 3, got {self.n_hours}")

    @property
    def special_ids(self) -> dict[str, int]:
        return {name.strip("[]").lower(): i for i, name in enumerate(SPECIALS)}

    @property
    def vocab_size(self) -> int:
        return len(SPECIALS) + self.n_hours + self.n_topics * self.words_per_topic

    def hour_token(self, hour: int) -> int:
        return len(SPECIALS) + hour % self.n_hours

    def topic_word(self, topic: int, word: int) -> int:
        return len(SPECIALS) + self.n_hours + topic * self.words_per_topic + word

    def sentence(self, topic: int, hour: int, rng: random.Random) -> list[int]:
        words = [rng.randrange(self.words_per_topic) for _ in range(self.words)]
        return [self.hour_token(hour)] + [self.topic_word(topic, w) for w in words]

    def _consecutive(self, rng: random.Random) -> tuple[int, int, list[int], list[int]]:
        """A document's topic, first hour, and two consecutive sentences of it."""
        topic, hour = rng.randrange(self.n_topics), rng.randrange(self.n_hours)
        return (
            topic,
            hour,
            self.sentence(topic, hour, rng),
            self.sentence(topic, hour + 1, rng),
        )

    def pair(self, task: str, rng: random.Random) -> SentencePair:
        """One labelled pair: half of them in order (is_next=1). The other half is, for
        NSP, A then a sentence of another document (another topic, a random hour); for
        SOP, the two sentences swapped."""
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        topic, _, first, second = self._consecutive(rng)
        is_next = rng.random() < 0.5
        if not is_next and task == "sop":
            first, second = second, first
        elif not is_next:  # nsp
            other = rng.choice([t for t in range(self.n_topics) if t != topic])
            second = self.sentence(other, rng.randrange(self.n_hours), rng)
        cls_id, sep_id = self.special_ids["cls"], self.special_ids["sep"]
        input_ids = [cls_id, *first, sep_id, *second, sep_id]
        segment_ids = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        return SentencePair(input_ids, segment_ids, int(is_next))

    def pairs(self, task: str, n: int, seed: int) -> list[SentencePair]:
        """``n`` pairs of ``task``, drawn by a generator seeded with ``seed``."""
        rng = random.Random(seed)
        return [self.pair(task, rng) for _ in range(n)]
