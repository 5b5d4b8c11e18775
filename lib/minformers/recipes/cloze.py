"""Cloze probes: hide one word of a sentence behind [MASK] and read what a masked
language model knows from how it ranks the candidates for the gap (Petroni et al., 2019,
for facts; Goldberg, 2019, for agreement).

The probes (name facts, agreement), their ranking and their baselines are one page's
experiment, kept together to be read together.

The probes here are built from text, not written by hand, so that what they test is
known to occur in the training text, and how often:

- **names**: two-word names in which the first word settles the second, found by
  counting word pairs in the training text ("Tony" is followed by "Blair" in most of
  its occurrences); a sentence that names one becomes a probe with the second word
  masked, scored among the second words of all the names;
- **agreement**: a subject followed by is/are, was/were or has/have; the verb is
  masked, and the probe is passed when the model scores the form the sentence uses
  above the form of the other number.

Answers are single pieces of the vocabulary: a name whose second word WordPiece splits
is left out, so every probe has exactly one [MASK]. A candidate tied with the answer
counts as ranked above it, so a model that scores every candidate the same passes
nothing:

    >>> # (N, V): two probes, four pieces
    >>> logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 5.0, 1.0]])
    >>> # probe 1's answer 3 scores below 1; probe 2's answer 2 scores above 1 and 3
    >>> candidate_ranks(logits, torch.tensor([1, 2, 3]), torch.tensor([3, 2]))
    tensor([2, 1])
    >>> # a tie counts against the answer
    >>> candidate_ranks(logits, torch.tensor([[0, 2], [0, 2]]), torch.tensor([0, 0]))
    tensor([2, 2])
"""

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from minformers.bert import IGNORE_INDEX
from minformers.objectives import pad, split_sentences
from minformers.support import data
from minformers.support.arguments import require_size
from minformers.wordpiece import WordPieceTokenizer

# only for the annotation: the recipe module imports much more than this one needs
if TYPE_CHECKING:
    from minformers.recipes.news import NewsCorpus

# The agreement pairs: the singular form, then the plural one.
VERB_PAIRS = (("is", "are"), ("was", "were"), ("has", "have"))
OTHER_FORM = {form: other for pair in VERB_PAIRS for form, other in (pair, pair[::-1])}
# Where a subject meets its verb. The verb is the group "answer"; the first match in a
# sentence is used.
# a noun subject: "the economy is", "the figures are"
NOUN_SUBJECT = r"\b[Tt]he [a-z]+ (?P<answer>is|are|was|were|has|have)\b"
# a pronoun subject: "they have"
PRONOUN_SUBJECT = (
    r"\b(?:[Hh]e|[Ss]he|[Ii]t|[Tt]hey|[Ww]e) (?P<answer>is|are|was|were|has|have)\b"
)

# runs of letters, and every other non-space character alone
_WORDS = re.compile(r"[A-Za-z]+|[^\sA-Za-z]")


@dataclass(frozen=True)
class NameFact:
    """A two-word name that the training text settles: ``second`` follows ``first`` more
    often than anything else."""

    first: str  # "Tony", as written in the text
    second: str  # "Blair": the answer, a single piece of the vocabulary
    count: int  # times "Tony Blair" occurs in the training text
    # count / occurrences of "Tony": how surely the first word gives the second
    share: float


@dataclass(frozen=True)
class Probe:
    """One sentence with one [MASK], and the pieces the model must choose between."""

    family: str  # which kind of knowledge it tests: "names", "agreement_noun", ...
    # [CLS] ... [MASK] ... [SEP], at most the model's max_len
    input_ids: tuple[int, ...]
    position: int  # index of the [MASK] in input_ids
    answer: int  # id of the piece the sentence has there
    # distinct ids compared by the model's logits, the answer among them
    candidates: tuple[int, ...]
    sentence: str  # the sentence it was cut from, as written
    span: tuple[int, int]  # where the masked word is in sentence: sentence[start:end]

    def masked_sentence(self) -> str:
        """The sentence with [MASK] written in place of the word: what a tokenizer
        should turn into input_ids."""
        start, end = self.span
        return f"{self.sentence[:start]}[MASK]{self.sentence[end:]}"


