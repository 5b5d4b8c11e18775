"""GRPO (minformers.grpo): group-relative advantages, the KL estimator, and the clipped loss equal to TRL's
GRPOTrainer loss on the same model and batch."""

import tempfile

import pytest
import torch

from minformers.grpo import group_advantages, grpo_loss, kl_estimate
from minformers.sft import IGNORE_INDEX, token_log_probs
from test_preference import tiny_llama, word_tokenizer


def test_advantages_are_centred_within_each_group_and_scaled_by_its_spread():
    rewards = torch.tensor([3.0, 1.0, 2.0, 0.0, 10.0, 10.0, 10.0, 10.0])
    scaled = group_advantages(rewards, group_size=4)
    first = scaled[:4]
    assert first.sum().item() == pytest.approx(0.0, abs=1e-6)
    assert first.std().item() == pytest.approx(1.0, abs=1e-3)  # the + 1e-4 keeps it just under 1
    assert torch.equal(scaled[4:], torch.zeros(4))  # a group that agrees teaches nothing
    unscaled = group_advantages(rewards, group_size=4, scale=False)
    assert unscaled[:4].tolist() == [1.5, -0.5, 0.5, -1.5]
    with pytest.raises(ValueError, match="groups of 3"):
        group_advantages(rewards, group_size=3)


def test_the_kl_estimate_is_never_negative_and_its_mean_is_the_kl():
    draw = torch.Generator().manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.3, 0.5])
    samples = torch.multinomial(p, 200_000, replacement=True, generator=draw)  # tokens drawn from the policy
    estimate = kl_estimate(p.log()[samples], q.log()[samples])
    assert (estimate >= 0).all()
    exact = (p * (p / q).log()).sum()
    assert estimate.mean().item() == pytest.approx(exact.item(), abs=0.01)


def test_the_clip_stops_the_gradient_once_the_ratio_has_moved_far_enough():
    old = torch.zeros(2, 1)
    mask = torch.ones(2, 1)
    advantages = torch.tensor([1.0, -1.0])
    # ratios e^0.5 = 1.65 on an answer with a positive advantage and e^-0.5 = 0.61 on a negative one: both past
    # the clip in the direction the advantage pushes, so neither may move further
    policy = torch.tensor([[0.5], [-0.5]], requires_grad=True)
    grpo_loss(policy, old, advantages, mask, epsilon=0.2).backward()
    assert torch.equal(policy.grad, torch.zeros(2, 1))
    # inside the clip, the gradient of -ratio * A is -A at ratio 1
    policy = torch.zeros(2, 1, requires_grad=True)
    grpo_loss(policy, old, advantages, mask, epsilon=0.2).backward()
    assert policy.grad.flatten().tolist() == [-0.5, 0.5]  # averaged over the 2 answer tokens


def test_averaging_per_answer_weighs_a_short_answers_tokens_more():
    policy = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1]])  # one token, then four
    grpo_loss(policy, torch.zeros(2, 4), torch.ones(2), mask, average="answer").backward()
    assert policy.grad[0, 0] == 4 * policy.grad[1, 0]
    policy.grad = None
    grpo_loss(policy, torch.zeros(2, 4), torch.ones(2), mask, average="token").backward()
    assert policy.grad[0, 0] == policy.grad[1, 0]


def test_a_penalty_needs_the_reference():
    zeros = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="reference"):
        grpo_loss(zeros, zeros, torch.zeros(1), torch.ones(1, 2), beta=0.1)


@pytest.mark.parametrize(("beta", "scale", "average", "loss_type"), [
    (0.0, True, "token", "dapo"),  # TRL's default
    (0.04, False, "token", "dapo"),
    (0.04, True, "answer", "grpo"),
])
def test_our_grpo_loss_equals_trls_on_the_same_model_and_batch(beta, scale, average, loss_type):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    policy, reference = tiny_llama(0), tiny_llama(1)
    draw = torch.Generator().manual_seed(3)
    group, prompt_length, completion_length = 4, 3, 5
    prompt_ids = torch.randint(3, 41, (2, prompt_length), generator=draw).repeat_interleave(group, 0)  # 2 prompts
    completion_ids = torch.randint(3, 41, (2 * group, completion_length), generator=draw)
    lengths = torch.tensor([5, 2, 4, 1, 3, 5, 2, 4])  # answers of different lengths, right-padded
    completion_mask = (torch.arange(completion_length) < lengths[:, None]).long()
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    advantages = group_advantages(rewards, group, scale=scale)
    ids = torch.cat([prompt_ids, completion_ids], 1)
    labels = ids.masked_fill(torch.cat([torch.zeros_like(prompt_ids), completion_mask], 1) == 0, IGNORE_INDEX)
    with torch.no_grad():
        ours_reference = token_log_probs(reference(ids).logits, labels)[:, prompt_length - 1 :]
        # the sampling policy: another network, so the ratio is not 1 and the clip can act
        old = token_log_probs(tiny_llama(2)(ids).logits, labels)[:, prompt_length - 1 :]
    ours_policy = token_log_probs(policy(ids).logits, labels)[:, prompt_length - 1 :]
    ours = grpo_loss(ours_policy, old, advantages, completion_mask, epsilon=0.2, beta=beta,
                     reference=ours_reference, average=average)
    with tempfile.TemporaryDirectory() as out:
        # bf16 is TRL's default even on a CPU; beta is set after construction, since with beta > 0 TRL would load
        # a reference model by name, and the reference's log-probabilities come in the batch anyway
        args = GRPOConfig(output_dir=out, beta=0.0, epsilon=0.2, loss_type=loss_type, num_generations=group,
                          bf16=False, per_device_train_batch_size=group, report_to="none", use_cpu=True)
        trainer = GRPOTrainer(model=policy, reward_funcs=lambda completions, **_: [0.0] * len(completions),
                              args=args, processing_class=word_tokenizer(),
                              train_dataset=Dataset.from_list([{"prompt": "t5 t6"}] * group))
        trainer.beta = beta
        trainer.model.eval()  # TRL divides by the accumulation steps only in training
        inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
                  "completion_ids": completion_ids, "completion_mask": completion_mask,
                  "advantages": advantages, "old_per_token_logps": old, "ref_per_token_logps": ours_reference,
                  "num_items_in_batch": completion_mask.sum()}  # the batch's answer tokens: DAPO's divisor
        theirs = trainer._compute_loss(trainer.model, inputs)
    torch.testing.assert_close(ours, theirs.detach(), atol=1e-6, rtol=0)
