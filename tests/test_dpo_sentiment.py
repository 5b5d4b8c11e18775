"""The DPO page's text experiment (recipes.dpo_sentiment) on a tiny GPT and a toy lexicon: the reward, the pairs
ordered by Bradley-Terry, the DPO step at the reference, and best-of-n's KL bound."""

import copy
import math

import pytest
import torch

from minformers.gpt import GPT, GPTConfig
from minformers.recipes import dpo_sentiment as D

torch.set_num_threads(1)
LETTERS = "abcdefghijklmnopqrstuvwxyz "


def decode(ids: list[int]) -> str:
    return "".join(LETTERS[i] for i in ids)


def tiny_reference() -> GPT:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=len(LETTERS), d_model=32, n_layers=2, n_heads=4, d_ff=48,
                       max_len=D.PROMPT_LENGTH + D.COMPLETION_LENGTH, dropout=0.0)
    return GPT(config).eval()


def prompts(n: int) -> torch.Tensor:
    return torch.randint(0, len(LETTERS), (n, D.PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))


def test_sentiment_sums_the_valence_of_known_words_whatever_their_case():
    assert D.sentiment("Love! love, HATE; lovely", {"love": 3.0, "hate": -2.0}) == pytest.approx(4.0)
    assert D.sentiment("nothing known here", {"love": 3.0}) == 0.0


def test_completion_log_probs_count_the_completion_and_not_the_prompt():
    model = tiny_reference()
    ids = D.sample(model, prompts(3), seed=0)
    assert ids.shape == (3, D.PROMPT_LENGTH + D.COMPLETION_LENGTH)
    with torch.no_grad():
        log_probs = model(ids).log_softmax(-1)
        got = D.completion_log_probs(model, ids)
    for row in range(3):
        expected = sum(log_probs[row, t - 1, ids[row, t]] for t in range(D.PROMPT_LENGTH, ids.shape[1]))
        assert got[row].item() == pytest.approx(expected.item(), abs=1e-4)


def test_pairs_put_the_better_completion_first_when_the_reward_gap_is_large():
    # a gap of 50 per letter a: sigmoid says the one with more a's wins almost surely
    valence = {letter: (50.0 if letter == "a" else 0.0) for letter in LETTERS}
    pairs = D.preference_pairs(tiny_reference(), prompts(16), lambda ids: " ".join(decode(ids)), valence, seed=0)
    spaced = lambda ids: " ".join(decode(ids[D.PROMPT_LENGTH:].tolist()))  # noqa: E731
    for chosen, rejected in zip(pairs.chosen, pairs.rejected, strict=True):
        assert torch.equal(chosen[: D.PROMPT_LENGTH], rejected[: D.PROMPT_LENGTH])  # one prompt, two answers
        assert D.sentiment(spaced(chosen), valence) >= D.sentiment(spaced(rejected), valence)


def test_the_first_dpo_step_starts_at_log_2_and_best_of_n_reports_its_kl_bound():
    reference = tiny_reference()
    pairs = D.preference_pairs(reference, prompts(16), decode, {"a": 1.0}, seed=0)
    output = D.dpo_step_loss(pairs, beta=0.1)(copy.deepcopy(reference), torch.arange(len(pairs)))
    assert output["loss"].item() == pytest.approx(math.log(2), abs=1e-5)
    best = D.best_of_n(reference, prompts(8), (1, 4), decode, {"a": 1.0}, seed=0)
    assert best[4].kl == pytest.approx(math.log(4) - 3 / 4)
    assert best[1].kl == 0.0  # one sample is the reference itself
    assert best[4].reward >= best[1].reward  # the best of 4 includes the 1


def test_pairs_whose_completions_score_the_same_are_dropped():
    valence = {"a": 1.0}
    pairs = D.preference_pairs(tiny_reference(), prompts(32), decode, valence, seed=0)
    assert 0 < len(pairs) < 32  # a tiny random GPT writes a's in most completions, but not in all
    chosen, rejected = D.rewards(pairs.chosen, decode, valence), D.rewards(pairs.rejected, decode, valence)
    assert (chosen != rejected).all()
    assert len(pairs.reference_chosen) == len(pairs.reference_rejected) == len(pairs)
