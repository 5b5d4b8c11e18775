"""Speculative decoding (minformers.speculative, recipes.speculative_study): the rule's output follows the target's
distribution, counted over many rows; greedy speculative decoding writes the target's greedy text with every draft;
the cache forgets rejected guesses; the page's test statistics against known values."""

import pytest
import torch

from minformers.generation import generate
from minformers.gpt import GPT, GPTConfig
from minformers.kv_cache import KVCache
from minformers.recipes.speculative_study import (
    outcome_counts,
    pair_distribution,
    power,
    speculative_pairs,
    target_pairs,
)
from minformers.speculative import (
    BigramDraft,
    expected_tokens_per_round,
    predicted_speedup,
    probabilities,
    speculative_generate,
    verify,
)
from minformers.support.statistics import chi_square

ROWS = 200_000


def tiny_gpt(seed: int, vocab_size: int = 5, layers: int = 1) -> GPT:
    """A random GPT whose next-token distributions are far from uniform (weights of std 0.5, not 0.02), so that two
    seeds disagree and both branches of the rule are taken."""
    torch.manual_seed(seed)
    config = GPTConfig.tiny(vocab_size=vocab_size, d_model=16, n_layers=layers, n_heads=2, d_ff=32, max_len=24)
    model = GPT(config).eval()
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() == 2:
                weight.normal_(0, 0.5)
    return model


def rule_draws(k: int, seed: int = 0):
    """ROWS rows of one round of the rule with fixed p (k + 1, V) and q (k, V) that disagree."""
    generator = torch.Generator().manual_seed(seed)
    p = torch.rand(k + 1, 4, generator=generator).softmax(-1) ** 2
    p = p / p.sum(-1, keepdim=True)
    q = torch.rand(k, 4, generator=generator).softmax(-1)
    drafted = torch.multinomial(q, ROWS, replacement=True, generator=generator).T  # (ROWS, k)
    kept, after = verify(p.expand(ROWS, -1, -1), q.expand(ROWS, -1, -1), drafted, generator)
    return p, drafted, kept, after


def assert_follows(tokens: torch.Tensor, p: torch.Tensor):
    """The frequencies of ``tokens`` within 5 standard errors of ``p``."""
    frequency = torch.bincount(tokens, minlength=len(p)).double() / len(tokens)
    error = (p.double() * (1 - p.double()) / len(tokens)).sqrt()
    assert ((frequency - p).abs() <= 5 * error + 1e-9).all(), (frequency, p)


@pytest.mark.parametrize("k", [1, 3])
def test_the_first_token_a_round_writes_follows_the_target_whatever_the_draft(k):
    p, drafted, kept, after = rule_draws(k)
    first = torch.where(kept > 0, drafted[:, 0], after)
    assert_follows(first, p[0])
    assert 0 < (kept == 0).float().mean() < 1  # both branches of the rule were taken


def test_after_an_accepted_guess_the_next_token_follows_the_target_there():
    p, drafted, kept, after = rule_draws(3, seed=1)
    second = torch.where(kept > 1, drafted[:, 1], after)[kept >= 1]
    assert_follows(second, p[1])


def test_a_round_with_every_guess_accepted_draws_one_more_from_the_target_after_them():
    p = torch.tensor([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]])
    q = torch.tensor([[0.0, 1.0, 0.0]])  # the draft agrees: always kept
    kept, after = verify(p.expand(ROWS, -1, -1), q.expand(ROWS, -1, -1), torch.ones(ROWS, 1, dtype=torch.long))
    assert (kept == 1).all()
    assert_follows(after, p[1])


def test_probabilities_at_temperature_0_are_one_hot_on_the_argmax():
    logits = torch.tensor([[0.1, 2.0, -1.0]])
    assert torch.equal(probabilities(logits, 0), torch.tensor([[0.0, 1.0, 0.0]]))
    torch.testing.assert_close(probabilities(logits, 1), logits.softmax(-1))


@pytest.mark.parametrize("draft", ["bigram", "gpt", "itself"])
def test_greedy_speculative_decoding_writes_the_target_s_greedy_text(draft):
    target = tiny_gpt(0, layers=2)
    drafts = {
        "bigram": BigramDraft.from_ids(torch.randint(0, 5, (500,), generator=torch.Generator().manual_seed(3)), 5),
        "gpt": tiny_gpt(1),
        "itself": target,
    }
    prompt = torch.tensor([[1, 3, 2]])
    for gamma in (1, 3, 6):
        tokens, stats = speculative_generate(target, drafts[draft], prompt, 15, gamma, temperature=0)
        assert torch.equal(tokens, generate(target, prompt, 15, temperature=0))
        assert stats.accepted + stats.rounds == 15  # every token written is counted once
    if draft == "itself":
        assert stats.acceptance_rate == 1


