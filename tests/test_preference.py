"""DPO (minformers.preference): the summed log-probability of an answer, the loss equal to TRL's DPOTrainer on the
same models and pairs, and its minimiser equal to the KL-regularised optimum pi* = ref exp(r / beta) / Z."""

import tempfile

import pytest
import torch
import torch.nn.functional as F

from minformers.preference import dpo_loss, implicit_reward, sequence_log_probs

torch.set_num_threads(1)


def test_sequence_log_probs_sums_the_labelled_next_tokens_row_by_row():
    draw = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 11, generator=draw)
    labels = torch.randint(0, 11, (3, 7), generator=draw)
    labels[0, :4], labels[1, :2], labels[1, 5:], labels[2, :6] = -100, -100, -100, -100
    expected = torch.zeros(3)
    for b in range(3):
        for t in range(1, 7):  # the label at t is read from the prediction at t - 1
            if labels[b, t] != -100:
                expected[b] += logits[b, t - 1].log_softmax(-1)[labels[b, t]]
    torch.testing.assert_close(sequence_log_probs(logits, labels), expected)


def test_the_loss_is_log_2_at_the_reference_and_falls_as_the_chosen_answer_rises():
    ref_chosen, ref_rejected = torch.tensor([-4.0, -9.0]), torch.tensor([-6.0, -2.0])
    at_reference = dpo_loss(ref_chosen, ref_rejected, ref_chosen, ref_rejected, beta=0.3)
    torch.testing.assert_close(at_reference, torch.log(torch.tensor(2.0)))
    policy_chosen = ref_chosen.clone().requires_grad_()
    dpo_loss(policy_chosen, ref_rejected, ref_chosen, ref_rejected, beta=0.3).backward()
    assert (policy_chosen.grad < 0).all()  # raising the chosen answer lowers the loss
    with pytest.raises(ValueError, match="beta must be positive"):
        dpo_loss(ref_chosen, ref_rejected, ref_chosen, ref_rejected, beta=0.0)


def tiny_llama(seed: int):
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=41, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config)


def word_tokenizer():
    """A tokenizer of 41 words t0 ... t40, built offline: DPOTrainer wants one to prepare its dataset."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({f"t{i}": i for i in range(41)}, unk_token="t1"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=words, pad_token="t0", eos_token="t2")


@pytest.mark.parametrize("beta", [0.1, 1.0])
def test_our_dpo_loss_equals_trls_on_the_same_models_and_pairs(beta):
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    policy, reference = tiny_llama(0), tiny_llama(1)  # two different networks: the ratio is not 1
    draw = torch.Generator().manual_seed(2)

    def some_ids(low: int, high: int) -> list[int]:
        length = int(torch.randint(low, high + 1, (), generator=draw))
        return torch.randint(3, 41, (length,), generator=draw).tolist()

    # answers of different lengths: a per-token average would give another loss
    pairs = [{"prompt_ids": some_ids(2, 6), "chosen_ids": some_ids(1, 5), "rejected_ids": some_ids(1, 5)}
             for _ in range(6)]
    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(output_dir=out, beta=beta, report_to="none", use_cpu=True)
        trainer = DPOTrainer(
            model=policy, ref_model=reference, args=args, processing_class=word_tokenizer(),
            train_dataset=Dataset.from_list([{"prompt": "t5 t6", "chosen": " t8", "rejected": " t9"}]),
        )  # fmt: skip
        batch = DataCollatorForPreference(pad_token_id=0)(pairs)  # chosen rows, then rejected rows
        theirs = trainer.compute_loss(trainer.model, batch)
    labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
    with torch.no_grad():
        ours_policy = sequence_log_probs(policy(batch["input_ids"]).logits, labels).chunk(2)
        ours_reference = sequence_log_probs(reference(batch["input_ids"]).logits, labels).chunk(2)
    ours = dpo_loss(*ours_policy, *ours_reference, beta=beta)
    torch.testing.assert_close(ours, theirs.detach(), atol=1e-6, rtol=0)


def test_the_minimiser_over_every_pair_is_the_kl_regularised_optimum():
    """A one-step policy over 8 answers, the expected DPO loss over every ordered pair drawn from the reference and
    labelled by Bradley-Terry on r, minimised exactly: the policy it reaches is ref exp(r / beta) / Z."""
    draw = torch.Generator().manual_seed(5)
    reference = torch.randn(8, generator=draw).log_softmax(0)
    reward, beta = torch.randn(8, generator=draw), 0.5
    pair_weight = reference.exp()[:, None] * reference.exp()[None, :]  # (y1, y2) drawn from the reference
    first_preferred = torch.sigmoid(reward[:, None] - reward[None, :])  # Bradley-Terry
    logits = reference.clone().requires_grad_()
    optimizer = torch.optim.LBFGS([logits], lr=1.0, max_iter=500, tolerance_grad=1e-10, line_search_fn="strong_wolfe")

    def expected_loss():
        optimizer.zero_grad()
        policy = logits.log_softmax(0)
        margin = implicit_reward(policy, reference, beta)
        # loss of (y1 chosen over y2) for every ordered pair, weighted by how often that label is drawn
        per_pair = -F.logsigmoid(margin[:, None] - margin[None, :])
        loss = (pair_weight * first_preferred * per_pair).sum()
        loss.backward()
        return loss

    optimizer.step(expected_loss)
    optimum = (reference + reward / beta).log_softmax(0)
    policy = logits.detach().log_softmax(0)
    kl = (policy.exp() * (policy - optimum)).sum()
    assert kl < 1e-6


def test_bandit_pairs_are_drawn_from_the_reference_and_ordered_by_bradley_terry():
    from minformers.recipes.dpo_bandit import Bandit, preference_pairs

    bandit = Bandit(answers=3, seed=1)
    chosen, rejected = preference_pairs(bandit, 200_000, torch.Generator().manual_seed(0))
    reference, reward = bandit.reference().exp(), bandit.reward()
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        a_wins = ((chosen == a) & (rejected == b)).sum().item()
        b_wins = ((chosen == b) & (rejected == a)).sum().item()
        # each unordered pair is drawn with probability 2 ref(a) ref(b)
        drawn = 2 * reference[a] * reference[b] * 200_000
        assert abs(a_wins + b_wins - drawn) < 5 * drawn.sqrt()  # 5 binomial standard deviations
        expected = torch.sigmoid(reward[a] - reward[b]).item()
        n = a_wins + b_wins
        assert abs(a_wins / n - expected) < 5 * (expected * (1 - expected) / n) ** 0.5


def test_dpo_on_fresh_pairs_reaches_the_optimum_for_a_small_beta():
    from minformers.preference import kl_divergence
    from minformers.recipes.dpo_bandit import Bandit, train_dpo

    bandit = Bandit(answers=8)
    policy, kl_to_optimum = train_dpo(bandit, beta=0.1, steps=400, pairs_per_step=256)
    assert kl_to_optimum[-1] < 0.01 < kl_to_optimum[0]
    assert kl_to_optimum[-1] == pytest.approx(kl_divergence(policy, bandit.optimum(0.1)).item())
