"""Supervised fine-tuning (minformers.sft): the response mask and labels by hand, the loss against a hand sum and
against HF's GPT-2 with the same weights and labels, and batched greedy answers against one prompt at a time."""

import pytest
import torch
import torch.nn.functional as F
import transformers

from minformers.convert.gpt2 import hf_gpt2_config, hf_gpt2_state_dict
from minformers.generation import generate
from minformers.gpt import GPT, GPTConfig
from minformers.sft import (
    IGNORE_INDEX,
    continuations,
    greedy_responses,
    masked_labels,
    response_mask,
    sft_batch,
    sft_loss,
)

torch.set_num_threads(1)
TINY = GPTConfig(vocab_size=23, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_len=16, dropout=0.0)


def test_the_response_mask_covers_the_response_and_nothing_else():
    mask = response_mask(torch.tensor([2, 1, 3]), torch.tensor([5, 2, 3]), T=5)
    assert mask.tolist() == [
        [False, False, True, True, True],
        [False, True, False, False, False],
        [False, False, False, False, False],  # a prompt as long as its example: no response
    ]


def test_labels_keep_the_response_and_ignore_prompt_and_padding():
    ids, labels = sft_batch([[4, 5, 6], [4, 7, 8, 9, 3]], prompt_lengths=[1, 3], pad_id=0)
    assert ids.tolist() == [[4, 5, 6, 0, 0], [4, 7, 8, 9, 3]]
    assert labels.tolist() == [[-100, 5, 6, -100, -100], [-100, -100, -100, 9, 3]]
    _, every_token = sft_batch([[4, 5, 6], [4, 7, 8, 9, 3]], prompt_lengths=[1, 3], pad_id=0, response_only=False)
    assert every_token.tolist() == [[4, 5, 6, -100, -100], [4, 7, 8, 9, 3]]  # padding still ignored
    assert masked_labels(torch.tensor([[1, 2]]), torch.tensor([[True, False]])).tolist() == [[1, IGNORE_INDEX]]


def test_the_loss_is_the_mean_over_the_response_tokens_each_predicted_from_the_token_before():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 10)
    ids, labels = sft_batch([[1, 2, 3], [4, 5, 6, 7, 8]], prompt_lengths=[1, 3], pad_id=0)
    # hand sum: example 0 predicts 2 and 3 at positions 0 and 1; example 1 predicts 7 and 8 at positions 2 and 3
    terms = [(0, 0, 2), (0, 1, 3), (1, 2, 7), (1, 3, 8)]
    expected = -sum(torch.log_softmax(logits[b, t], dim=-1)[y] for b, t, y in terms) / len(terms)
    torch.testing.assert_close(sft_loss(logits, labels), expected)


def test_our_masked_loss_equals_cross_entropy_on_hf_gpt2_with_the_same_weights_and_labels():
    torch.manual_seed(1)
    ours = GPT(TINY).eval()
    theirs = transformers.GPT2LMHeadModel(hf_gpt2_config(TINY)).eval()
    theirs.load_state_dict(hf_gpt2_state_dict(ours), strict=False)  # strict=False: HF's causal-mask buffers
    examples = [[3, 4, 5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15]]
    ids, labels = sft_batch(examples, prompt_lengths=[2, 1, 3], pad_id=0)
    with torch.no_grad():
        hf_logits = theirs(ids).logits
        reference = F.cross_entropy(hf_logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
        assert abs(sft_loss(ours(ids), labels).item() - reference.item()) < 1e-6
        # HF's own loss shifts the labels the same way and ignores the same -100s
        assert abs(theirs(ids, labels=labels).loss.item() - reference.item()) < 1e-6


def test_batched_greedy_answers_equal_one_prompt_at_a_time():
    torch.manual_seed(2)
    model = GPT(TINY).eval()
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8], [9]]
    answers = greedy_responses(model, prompts, max_new_tokens=6, end_id=22)
    for prompt, answer in zip(prompts, answers, strict=True):
        alone = generate(model, torch.tensor([prompt]), 6, temperature=0.0)[0, len(prompt):].tolist()
        cut = alone[: alone.index(22)] if 22 in alone else alone
        assert answer == cut


def test_greedy_answers_stop_before_the_end_token():
    torch.manual_seed(3)
    model = GPT(TINY).eval()
    written = generate(model, torch.tensor([[1, 2]]), 6, temperature=0.0)[0, 2:].tolist()
    end = written[2]  # call the third token written the end token: the answer is what comes before it
    assert greedy_responses(model, [[1, 2]], max_new_tokens=6, end_id=end) == [written[: written.index(end)]]


def test_sampled_continuations_are_each_prompts_own_samples_cut_after_the_end_token():
    torch.manual_seed(4)
    model = GPT(TINY).eval()
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8]]
    texts = continuations(model, prompts, 6, end_id=5, samples=4, temperature=1.0,
                          generator=torch.Generator().manual_seed(0))
    assert [len(samples) for samples in texts] == [4, 4, 4]
    for samples in texts:
        for text in samples:
            assert 1 <= len(text) <= 6
            assert 5 not in text[:-1]  # cut just after the first end token, which stays
            assert text[-1] == 5 or len(text) == 6
    # the two prompts of length 3 were decoded in one batch of 8: what the second wrote is what it writes
    # alone when the same random draws come to it, after the first prompt's 4 rows
    draw = torch.Generator().manual_seed(0)
    batch = torch.tensor([[1, 2, 3]] * 4 + [[6, 7, 8]] * 4)
    written = generate(model, batch, 6, temperature=1.0, generator=draw)[:, 3:].tolist()
    cut = [w[: w.index(5) + 1] if 5 in w else w for w in written]
    assert texts[0] == cut[:4] and texts[2] == cut[4:]


def test_greedy_continuations_keep_the_end_token_that_greedy_answers_drop():
    torch.manual_seed(3)
    model = GPT(TINY).eval()
    written = generate(model, torch.tensor([[1, 2]]), 6, temperature=0.0)[0, 2:].tolist()
    end = written[2]
    assert continuations(model, [[1, 2]], 6, end_id=end) == [[written[: written.index(end) + 1]]]


@pytest.mark.parametrize(("examples", "prompt_lengths", "match"), [
    ([[1, 2]], [1, 1], "one prompt length per example"),
    ([], [], "at least one example"),
    ([[1, 2]], [2], "shorter than its example"),
    ([[1, 2]], [0], "at least 1"),
])  # fmt: skip
def test_bad_batches_are_refused_with_the_reason(examples, prompt_lengths, match):
    with pytest.raises(ValueError, match=match):
        sft_batch(examples, prompt_lengths, pad_id=0)
