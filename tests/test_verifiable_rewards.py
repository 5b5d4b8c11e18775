"""RL with verifiable rewards (minformers.recipes.verifiable_rewards): the reward, pass@k against counting subsets,
and one GRPO step's gradient against the policy gradient written out by hand."""

import itertools

import pytest
import torch

from minformers.gpt import GPT, GPTConfig
from minformers.recipes import verifiable_rewards
from minformers.recipes.instruction_tuning import Example
from minformers.recipes.shakespeare_gpt import shakespeare_characters
from minformers.sft import sft_batch, token_log_probs

torch.set_num_threads(1)


@pytest.mark.parametrize(("written", "expected"), [
    ("wed@", 1.1), ("wed", 1.0), ("wet@", 0.1), ("we@", 0.1), ("", 0.0), ("wed@@", 0.1),
])
def test_the_reward_is_the_right_answer_plus_the_format(written, expected):
    assert verifiable_rewards.reward(Example("reverse", "dew"), written) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "correct"), [(5, 0), (5, 2), (6, 3), (6, 6), (7, 1)])
def test_pass_at_k_is_the_share_of_k_subsets_holding_a_right_answer(n, correct):
    answers = [True] * correct + [False] * (n - correct)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(answers, k))
        share = sum(any(subset) for subset in subsets) / len(subsets)
        assert verifiable_rewards.pass_at_k(n, correct, k) == pytest.approx(share)


def tiny_gpt(seed: int) -> GPT:
    torch.manual_seed(seed)
    vocab = shakespeare_characters().tokenizer.vocab_size
    return GPT(GPTConfig(vocab_size=vocab, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=64, dropout=0.0))


def test_a_grpo_step_is_the_policy_gradient_over_the_groups_that_disagree(monkeypatch):
    # a random model is never right: score answers by their length instead, so that groups disagree
    monkeypatch.setattr(verifiable_rewards, "reward", lambda example, written: float(len(written) % 3))
    examples = [Example("reverse", word) for word in ("dew", "ant", "sea", "oak")]
    run = verifiable_rewards.RLRun(group_size=4)
    model = tiny_gpt(0)
    metrics = verifiable_rewards.grpo_step_loss(model, run, examples, torch.Generator().manual_seed(7))
    metrics["loss"].backward()
    ours = [p.grad.clone() for p in model.parameters()]

    # by hand: the same samples, each answer's summed log-probability times its advantage, over the answer tokens
    # of the groups whose rewards differ
    model.zero_grad()
    written = verifiable_rewards.sample(model, examples, 4, torch.Generator().manual_seed(7))
    decode = shakespeare_characters().tokenizer.decode
    prompts = verifiable_rewards.prompt_ids(examples)
    surrogate, tokens, flat = 0.0, 0, 0
    for prompt, answers in zip(prompts, written, strict=True):
        rewards = torch.tensor([float(len(decode(a)) % 3) for a in answers])
        if (rewards == rewards[0]).all():
            flat += 1
            continue
        advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        ids, labels = sft_batch([prompt + a for a in answers], [len(prompt)] * 4, verifiable_rewards.end_id())
        log_probs = token_log_probs(model.train()(ids), labels)
        surrogate = surrogate - (advantages[:, None] * log_probs).sum()
        tokens += sum(len(a) for a in answers)
    assert 0 < flat < len(examples), "the case needs groups that teach and groups that do not"
    (surrogate / tokens).backward()
    for mine, theirs in zip(ours, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-6, rtol=1e-5)
    assert metrics["flat groups"].item() == pytest.approx(flat / len(examples))


def test_a_step_whose_groups_all_agree_changes_no_weight(monkeypatch):
    monkeypatch.setattr(verifiable_rewards, "reward", lambda example, written: 0.5)
    model = tiny_gpt(1)
    examples = [Example("reverse", "dew"), Example("shout", "ant")]
    run = verifiable_rewards.RLRun(group_size=3)
    metrics = verifiable_rewards.grpo_step_loss(model, run, examples, torch.Generator().manual_seed(0))
    metrics["loss"].backward()
    assert metrics["flat groups"].item() == 1.0 and metrics["loss"].item() == 0.0
    assert all(not p.grad.any() for p in model.parameters())


@pytest.mark.parametrize(("settings", "match"), [
    ({"method": "ppo"}, "method must be"),
    ({"group_size": 1}, "group_size must be at least 2"),
])
def test_a_run_with_impossible_settings_says_what_is_wrong(settings, match):
    with pytest.raises(ValueError, match=match):
        verifiable_rewards.RLRun(**settings)
