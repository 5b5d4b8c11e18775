import math

import pytest
import torch

from minformers.gpt import GPT, GPTConfig, language_model_loss
from minformers.kv_cache import KVCache
from minformers.language_modeling import CharTokenizer
from minformers.memorization import (
    Canary,
    exposure,
    extrapolated_exposure,
    greedy_extraction,
    insert_canaries,
    make_canaries,
    measure_canaries,
    planted_positions,
    random_secrets,
    secret_log_likelihoods,
    sightings,
)

torch.set_num_threads(1)  # a tiny model: one thread is several times faster here than two


def test_exposure_from_known_ranks():
    candidates = torch.arange(-1.0, -16.0, -1.0)  # 15 candidates, -1 .. -15: |R| = 16
    assert exposure(0.0, candidates) == 4.0  # first of 16: log2 16
    assert exposure(-20.0, candidates) == 0.0  # last of 16
    assert exposure(-3.5, candidates) == pytest.approx(4 - math.log2(4))  # three above it: rank 4
    # A list works as well as a tensor, and the order of the candidates does not matter.
    assert exposure(-3.5, [-15.0, -1.0, -9.0, -2.0, -3.0] + list(range(-14, -4))) == pytest.approx(2.0)


def test_ties_count_against_the_secret():
    assert exposure(-2.0, torch.tensor([-2.0, -2.0, -2.0])) == 0.0  # tied with all: ranked last of 4
    assert exposure(-2.0, torch.tensor([-1.0, -2.0, -3.0])) == pytest.approx(2 - math.log2(3))


def test_extrapolated_exposure_follows_the_normal_tail():
    scores = torch.randn(20_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3 - 40
    mean, std = scores.mean().item(), scores.std().item()
    assert extrapolated_exposure(mean, scores) == pytest.approx(1.0)
    assert extrapolated_exposure(mean + 1.6448536 * std, scores) == pytest.approx(-math.log2(0.05), abs=1e-4)
    assert extrapolated_exposure(mean + 50 * std, scores) == pytest.approx(math.log2(1e10))  # capped at the space
    # Sampled and extrapolated agree where the sample resolves the rank. At mean + 2 std about 455 of the 20,000
    # samples lie above: a count with a standard deviation of about 21 (4.7%), i.e. about 0.07 bits of sampling
    # noise in the sampled exposure, hence 0.1 bits.
    assert extrapolated_exposure(mean + 2 * std, scores) == pytest.approx(exposure(mean + 2 * std, scores), abs=0.1)


def test_bad_scores_are_rejected():
    with pytest.raises(ValueError, match="candidate_scores"):
        exposure(0.0, torch.tensor([]))
    with pytest.raises(ValueError, match="true_score"):
        exposure(float("nan"), torch.tensor([1.0]))
    with pytest.raises(ValueError, match="candidate_scores"):
        extrapolated_exposure(0.0, torch.tensor([1.0]))
    with pytest.raises(ValueError, match="space_size"):
        extrapolated_exposure(0.0, torch.tensor([1.0, 2.0]), space_size=1)


def test_random_secrets_are_distinct_digits_and_avoid_the_excluded():
    secrets = random_secrets(500, digits=3, seed=0, exclude=("000", "123"))
    assert len(set(secrets)) == 500 and all(len(s) == 3 and s.isdigit() for s in secrets)
    assert not {"000", "123"} & set(secrets)
    assert any(s.startswith("0") for s in secrets)  # leading zeros are allowed
    assert random_secrets(5, seed=3) == random_secrets(5, seed=3) != random_secrets(5, seed=4)
    with pytest.raises(ValueError, match="count"):
        random_secrets(11, digits=1)
    with pytest.raises(ValueError, match="digits"):
        random_secrets(1, digits=0)


def test_canaries_have_their_own_names_and_secrets():
    canaries = make_canaries((0, 1, 4, 16, 64), seed=0)
    assert [c.repetitions for c in canaries] == [0, 1, 4, 16, 64]
    assert len({c.prefix for c in canaries}) == len({c.secret for c in canaries}) == 5
    assert canaries[0].line == f"Alice's phone number is {canaries[0].secret}.\n"
    with pytest.raises(ValueError, match="repetitions"):
        make_canaries(())
    with pytest.raises(ValueError, match="repetitions"):
        make_canaries((1, -1))


def test_canaries_are_planted_the_right_number_of_times_between_lines():
    text = "".join(f"line {index} of the play\n" for index in range(200)) + "no newline at the end"
    canaries = [Canary("Ann's number is ", "12345", 1), Canary("Bob's number is ", "67890", 7), Canary("C: ", "5", 0)]
    planted = insert_canaries(text, canaries, seed=3)
    for canary in canaries:
        positions = planted_positions(planted, canary)
        assert len(positions) == canary.repetitions
        assert all(p == 0 or planted[p - 1] == "\n" for p in positions)  # each starts a line
    kept = [line for line in planted.splitlines(keepends=True) if line not in {c.line for c in canaries}]
    assert "".join(kept) == text  # every other line intact and in order
    assert insert_canaries(text, canaries, seed=3) == planted != insert_canaries(text, canaries, seed=4)
    with pytest.raises(ValueError, match="text"):
        insert_canaries("", canaries)


def test_sightings_counts_whole_copies_inside_windows():
    starts = torch.tensor([0, 3, 4, 5, 20])
    # A 4-token line at 4 and one at 20, windows of 8 tokens: [0, 8) and [3, 11), [4, 12) hold the first; [5, 13)
    # starts after it; [20, 28) holds the second.
    assert sightings([4, 20], length=4, window_starts=starts, block_size=8) == 4
    assert sightings([], length=4, window_starts=starts, block_size=8) == 0


def _tiny_model(vocab_size):
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=vocab_size, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=96, dropout=0.0)
    return GPT(config).eval()


