import random, sys
sys.path.insert(0, "/tmp/w")
from dataclasses import dataclass
from sentence_world import SentenceWorld, SentencePair

@dataclass(frozen=True)
class ChainWorld(SentenceWorld):
    """hour tokens reused as links: sentence = [link_i] words [link_i+1]"""
    def _consecutive(self, rng):
        topic = rng.randrange(self.n_topics)
        links = rng.sample(range(self.n_hours), 3)
        def sent(a, b):
            return [self.hour_token(a)] + [self.topic_word(topic, rng.randrange(self.words_per_topic)) for _ in range(self.words)] + [self.hour_token(b)]
        return topic, 0, sent(links[0], links[1]), sent(links[1], links[2])
    def pair(self, task, rng):
        topic, _, first, second = self._consecutive(rng)
        is_next = rng.random() < 0.5
        if not is_next and task == "sop":
            first, second = second, first
        elif not is_next:
            other = rng.choice([t for t in range(self.n_topics) if t != topic])
            l = rng.sample(range(self.n_hours), 2)
            second = [self.hour_token(l[0])] + [self.topic_word(other, rng.randrange(self.words_per_topic)) for _ in range(self.words)] + [self.hour_token(l[1])]
        ids = [2, *first, 3, *second, 3]
        seg = [0] * (len(first) + 2) + [1] * (len(second) + 1)
        return SentencePair(ids, seg, int(is_next))
