"""T5 span corruption and BART text infilling: exact corruption rates, span statistics within tight bounds, and
inputs plus targets that give back the original text."""

import math
import random
import statistics

import pytest

from minformers.denoising import poisson, restore_spans, span_corruption, text_infilling

SENTINELS = list(range(1, 40))  # ids the texts below never use
MASK = 0


def spans_of(inputs, targets):
    """The lengths of the hidden spans, read from the targets."""
    lengths, current = [], None
    for token in targets:
        if token in SENTINELS:
            if current is not None:
                lengths.append(current)
            current = 0
        else:
            current += 1
    return lengths


@pytest.mark.parametrize("length", [2, 5, 20, 100, 512])
def test_span_corruption_restores_exactly_and_hides_the_right_share(length):
    rng = random.Random(length)
    for _ in range(200):
        tokens = [rng.randrange(100, 200) for _ in range(length)]
        inputs, targets = span_corruption(tokens, SENTINELS, rng)
        assert restore_spans(inputs, targets, SENTINELS) == tokens
        lengths = spans_of(inputs, targets)
        assert all(n > 0 for n in lengths) and sum(lengths) == min(max(round(length * 0.15), 1), length - 1)
        assert sum(token in SENTINELS for token in inputs) == len(lengths)  # one sentinel per span


def test_span_corruption_statistics():
    """On 512-token texts: exactly 77 noise tokens (15%) in round(77 / 3) = 26 spans, so a mean span of 2.96;
    spans start everywhere, and both ends of the text are sometimes noise."""
    rng = random.Random(0)
    starts_with_noise = ends_with_noise = 0
    all_lengths = []
    for _ in range(400):
        tokens = list(range(100, 612))
        inputs, targets = span_corruption(tokens, SENTINELS, rng)
        lengths = spans_of(inputs, targets)
        assert len(lengths) == 26 and sum(lengths) == 77
        all_lengths += lengths
        starts_with_noise += inputs[0] in SENTINELS
        ends_with_noise += inputs[-1] in SENTINELS
    assert statistics.mean(all_lengths) == pytest.approx(77 / 26)
    assert 150 < ends_with_noise < 250  # about half: the coin between T5's layout and its mirror
    assert 0 < starts_with_noise < ends_with_noise


def test_infilling_masks_the_right_share_and_rebuilds_the_input():
    rng = random.Random(1)
    for length in (1, 3, 10, 64, 300):
        for _ in range(100):
            tokens = [rng.randrange(100, 200) for _ in range(length)]
            result = text_infilling(tokens, MASK, rng)
            assert result.targets == tokens
            rebuilt, position = [], 0
            for start, span in result.spans:
                rebuilt += tokens[position:start] + [MASK]
                position = start + span
            assert rebuilt + tokens[position:] == result.inputs
            assert sum(span for _, span in result.spans) <= round(length * 0.3)
            starts = [start for start, _ in result.spans]
            ends = [start + span for start, span in result.spans]
            assert all(end < next_start for end, next_start in zip(ends, starts[1:], strict=False))  # never touch


def test_infilling_span_lengths_follow_poisson_three():
    """On long texts the budget rarely cuts a span, so the lengths are Poisson(3) draws: mean 3 within 4 standard
    errors, and about e^-3 = 5% of spans empty (a bare inserted mask)."""
    rng = random.Random(2)
    lengths = [span for _ in range(200) for _, span in text_infilling(list(range(1000)), MASK, rng).spans]
    error = math.sqrt(3 / len(lengths))
    assert abs(statistics.mean(lengths) - 3) < 4 * error, (statistics.mean(lengths), len(lengths))
    empty = sum(span == 0 for span in lengths) / len(lengths)
    assert abs(empty - math.exp(-3)) < 4 * math.sqrt(math.exp(-3) / len(lengths))
    masked = [sum(span for _, span in text_infilling(list(range(1000)), MASK, rng).spans) for _ in range(50)]
    assert all(total == 300 for total in masked)


def test_poisson_mean_and_variance():
    rng = random.Random(3)
    draws = [poisson(3.0, rng) for _ in range(20_000)]
    assert statistics.mean(draws) == pytest.approx(3.0, abs=0.05)
    assert statistics.variance(draws) == pytest.approx(3.0, abs=0.15)


@pytest.mark.parametrize("call, match", [
    (lambda: span_corruption([5], SENTINELS, random.Random(0)), "at least 2"),
    (lambda: span_corruption(list(range(100, 200)), [1, 2], random.Random(0)), "sentinels"),
    (lambda: span_corruption([5, 6], SENTINELS, random.Random(0), noise_density=1.5), "noise_density"),
    (lambda: text_infilling([], MASK, random.Random(0)), "len"),
    (lambda: text_infilling([5], MASK, random.Random(0), mask_ratio=0.0), "mask_ratio"),
])  # fmt: skip
def test_bad_arguments_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
