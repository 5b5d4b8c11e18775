"""Skip-gram with negative sampling: the loss by hand and by autograd, pairs inside the window, negatives drawn
∝ count^0.75, subsampling, and a two-topic corpus that training must separate."""

import math
import random

import pytest
import torch
import torch.nn.functional as F

from minformers import word2vec
from minformers.similarity import cosine_matrix
from minformers.train import TrainConfig, train


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_loss_equals_a_hand_computed_value():
    center = torch.tensor([[1.0, 0.0]])  # v_c
    context = torch.tensor([[2.0, 1.0]])  # u_o: score 2
    negatives = torch.tensor([[[-1.0, 3.0], [0.5, 0.0]]])  # scores -1 and 0.5
    expected = -math.log(sigmoid(2.0)) - math.log(sigmoid(1.0)) - math.log(sigmoid(-0.5))
    assert word2vec.sgns_loss(center, context, negatives).item() == pytest.approx(expected, rel=1e-6)


def test_loss_is_the_batch_mean_of_binary_cross_entropies():
    torch.manual_seed(0)
    center, context, negatives = torch.randn(6, 5), torch.randn(6, 5), torch.randn(6, 3, 5)
    positive = F.binary_cross_entropy_with_logits((center * context).sum(-1), torch.ones(6), reduction="none")
    scores = torch.bmm(negatives, center[:, :, None])[..., 0]  # (6, 3, 5) @ (6, 5, 1) -> (6, 3)
    negative = F.binary_cross_entropy_with_logits(scores, torch.zeros(6, 3), reduction="none").sum(-1)
    torch.testing.assert_close(word2vec.sgns_loss(center, context, negatives), (positive + negative).mean())


def test_gradient_matches_the_formula():
    # dL/dv_c = (σ(u_o·v_c) - 1) u_o + Σ_k σ(u_k·v_c) u_k, for one pair (B = 1)
    torch.manual_seed(1)
    center = torch.randn(1, 4, dtype=torch.float64, requires_grad=True)
    context, negatives = torch.randn(1, 4, dtype=torch.float64), torch.randn(1, 3, 4, dtype=torch.float64)
    word2vec.sgns_loss(center, context, negatives).backward()
    u_o, u_k, v_c = context[0], negatives[0], center[0].detach()
    by_hand = (torch.sigmoid(u_o @ v_c) - 1) * u_o + (torch.sigmoid(u_k @ v_c)[:, None] * u_k).sum(0)
    torch.testing.assert_close(center.grad[0], by_hand)
    assert torch.autograd.gradcheck(word2vec.sgns_loss, (center, context.requires_grad_(), negatives.requires_grad_()))


def test_pairs_stay_within_the_window_and_the_document():
    pairs = word2vec.skipgram_pairs([[0, 1, 2, 3], [4, 5]], window=2)
    expected = {(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (0, 2), (2, 0), (1, 3), (3, 1), (4, 5), (5, 4)}
    assert sorted(map(tuple, pairs.tolist())) == sorted(expected)  # (0, 3) is too far; (3, 4) crosses documents


def test_pairs_count_for_a_long_document():
    pairs = word2vec.skipgram_pairs([list(range(100))], window=5)
    assert len(pairs) == 2 * sum(100 - offset for offset in range(1, 6))
    assert (pairs[:, 0] - pairs[:, 1]).abs().max() == 5


def test_negatives_are_drawn_in_proportion_to_count_to_the_075():
    counts = torch.tensor([1.0, 16.0, 81.0, 256.0])
    expected = torch.tensor([1.0, 8.0, 27.0, 64.0]) / 100
    batch_for_step = word2vec.pair_batches(torch.tensor([[0, 1]]), word2vec.noise_distribution(counts),
                                           batch_size=1000, negatives=20)
    drawn = torch.cat([batch_for_step(step)[2].flatten() for step in range(5)])  # 100,000 draws
    observed = torch.bincount(drawn, minlength=4).double() / len(drawn)
    tolerance = 4 * (expected * (1 - expected) / len(drawn)).sqrt()  # 4 standard errors: fails by chance ~1e-4
    assert ((observed - expected).abs() < tolerance).all(), (observed, expected)


def test_batches_are_seeded_by_step():
    batch_for_step = word2vec.pair_batches(torch.tensor([[0, 1], [1, 2], [2, 0]]), torch.ones(3) / 3, 4, 2)
    first, again, other = batch_for_step(7), batch_for_step(7), batch_for_step(8)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))
    assert [tuple(t.shape) for t in first] == [(4,), (4,), (4, 2)]