def test_cached_scores_equal_a_plain_forward_pass():
    tokenizer = CharTokenizer("0123456789 abcis:")
    model = _tiny_model(tokenizer.vocab_size)
    secrets = ["0123", "9876", "5555"]
    scores = secret_log_likelihoods(model, tokenizer, "abc is: ", secrets, batch_size=2)
    for secret, score in zip(secrets, scores, strict=True):
        ids = torch.tensor([tokenizer.encode("abc is: " + secret)])  # (1, T)
        log_probs = model(ids).log_softmax(-1)[0, :-1].gather(-1, ids[0, 1:, None]).squeeze(-1)  # (T - 1,)
        assert score.item() == pytest.approx(log_probs[-4:].sum().item(), abs=1e-5)
    with pytest.raises(ValueError, match="secrets"):
        secret_log_likelihoods(model, tokenizer, "abc", ["01", "012"])
    assert KVCache(1).length == 0


def test_a_model_that_memorised_one_line_gives_it_away():
    canary = Canary("Ann's number is ", "6604876475", 1)
    filler = "and so to bed.\n"
    tokenizer = CharTokenizer(canary.line + filler + "0123456789")
    model = _tiny_model(tokenizer.vocab_size)
    candidates = random_secrets(300, seed=1, exclude=(canary.secret,))
    before = measure_canaries(model, tokenizer, [canary], candidates)[0]
    ids = torch.tensor(tokenizer.encode(canary.line + filler + canary.line))  # the line, then other text, then it again
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(150):
        loss = language_model_loss(model(ids[None]), ids[None])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = measure_canaries(model, tokenizer, [canary], candidates)[0]
    assert before["digits_right"] < 5 and after["digits_right"] == 10
    assert after["greedy"] == canary.secret
    assert after["exposure"] == pytest.approx(math.log2(301))  # ranked first among 300 candidates
    assert after["extrapolated_exposure"] > 15 > before["extrapolated_exposure"]
    assert greedy_extraction(model, tokenizer, canary) == (canary.secret, 10)