def test_speculative_sampling_writes_the_target_s_distribution_of_the_next_two_tokens():
    target, draft = tiny_gpt(0, layers=2), tiny_gpt(1)
    prefix = torch.tensor([[4, 0, 2, 1]])
    exact = pair_distribution(target, prefix)
    torch.testing.assert_close(exact.sum(), torch.tensor(1.0))
    generator = torch.Generator().manual_seed(5)
    for pairs in (speculative_pairs(target, draft, prefix, 40_000, 3, generator),
                  target_pairs(target, prefix, 40_000, generator)):
        counts, expected = outcome_counts(pairs, exact, top=12)
        assert counts.sum() == 40_000
        assert chi_square(counts, expected)[2] > 1e-3
    # the test does see a wrong distribution: the draft's own pairs
    counts, expected = outcome_counts(target_pairs(draft, prefix, 40_000, generator), exact, top=12)
    assert chi_square(counts, expected)[2] < 1e-6


def test_the_pair_distribution_is_the_product_of_the_target_s_next_token_probabilities():
    target = tiny_gpt(2)
    prefix = torch.tensor([[1, 2]])
    exact = pair_distribution(target, prefix)
    first = target(prefix)[0, -1].softmax(-1)
    second = target(torch.tensor([[1, 2, 3]]))[0, -1].softmax(-1)
    torch.testing.assert_close(exact[3], first[3] * second)


def test_a_cropped_cache_decodes_as_if_the_forgotten_tokens_were_never_read():
    model = tiny_gpt(4, layers=2)
    cache = KVCache(2)
    model(torch.tensor([[1, 2, 3, 4, 0]]), cache=cache)
    cache.crop(3)
    with_crop = model(torch.tensor([[2]]), cache=cache)[0, -1]
    torch.testing.assert_close(with_crop, model(torch.tensor([[1, 2, 3, 2]]))[0, -1], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="length must be in"):
        cache.crop(7)


def test_chi_square_p_values_are_the_textbook_ones():
    statistic, freedom, p_value = chi_square(torch.tensor([60, 40]), torch.tensor([0.5, 0.5]))
    assert (statistic, freedom) == (pytest.approx(4.0), 1)
    assert p_value == pytest.approx(0.0455003, abs=1e-6)
    assert chi_square(torch.tensor([10, 10, 10]), torch.tensor([1.0, 1.0, 1.0]))[2] == pytest.approx(1.0)


def test_the_power_of_the_test_grows_with_the_draws():
    expected = torch.tensor([0.3, 0.2, 0.2, 0.15, 0.15])
    assert power(expected, 500, shift=0.01, trials=200) < 0.2 < 0.8 < power(expected, 60_000, shift=0.01, trials=200)


def test_tokens_per_round_match_a_simulation_of_independent_acceptances():
    generator = torch.Generator().manual_seed(6)
    for alpha, gamma in ((0.3, 2), (0.8, 5)):
        accepted = torch.rand(100_000, gamma, generator=generator) < alpha
        written = accepted.long().cumprod(-1).sum(-1) + 1
        assert expected_tokens_per_round(alpha, gamma) == pytest.approx(written.double().mean().item(), rel=0.01)
    assert expected_tokens_per_round(1.0, 4) == 5
    assert predicted_speedup(1.0, 4, cost_ratio=0.25) == pytest.approx(2.5)


def test_a_bigram_draft_counts_what_follows_each_token():
    draft = BigramDraft.from_ids(torch.tensor([0, 1, 1, 2, 0, 1]), vocab_size=3)
    probs = draft(torch.tensor([[0, 1]])).exp()[0]
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    torch.testing.assert_close(probs[0], torch.tensor([1.0, 3.0, 1.0]) / 5)  # 0 -> 1 twice, plus one each


@pytest.mark.parametrize(("call", "match"), [
    (lambda t: speculative_generate(t, t, torch.tensor([1, 2]), 3), r"one row of token ids, \(1, T\)"),
    (lambda t: speculative_generate(t, t, torch.tensor([[1, 2]]), 30), "exceed the target's context of 24"),
    (lambda t: speculative_generate(t, t, torch.tensor([[1, 2]]), 3, gamma=-1), "must be >= 0"),
])
def test_impossible_requests_say_what_is_wrong(call, match):
    with pytest.raises(ValueError, match=match):
        call(tiny_gpt(0))