def held_out_sentences(corpus: "NewsCorpus") -> list[str]:
    """Sentences of the BBC articles that ``corpus`` does not use (``news_corpus`` keeps
    every ``article_stride``-th distinct article), less any sentence that also occurs in
    its training text: text the model never trained on."""
    used = {article["text"] for article in corpus.articles}
    unused = dict.fromkeys(
        article["text"] for article in data.bbc_news() if article["text"] not in used
    )
    training = set(_sentences(corpus.train_text()))
    return [
        sentence
        for text in unused
        for sentence in _sentences(text)
        if sentence not in training
    ]


def _sentences(text: str) -> list[str]:
    return [
        sentence for line in text.splitlines() for sentence in split_sentences(line)
    ]


def name_facts(
    text: str,
    tokenizer: WordPieceTokenizer,
    min_count: int = 10,
    min_share: float = 0.5,
) -> list[NameFact]:
    """Capitalised word pairs "First Second" that occur at least ``min_count`` times in
    ``text`` and make up at least ``min_share`` of the occurrences of ``First`` (so
    Second is its most frequent follower), where Second is one piece of ``tokenizer``'s
    vocabulary; most frequent first.

    >>> specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocab = [*specials, "tony", "blair", "said", "."]
    >>> text = "Tony Blair said. Tony Blair said. Tony said."
    >>> name_facts(text, WordPieceTokenizer(vocab), min_count=2)
    [NameFact(first='Tony', second='Blair', count=2, share=0.6666666666666666)]
    """
    require_size("min_count", min_count)
    # below a half, another word could follow First more often
    if not 0.5 <= min_share <= 1.0:
        raise ValueError(f"min_share must be in [0.5, 1], got {min_share}")
    words = _WORDS.findall(text)
    pairs, singles = Counter(zip(words, words[1:], strict=False)), Counter(words)
    unknown = tokenizer.special_ids["unk"]
    facts = []
    for (first, second), count in pairs.items():
        capitalised = (
            first[0].isupper()
            and second[0].isupper()
            and first.isalpha()
            and second.isalpha()
        )
        if count < min_count or not capitalised or count / singles[first] < min_share:
            continue
        pieces = tokenizer.encode(second)
        if len(pieces) != 1 or pieces[0] == unknown:
            continue  # a multi-piece answer would need several [MASK]s
        facts.append(NameFact(first, second, count, count / singles[first]))
    return sorted(facts, key=lambda fact: (-fact.count, fact.first, fact.second))


