"""MLM masking and NSP pairs: rates within binomial bounds, specials untouched, hand-checked examples, errors."""

import math
import random

import pytest
import torch

from minformers.objectives import (
    IGNORE_INDEX,
    SentencePair,
    mask_tokens,
    pad,
    sentence_order_pairs,
    sentence_pairs,
    shared_piece_baseline,
    split_sentences,
)

VOCAB, PAD, CLS, SEP, MASK = 1000, 0, 2, 3, 4
SPECIAL = [PAD, 1, CLS, SEP, MASK]


def within_binomial_bounds(successes: int, trials: int, p: float) -> bool:
    """True if successes/trials is inside the two-sided 99.9% normal-approximation interval of Binomial(n, p)."""
    spread = 3.29 * math.sqrt(p * (1 - p) / trials)
    return abs(successes / trials - p) <= spread


@pytest.fixture(scope="module")
def batch():
    """500 sequences of 256 tokens: [CLS] ... [SEP] and some padding, so 100k+ ordinary tokens."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, VOCAB, (500, 256), generator=generator)
    ids[:, 0], ids[:, -1] = CLS, SEP
    ids[::3, 200:] = PAD
    return ids


@pytest.mark.parametrize("p, split", [(0.15, (0.8, 0.1, 0.1)), (0.4, (0.5, 0.3, 0.2))])
def test_rates_fall_inside_binomial_bounds(batch, p, split):
    generator = torch.Generator().manual_seed(0)
    masked, labels = mask_tokens(batch, VOCAB, MASK, SPECIAL, p=p, split=split, generator=generator)
    ordinary = ~torch.isin(batch, torch.tensor(SPECIAL))
    chosen = labels != IGNORE_INDEX
    n_ordinary, n_chosen = ordinary.sum().item(), chosen.sum().item()
    assert n_ordinary > 100_000
    assert within_binomial_bounds(n_chosen, n_ordinary, p)
    became_mask = (chosen & (masked == MASK)).sum().item()
    kept = (chosen & (masked == batch)).sum().item()
    randomised = n_chosen - became_mask - kept
    # A random replacement can draw the original token (1 in 995); that lands in "kept", which the bound tolerates.
    assert within_binomial_bounds(became_mask, n_chosen, split[0])
    assert within_binomial_bounds(randomised, n_chosen, split[1] * (1 - 1 / 995))
    assert within_binomial_bounds(kept, n_chosen, split[2] + split[1] / 995)


def test_special_tokens_and_padding_are_never_chosen_or_inserted(batch):
    masked, labels = mask_tokens(batch, VOCAB, MASK, SPECIAL, p=0.5, generator=torch.Generator().manual_seed(2))
    special = torch.isin(batch, torch.tensor(SPECIAL))
    assert torch.equal(masked[special], batch[special])
    assert (labels[special] == IGNORE_INDEX).all()
    randomised = (labels != IGNORE_INDEX) & (masked != MASK) & (masked != batch)
    assert not torch.isin(masked[randomised], torch.tensor(SPECIAL)).any()


def test_labels_are_the_originals_at_chosen_positions_and_ignore_elsewhere(batch):
    masked, labels = mask_tokens(batch, VOCAB, MASK, SPECIAL, generator=torch.Generator().manual_seed(3))
    chosen = labels != IGNORE_INDEX
    assert torch.equal(labels[chosen], batch[chosen])
    assert torch.equal(masked[~chosen], batch[~chosen])


def test_dynamic_masks_differ_between_draws_and_a_seed_repeats_one(batch):
    first = mask_tokens(batch, VOCAB, MASK, SPECIAL, generator=torch.Generator().manual_seed(5))
    again = mask_tokens(batch, VOCAB, MASK, SPECIAL, generator=torch.Generator().manual_seed(5))
    other = mask_tokens(batch, VOCAB, MASK, SPECIAL, generator=torch.Generator().manual_seed(6))
    assert torch.equal(first[1], again[1]) and torch.equal(first[0], again[0])
    assert not torch.equal(first[1], other[1])


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"p": 0.0}, ValueError, r"p must be in \(0, 1\), got 0.0"),
        ({"p": 1.0}, ValueError, r"p must be in \(0, 1\)"),
        ({"split": (0.8, 0.1, 0.2)}, ValueError, "split must be three non-negative shares"),
        ({"mask_id": 7}, ValueError, "mask_id must be a special id"),
        ({"input_ids": torch.tensor([[2, 1000, 3]])}, ValueError, r"input_ids must lie in \[0, vocab_size=1000\)"),
        ({"input_ids": torch.tensor([[2.0, 9.0]])}, TypeError, "input_ids must be an integer tensor"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(arguments, error, message):
    call = {"input_ids": torch.tensor([[2, 9, 3]]), "vocab_size": VOCAB, "mask_id": MASK, "special_ids": SPECIAL}
    call.update(arguments)
    with pytest.raises(error, match=message):
        mask_tokens(**call)


def test_split_sentences_by_hand():
    text = 'He said "Go." Then he left. 42 people came! Did they? "Yes," she said.'
    expected = ['He said "Go."', "Then he left.", "42 people came!", "Did they?", '"Yes," she said.']
    assert split_sentences(text) == expected


def make_documents(n_documents=40, sentences=12):
    """Sentence k of document d is [1000 * d + k] repeated k % 4 + 1 times, so every sentence says where it is from."""
    return [[[1000 * d + k] * (k % 4 + 1) for k in range(sentences)] for d in range(n_documents)]


def origin(sentence):
    return divmod(sentence[0], 1000)


def test_pairs_are_balanced_and_each_label_is_true():
    documents = make_documents()
    cls, sep = -1, -2  # ids no sentence of make_documents() contains, so the boundaries are unambiguous
    pairs = sentence_pairs(documents, max_len=32, cls_id=cls, sep_id=sep, rng=random.Random(0))
    assert len(pairs) == 40 * 11
    assert within_binomial_bounds(sum(pair.is_next for pair in pairs), len(pairs), 0.5)
    for pair in pairs:
        boundary = pair.input_ids.index(sep)
        first, second = pair.input_ids[1:boundary], pair.input_ids[boundary + 1 : -1]
        (doc_a, k_a), (doc_b, k_b) = origin(first), origin(second)
        if pair.is_next:
            assert (doc_b, k_b) == (doc_a, k_a + 1)
        else:
            assert doc_b != doc_a
        assert pair.input_ids[0] == cls and pair.input_ids[-1] == sep
        assert pair.segment_ids == [0] * (len(first) + 2) + [1] * (len(second) + 1)


def test_truncation_trims_the_longer_segment_from_its_end():
    documents = [[list(range(100, 110)), list(range(200, 204))], [[300, 301]]]
    rng = random.Random(0)
    while True:  # draw until the first document's pair is the true continuation
        pairs = sentence_pairs(documents, max_len=12, cls_id=CLS, sep_id=SEP, rng=rng)
        if pairs[0].is_next:
            break
    # 12 - 3 = 9 slots: the 10-token A loses 5 tokens (then both are 5 and 4 long).
    assert pairs[0].input_ids == [CLS, 100, 101, 102, 103, 104, SEP, 200, 201, 202, 203, SEP]
    assert len(pairs[0].input_ids) <= 12


def test_pairs_need_two_documents_and_room():
    with pytest.raises(ValueError, match="at least two non-empty documents"):
        sentence_pairs([[[5], [6]]], max_len=16, cls_id=CLS, sep_id=SEP, rng=random.Random(0))
    with pytest.raises(ValueError, match="max_len must be >= 5"):
        sentence_pairs(make_documents(), max_len=4, cls_id=CLS, sep_id=SEP, rng=random.Random(0))


def test_pad_builds_ids_and_attention_mask():
    ids, attention = pad([[5, 6, 7], [8]], pad_id=PAD, length=4)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 0, 0, 0]]
    assert attention.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    with pytest.raises(ValueError, match="does not fit length=2"):
        pad([[1, 2, 3]], pad_id=PAD, length=2)


def test_sentence_order_pairs_swap_half_of_the_consecutive_pairs_and_keep_their_tokens():
    rng = random.Random(0)
    documents = [[[10 * d + s] * (s % 3 + 1) for s in range(6)] for d in range(1, 30)]
    nsp = sentence_pairs(documents, max_len=12, cls_id=2, sep_id=3, rng=rng)
    sop = sentence_order_pairs(nsp, random.Random(1))
    assert len(sop) == sum(pair.is_next for pair in nsp)  # random-sentence pairs are dropped
    assert within_binomial_bounds(sum(pair.is_next for pair in sop), len(sop), 0.5)
    originals = [pair for pair in nsp if pair.is_next]
    for original, pair in zip(originals, sop, strict=True):
        assert set(pair.input_ids) <= set(original.input_ids) and len(pair.segment_ids) == len(pair.input_ids)
        assert len(original.input_ids) - len(pair.input_ids) in (0, 1)  # at most one token trimmed
        boundary = pair.segment_ids.index(1)
        first, second = pair.input_ids[1 : boundary - 1], pair.input_ids[boundary:-1]
        # sentences of document d are 10 d + s: in order, the first segment's sentence index is the smaller
        assert (first[0] < second[0]) == bool(pair.is_next)


def test_sentence_order_is_not_given_away_by_segment_lengths():
    """Long pairs are trimmed from the longer segment, so in corpus order the first is never the longer one; after
    sentence_order_pairs, which segment is longer must say nothing about the label."""
    rng = random.Random(0)
    documents = [[[10 * d + s] * 20 for s in range(6)] for d in range(1, 40)]  # every pair needs trimming
    sop = sentence_order_pairs(sentence_pairs(documents, max_len=16, cls_id=2, sep_id=3, rng=rng), random.Random(1))
    first_longer = [pair.segment_ids.index(1) - 2 > len(pair.input_ids) - pair.segment_ids.index(1) - 1
                    for pair in sop]
    lengths_differ = [pair.segment_ids.index(1) - 2 != len(pair.input_ids) - pair.segment_ids.index(1) - 1
                      for pair in sop]
    assert not any(lengths_differ) and not any(first_longer)


def random_pairs(rng, count):
    """Pairs over a 12-piece vocabulary (ids 0 and 1 special), where a next pair tends to share more pieces."""
    pairs = []
    for _ in range(count):
        is_next = rng.random() < 0.5
        first = [rng.randrange(2, 12) for _ in range(rng.randrange(1, 6))]
        second = [rng.choice(first) if is_next and rng.random() < 0.5 else rng.randrange(2, 12)
                  for _ in range(rng.randrange(1, 6))]
        pairs.append(SentencePair([0, *first, 1, *second, 1], [0] * (len(first) + 2) + [1] * (len(second) + 1),
                                  int(is_next)))
    return pairs


def test_shared_piece_baseline_picks_the_threshold_a_search_over_every_score_would():
    rng = random.Random(3)
    train, held_out = random_pairs(rng, 300), random_pairs(rng, 200)
    frequency = {token: sum(token in pair.input_ids for pair in train) for token in range(2, 12)}

    def score(pair):  # written out again, slowly: idf over the training pairs of each piece both segments hold
        boundary = pair.segment_ids.index(1)
        shared = set(pair.input_ids[1 : boundary - 1]) & set(pair.input_ids[boundary:-1])
        return sum(math.log(len(train) / frequency[token]) for token in shared)

    def accuracy(pairs, threshold):
        return sum((score(pair) >= threshold) == bool(pair.is_next) for pair in pairs) / len(pairs)

    candidates = sorted({score(pair) for pair in train}) + [math.inf]
    best = max(candidates, key=lambda threshold: accuracy(train, threshold))  # the lowest of equally good ones
    expected = accuracy(held_out, best)
    assert expected > 0.6  # the cue is real in these pairs, so the test compares a threshold that matters
    assert shared_piece_baseline(train, held_out, special_ids=[0, 1]) == expected


def test_shared_piece_baseline_needs_pairs():
    with pytest.raises(ValueError, match="need training and held-out pairs, got 0 and 1"):
        shared_piece_baseline([], random_pairs(random.Random(0), 1), special_ids=[0, 1])
