"""GPT-1's input transformations: the sequences they build, the head's two ways of
combining them, the review tasks' labels and shortcuts, and the zero-shot score."""

import pytest
import torch

from minformers.bpe import ByteBPETokenizer, train_bpe
from minformers.gpt import GPT, GPTConfig
from minformers.recipes.gpt_classifier import SPECIAL_TOKENS
from minformers.recipes.gpt_structured import (
    GPTStructuredHead,
    encode_sequences,
    review_pairs,
    shuffled_endings,
    text_log_likelihoods,
)


@pytest.fixture(scope="module")
def tokenizer():
    vocab, merges = train_bpe(
        "good film bad film a plot", 270, special_tokens=SPECIAL_TOKENS
    )
    return ByteBPETokenizer(vocab, merges, special_tokens=SPECIAL_TOKENS)


def decoded(tokenizer, ids, lengths):
    return [
        tokenizer.decode(row[:n])
        for row, n in zip(ids.tolist(), lengths.tolist(), strict=True)
    ]


def test_sequences_join_segments_with_end_and_close_with_the_extract_token(tokenizer):
    pair = [("good", "bad film"), ("bad film", "good")]
    ids, lengths = encode_sequences(tokenizer, [pair], max_len=20)
    assert ids.shape[:2] == (1, 2)
    assert decoded(tokenizer, ids[0], lengths[0]) == [
        "<|endoftext|>good<|endoftext|>bad film<|classify|>",
        "<|endoftext|>bad film<|endoftext|>good<|classify|>",
    ]
    long_pair = [("good film bad film", "a plot a plot")]
    ids, lengths = encode_sequences(tokenizer, [long_pair], max_len=7)
    assert lengths.max() <= 7  # each segment is cut to its share
    assert decoded(tokenizer, ids[0], lengths[0])[0].endswith("<|classify|>")


def test_the_sum_head_ignores_the_order_and_the_choice_head_scores_each(tokenizer):
    torch.manual_seed(0)
    body = GPT(GPTConfig.tiny(vocab_size=tokenizer.vocab_size, max_len=20))
    pair = [("good", "bad film"), ("bad film", "good")]
    ids, lengths = encode_sequences(tokenizer, [pair], max_len=20)
    similarity = GPTStructuredHead(body, "sum").eval()
    # the two orders are added, so the pair has no order
    torch.testing.assert_close(
        similarity(ids, lengths), similarity(ids.flip(1), lengths.flip(1))
    )
    choice = GPTStructuredHead(body, "choose").eval()
    scores = choice(ids, lengths)
    assert scores.shape == (1, 2)
    # each candidate is scored alone: swapping them swaps the scores
    torch.testing.assert_close(choice(ids.flip(1), lengths.flip(1)), scores.flip(1))


def test_similarity_pairs_come_in_both_orders_with_their_labels():
    rows, labels = review_pairs("dev")
    assert len(rows) == len(labels) and set(labels.tolist()) == {0, 1}
    assert all(first == second[::-1] for first, second in rows)


@pytest.mark.parametrize("keep_last", [True, False])
def test_endings_hold_the_same_words_and_the_label_points_at_the_written_one(keep_last):
    rows, labels = shuffled_endings("dev", keep_last=keep_last)
    assert 0.4 < labels.float().mean().item() < 0.6
    for row, label in zip(rows[:300], labels[:300].tolist(), strict=True):
        (context, written), (_, other) = row[label], row[1 - label]
        assert sorted(written.split()) == sorted(other.split()) and written != other
        assert row[0][0] == row[1][0] == context
        if keep_last:
            assert written.split()[-1] == other.split()[-1]


def test_zero_shot_scores_are_the_language_models_log_probabilities(tokenizer):
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=tokenizer.vocab_size, max_len=20)).eval()
    texts = ["good film", "a plot a plot bad"]
    scores = text_log_likelihoods(model, tokenizer, texts)
    end = tokenizer.encode(SPECIAL_TOKENS[0])[0]
    for text, score in zip(texts, scores, strict=True):
        ids = torch.tensor([[end, *tokenizer.encode(text), end]])
        log_probs = model(ids)[0, :-1].log_softmax(-1)
        expected = log_probs.gather(1, ids[0, 1:, None]).sum()
        torch.testing.assert_close(score, expected)


def test_bad_arguments_are_refused(tokenizer):
    body = GPT(GPTConfig.tiny(vocab_size=tokenizer.vocab_size))
    with pytest.raises(ValueError, match="combine must be"):
        GPTStructuredHead(body, "max")
    with pytest.raises(ValueError, match="same number of sequences"):
        encode_sequences(tokenizer, [[("good",)], [("good",), ("bad",)]], max_len=10)
    with pytest.raises(ValueError, match="no room"):
        encode_sequences(tokenizer, [[("good", "bad", "film")]], max_len=5)