def mask_span(
    tokenizer: WordPieceTokenizer,
    sentence: str,
    start: int,
    end: int,
    max_len: int,
) -> tuple[tuple[int, ...], int, int] | None:
    """``sentence`` as [CLS] ... [SEP] with the word ``sentence[start:end]`` replaced by
    [MASK], cut to ``max_len`` pieces around the mask; returns (input_ids, mask
    position, the word's id), or None if the word is not one piece. The span must start
    and end at word boundaries, so that the pieces around it are the sentence's own.

    >>> specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> tokenizer = WordPieceTokenizer([*specials, "it", "is", "late", "."])
    >>> mask_span(tokenizer, "It is late.", 3, 5, max_len=6)
    ((2, 5, 4, 7, 8, 3), 2, 6)
    >>> # room for two pieces: "it [MASK]"
    >>> mask_span(tokenizer, "It is late.", 3, 5, max_len=4)
    ((2, 5, 4, 3), 2, 6)
    """
    require_size("max_len", max_len, minimum=3)
    # a byte-level BPE spells a word with its space: cut elsewhere
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(
            f"tokenizer must be a WordPieceTokenizer, got {type(tokenizer).__name__}"
        )
    if not 0 <= start < end <= len(sentence):
        raise ValueError(
            f"start and end must satisfy 0 <= start < end <= {len(sentence)}, got "
            f"{start} and {end}"
        )
    word = tokenizer.encode(sentence[start:end])
    if len(word) != 1 or word[0] == tokenizer.special_ids["unk"]:
        return None
    before, after = tokenizer.encode(sentence[:start]), tokenizer.encode(sentence[end:])
    ids = [*before, tokenizer.special_ids["mask"], *after]
    room = max_len - 2  # [CLS] and [SEP]
    # the mask near the middle of the window
    first = max(0, min(len(before) - room // 2, len(ids) - room))
    kept = ids[first : first + room]
    return (
        (tokenizer.special_ids["cls"], *kept, tokenizer.special_ids["sep"]),
        len(before) - first + 1,
        word[0],
    )


def name_probes(
    facts: Sequence[NameFact],
    sentences: Sequence[str],
    tokenizer: WordPieceTokenizer,
    max_len: int,
    per_fact: int = 5,
    seed: int = 0,
) -> list[Probe]:
    """Up to ``per_fact`` of ``sentences`` for each fact that write "First Second", with
    Second masked; candidates are the distinct second words of all the facts. A sentence
    whose window holds the answer a second time is skipped, so the model cannot copy it.
    The sentences are drawn at random (seeded) from all that qualify."""
    require_size("per_fact", per_fact)
    # distinct, in order
    candidates = tuple(
        dict.fromkeys(tokenizer.encode(fact.second)[0] for fact in facts)
    )
    rng, probes = random.Random(seed), []
    for fact in facts:
        pattern = re.compile(
            rf"\b{re.escape(fact.first)} (?P<answer>{re.escape(fact.second)})\b"
        )
        found = []
        for sentence in sentences:
            match = (
                pattern.search(sentence)
                if f"{fact.first} {fact.second}" in sentence
                else None
            )
            cut = match and mask_span(
                tokenizer, sentence, *match.span("answer"), max_len
            )
            if cut and cut[0].count(cut[2]) == 0:
                found.append(
                    Probe(
                        "names",
                        cut[0],
                        cut[1],
                        cut[2],
                        candidates,
                        sentence,
                        match.span("answer"),
                    )
                )
        probes += rng.sample(found, min(per_fact, len(found)))
    return probes


def agreement_probes(
    sentences: Sequence[str],
    tokenizer: WordPieceTokenizer,
    max_len: int,
    pattern: str,
    family: str,
    per_form: int = 60,
    seed: int = 0,
) -> list[Probe]:
    """Subject-verb agreement probes: each sentence's first match of ``pattern`` (a
    regex whose group "answer" is one of is/are/was/were/has/have) gives a probe with
    that verb masked and two candidates, the verb and its other number. Balanced: for
    each pair (is/are, ...) as many singular as plural probes, up to ``per_form`` of
    each, drawn at random (seeded), so always choosing one form scores exactly one
    half."""
    require_size("per_form", per_form)
    regex = re.compile(pattern)
    if "answer" not in regex.groupindex:
        raise ValueError(
            f"pattern must have a group named 'answer' around the verb, got {pattern!r}"
        )
    by_form = defaultdict(list)
    for sentence in sentences:
        match = regex.search(sentence)
        if match is None:
            continue
        form = match.group("answer")
        if form not in OTHER_FORM:
            raise ValueError(
                f"pattern's group 'answer' must match one of {sorted(OTHER_FORM)}, "
                f"matched {form!r}"
            )
        cut = mask_span(tokenizer, sentence, *match.span("answer"), max_len)
        if cut:
            other = tokenizer.encode(OTHER_FORM[form])[0]
            by_form[form].append(
                Probe(
                    family,
                    cut[0],
                    cut[1],
                    cut[2],
                    (cut[2], other),
                    sentence,
                    match.span("answer"),
                )
            )
    rng, probes = random.Random(seed), []
    for singular, plural in VERB_PAIRS:
        count = min(len(by_form[singular]), len(by_form[plural]), per_form)
        probes += rng.sample(by_form[singular], count) + rng.sample(
            by_form[plural], count
        )
    return probes


def candidate_ranks(
    logits: torch.Tensor, candidate_ids: torch.Tensor, answer_ids: torch.Tensor
) -> torch.Tensor:
    """(N,): the rank of each answer among its candidates by logit, 1 = first choice.

    ``logits`` (N, V) at each probe's [MASK]; ``candidate_ids`` (K,), shared by all
    probes, or (N, K), distinct within a row and holding that row's answer;
    ``answer_ids`` (N,). A candidate tied with the answer counts as above it. Examples
    at the top of the module.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must be (N, V), got shape {tuple(logits.shape)}")
    n_probes, vocab_size = logits.shape
    answer_ids = torch.as_tensor(answer_ids)
    candidate_ids = torch.as_tensor(candidate_ids)
    if answer_ids.shape != (n_probes,):
        raise ValueError(
            f"answer_ids must be ({n_probes},), got shape {tuple(answer_ids.shape)}"
        )
    if candidate_ids.dim() == 1:
        candidate_ids = candidate_ids.expand(n_probes, -1)  # (K,) -> (N, K)
    if (
        candidate_ids.dim() != 2
        or candidate_ids.shape[0] != n_probes
        or candidate_ids.shape[1] == 0
    ):
        raise ValueError(
            f"candidate_ids must be (K,) or ({n_probes}, K) with K >= 1, got "
            f"{tuple(candidate_ids.shape)}"
        )
    if candidate_ids.min() < 0 or candidate_ids.max() >= vocab_size:
        raise ValueError(
            f"candidate_ids must be in [0, {vocab_size}), the logits' vocabulary"
        )
    if not (candidate_ids == answer_ids[:, None]).any(dim=1).all():
        raise ValueError("every answer must be among its row's candidate_ids")
    if (candidate_ids.sort(dim=1).values.diff(dim=1) == 0).any():
        raise ValueError("candidate_ids must be distinct within a row")
    scores = logits.gather(1, candidate_ids)  # (N, K)
    answer_scores = logits.gather(1, answer_ids[:, None])  # (N, 1)
    # the answer itself, and every candidate at least as high
    return (scores >= answer_scores).sum(dim=1)


def candidate_ranks_of(logits: torch.Tensor, probes: Sequence[Probe]) -> torch.Tensor:
    """``candidate_ranks`` for probes whose candidate sets may differ in size, (N,)."""
    ranks = torch.empty(len(probes), dtype=torch.long)
    by_size = defaultdict(list)
    for index, probe in enumerate(probes):
        by_size[len(probe.candidates)].append(index)
    for indices in by_size.values():
        # (n, K)
        candidates = torch.tensor([probes[index].candidates for index in indices])
        answers = torch.tensor([probes[index].answer for index in indices])
        ranks[indices] = candidate_ranks(logits[indices], candidates, answers)
    return ranks


@torch.no_grad()
def masked_logits(
    model: torch.nn.Module,
    probes: Sequence[Probe],
    pad_id: int,
    batch_size: int = 256,
) -> torch.Tensor:
    """A ``BertForPreTraining``'s logits at each probe's [MASK], (N, V). Passing the
    answers as MLM labels makes the model apply its MLM head at the masked positions
    only (row-major: one per probe), not at every position. Leaves the model in eval
    mode."""
    require_size("batch_size", batch_size)
    if not probes:
        raise ValueError("probes must be non-empty")
    model.eval()
    rows = []
    for start in range(0, len(probes), batch_size):
        chunk = probes[start : start + batch_size]
        # (B, T) each
        ids, attention_mask = pad([list(probe.input_ids) for probe in chunk], pad_id)
        labels = torch.full_like(ids, IGNORE_INDEX)
        labels[
            torch.arange(len(chunk)), torch.tensor([probe.position for probe in chunk])
        ] = torch.tensor([probe.answer for probe in chunk])
        # (B, V)
        rows.append(model(ids, None, attention_mask, mlm_labels=labels).mlm_logits)
    return torch.cat(rows)


def probe_metrics(logits: torch.Tensor, probes: Sequence[Probe]) -> dict[str, float]:
    """Per family: "accuracy_<family>", the share of probes whose answer ranks first
    among their candidates; and "favourite_<family>", the share answered with the
    model's most common answer among probes that share a candidate set. A model that
    ignores the sentence gives one answer to all of them: a favourite share of 1."""
    ranks = candidate_ranks_of(logits, probes)
    chosen = [
        probe.candidates[int(logits[index, list(probe.candidates)].argmax())]
        for index, probe in enumerate(probes)
    ]
    metrics = {}
    for family in dict.fromkeys(probe.family for probe in probes):
        members = [
            index for index, probe in enumerate(probes) if probe.family == family
        ]
        # candidate set -> how often each candidate was chosen
        groups = defaultdict(Counter)
        for index in members:
            groups[frozenset(probes[index].candidates)][chosen[index]] += 1
        metrics[f"accuracy_{family}"] = (ranks[members] == 1).float().mean().item()
        metrics[f"favourite_{family}"] = sum(
            max(group.values()) for group in groups.values()
        ) / len(members)
    return metrics


def frequency_baseline(probes: Sequence[Probe], counts: Counter) -> dict[str, float]:
    """Per family, the accuracy of always choosing the candidate most frequent in the
    training text (``counts``: id -> occurrences), ties counted against the answer as in
    ``candidate_ranks``: what knowing frequencies alone gets."""
    baseline = {}
    for family in dict.fromkeys(probe.family for probe in probes):
        members = [probe for probe in probes if probe.family == family]
        right = [
            all(
                counts[probe.answer] > counts[other]
                for other in probe.candidates
                if other != probe.answer
            )
            for probe in members
        ]
        baseline[family] = sum(right) / len(members)
    return baseline


def frequency_correlation(
    logits: torch.Tensor, counts: Counter, skip: Sequence[int] = ()
) -> float:
    """Pearson correlation, over the vocabulary (less the ids in ``skip``, such as
    special tokens), between the model's mean log-probability at the probes' masks and
    the log of each piece's count in the training text plus one: near 1 when the model
    predicts each piece about as often as the text uses it, whatever the context."""
    log_probs = logits.log_softmax(dim=-1).mean(dim=0)  # (V,)
    keep = torch.ones(logits.shape[1], dtype=torch.bool)
    keep[list(skip)] = False
    log_counts = torch.tensor(
        [math.log1p(counts[index]) for index in range(logits.shape[1])]
    )
    pair = torch.stack([log_probs[keep], log_counts[keep]])  # (2, V')
    return torch.corrcoef(pair)[0, 1].item()


def batch_sightings(
    batch_for_step: Callable[[int], object],
    steps: int,
    sequences: dict[str, Sequence[int]],
) -> tuple[dict[str, tuple[int, int]], Counter]:
    """What a run's batches showed the model: for each named id sequence (say "tony
    blair" -> its ids), the times it occurs in the batches' original text and the times
    its last piece was chosen for prediction there; and a Counter of every piece chosen
    for prediction (MLM label). ``batch_for_step(step)`` gives a batch with
    ``input_ids`` and ``mlm_labels``, as ``PretrainingRun.batches`` does."""
    require_size("steps", steps)
    # last id -> the sequences ending in it, so each position is looked up once
    by_last = defaultdict(list)
    for name, sequence in sequences.items():
        if not sequence:
            raise ValueError(f"sequences[{name!r}] is empty")
        by_last[sequence[-1]].append((name, list(sequence)))
    seen = {name: [0, 0] for name in sequences}
    predicted = Counter()
    for step in range(steps):
        batch = batch_for_step(step)
        labelled = batch.mlm_labels != IGNORE_INDEX  # (B, T)
        # (B, T): the text before masking
        original = torch.where(labelled, batch.mlm_labels, batch.input_ids)
        predicted.update(batch.mlm_labels[labelled].tolist())
        for row, chosen in zip(original.tolist(), labelled.tolist(), strict=True):
            for end, last in enumerate(row, start=1):
                for name, sequence in by_last.get(last, ()):
                    if row[max(0, end - len(sequence)) : end] == sequence:
                        seen[name][0] += 1
                        seen[name][1] += chosen[end - 1]
    return {name: (count, chosen) for name, (count, chosen) in seen.items()}, predicted
