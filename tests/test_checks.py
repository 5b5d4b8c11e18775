"""Every exercise check passes a correct answer and fails the stub, the lib's own solution and plausible mistakes."""

import math

import pytest
import torch
import torch.nn.functional as F

from minformers import attention, checks, masks


# Correct answers, written differently from the lib (loops rather than broadcasting) so they test the check.
def loop_sliding_window_mask(t, window):
    mask = torch.zeros(t, t, dtype=torch.bool)
    for query in range(t):
        for key in range(max(0, query - window + 1), query + 1):
            mask[query, key] = True
    return mask


def explicit_attention(q, k, v, mask):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return torch.einsum("...qk,...kd->...qd", weights, v)


# Plausible wrong answers a learner might write.
def off_by_one_window(t, window):  # lets each query see window + 1 keys
    return loop_sliding_window_mask(t, window + 1)


def band_not_causal(t, window):  # forgets causality: sees the future too
    distance = torch.arange(t)[:, None] - torch.arange(t)[None, :]
    return distance.abs() < window


def float_mask(t, window):
    return loop_sliding_window_mask(t, window).float()


def unscaled_attention(q, k, v, mask):
    return explicit_attention(q * math.sqrt(q.shape[-1]), k, v, mask)


def nan_on_empty_rows(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def stub_mask(t, window):
    raise NotImplementedError("True where key j is one of the `window` most recent positions up to query i")


def stub_attention(q, k, v, mask):
    raise NotImplementedError("softmax(q k^T / sqrt(d)) v")


def calls_lib_mask(t, window):
    return masks.sliding_window_mask(t, window)


def calls_lib_attention(q, k, v, mask):
    return attention.scaled_dot_product_attention(q, k, v, mask)


def calls_torch_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)


CHECKS = {
    "mask": (checks.check_sliding_window_mask, loop_sliding_window_mask, stub_mask),
    "attention": (checks.check_attention, explicit_attention, stub_attention),
}

WRONG = [
    (checks.check_sliding_window_mask, off_by_one_window, "values differ"),
    (checks.check_sliding_window_mask, band_not_causal, "values differ"),
    (checks.check_sliding_window_mask, float_mask, "expected dtype torch.bool"),
    (checks.check_attention, unscaled_attention, "values differ"),
    (checks.check_attention, nan_on_empty_rows, "fully masked query row"),
    (checks.check_sliding_window_mask, calls_lib_mask, "calls the library's own solution"),
    (checks.check_attention, calls_lib_attention, "calls the library's own solution"),
    (checks.check_attention, calls_torch_attention, "calls the library's own solution"),
]


@pytest.mark.parametrize("name", CHECKS)
def test_check_passes_a_correct_answer(name, capsys):
    check, correct, _ = CHECKS[name]
    check(correct)
    assert capsys.readouterr().out.startswith("ok: ")


@pytest.mark.parametrize("name", CHECKS)
def test_check_fails_the_stub_and_shows_its_hint(name):
    check, _, stub = CHECKS[name]
    with pytest.raises(checks.CheckFailed, match="not attempted yet"):
        check(stub)


@pytest.mark.parametrize("check, wrong, reason", WRONG, ids=[w.__name__ for _, w, _ in WRONG])
def test_check_fails_a_wrong_answer_and_says_why(check, wrong, reason):
    with pytest.raises(checks.CheckFailed, match=reason):
        check(wrong)


def test_failure_message_names_case_expected_and_received():
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_sliding_window_mask(off_by_one_window)
    message = str(failure.value)
    assert "case 'window 1: each token sees only itself'" in message
    assert "expected tensor of shape (5, 5)" in message and "received tensor" in message


def test_failure_message_never_shows_reference_source():
    import inspect

    reference_lines = [line.strip() for line in inspect.getsource(masks.sliding_window_mask).splitlines()]
    code_lines = [line for line in reference_lines if line and not line.startswith(('"', "#", "def"))]
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_sliding_window_mask(band_not_causal)
    assert not any(line in str(failure.value) for line in code_lines if len(line) > 12)


def test_references_work_again_after_a_check():
    with pytest.raises(checks.CheckFailed):
        checks.check_attention(calls_lib_attention)
    q = k = v = torch.randn(1, 3, 4)
    torch.testing.assert_close(attention.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v))
    assert masks.sliding_window_mask(3, 1).equal(torch.eye(3, dtype=torch.bool))