def test_subsampling_keeps_rare_words_and_thins_frequent_ones():
    counts = torch.tensor([9000.0, 900.0, 100.0])  # f = 0.9, 0.09, 0.01
    keep = word2vec.keep_probabilities(counts, threshold=0.01)
    torch.testing.assert_close(keep, torch.tensor([math.sqrt(0.01 / 0.9), math.sqrt(0.01 / 0.09), 1.0]))
    documents = [[0] * 9000 + [1] * 900 + [2] * 100]
    kept = torch.tensor(word2vec.subsample(documents, keep, seed=0)[0])
    assert (kept == 2).sum() == 100  # never dropped
    assert abs((kept == 0).sum().item() / 9000 - keep[0].item()) < 0.03


def test_vocabulary_orders_by_count_and_drops_rare_words():
    vocab = word2vec.build_vocab([["b", "a", "c", "a"], ["b", "d"]], min_count=2)
    assert vocab.words == ("a", "b") and vocab.counts == (2, 2)
    assert vocab.encode(["d", "b", "a"]) == [1, 0]
    assert word2vec.tokenize("The Bank's rate, 2.5% up!") == ["the", "bank's", "rate", "up"]


def test_training_puts_same_topic_words_nearer():
    # Two topics with disjoint vocabularies: words of one topic share contexts, so they must end up closer to each
    # other than to the other topic's words. A wrong sign or a broken gradient leaves them mixed.
    draw = random.Random(0)
    topics = [["cat", "dog", "fur", "paw", "pet", "tail"], ["stock", "bond", "fund", "price", "trade", "yield"]]
    documents = [[draw.choice(topics[t]) for _ in range(12)] for t in (0, 1) * 100]
    vocab = word2vec.build_vocab(documents, min_count=1)
    ids = [vocab.encode(document) for document in documents]
    counts = torch.tensor(vocab.counts, dtype=torch.float)
    torch.manual_seed(0)
    model = word2vec.SkipGram(len(vocab.words), 16)
    batches = word2vec.pair_batches(word2vec.skipgram_pairs(ids, window=2), word2vec.noise_distribution(counts), 64, 3)
    train(model, batches, lambda m, batch: m(*batch),
          TrainConfig(steps=200, lr=0.05, warmup_steps=10, weight_decay=0.0, eval_every=200), progress=False)
    vectors = model.center.weight.detach()
    similarity = cosine_matrix(vectors, vectors)
    topic = torch.tensor([0 if word in topics[0] else 1 for word in vocab.words])
    same = topic[:, None] == topic[None, :]
    off_diagonal = ~torch.eye(len(topic), dtype=torch.bool)
    within, across = similarity[same & off_diagonal].mean().item(), similarity[~same].mean().item()
    assert within > across + 0.5, (within, across)
    for word in topics[0]:  # every neighbour of every pet word is a pet word
        assert all(neighbour in topics[0] for neighbour, _ in word2vec.nearest_words(vectors, vocab, word, k=3))


def test_bad_inputs_raise_naming_the_argument():
    with pytest.raises(ValueError, match="min_count"):
        word2vec.build_vocab([["a"]], min_count=2)
    with pytest.raises(ValueError, match="min_count"):
        word2vec.build_vocab([["a"]], min_count=0)
    with pytest.raises(ValueError, match="window"):
        word2vec.skipgram_pairs([[0, 1]], window=0)
    with pytest.raises(ValueError, match="documents"):
        word2vec.skipgram_pairs([[0]], window=2)
    with pytest.raises(ValueError, match="threshold"):
        word2vec.keep_probabilities(torch.ones(3), threshold=0.0)
    with pytest.raises(ValueError, match="counts"):
        word2vec.noise_distribution(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="negatives"):
        word2vec.sgns_loss(torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="center and context"):
        word2vec.sgns_loss(torch.zeros(2, 4), torch.zeros(3, 4), torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="pairs"):
        word2vec.pair_batches(torch.zeros(0, 2, dtype=torch.long), torch.ones(2) / 2, 4, 2)
    with pytest.raises(ValueError, match="batch_size"):
        word2vec.pair_batches(torch.tensor([[0, 1]]), torch.ones(2) / 2, 0, 2)
    with pytest.raises(ValueError, match="word 'zebra'"):
        word2vec.nearest_words(torch.randn(2, 3), word2vec.Vocabulary(("a", "b"), (2, 1)), "zebra")
    with pytest.raises(TypeError, match="dim"):
        word2vec.SkipGram(10, 2.5)
