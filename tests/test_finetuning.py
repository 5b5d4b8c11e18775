"""Sentence classification helpers: encoding with truncation, frozen features computed in length-sorted batches,
and the classifier loop on a problem with a known answer."""

import pytest
import torch
from torch import nn

from minformers.bert import BertConfig, BertModel
from minformers.finetuning import (
    count_trainable,
    encode_sentences,
    fine_tune_and_score,
    fit_classifier,
    linear_probe_accuracy,
    linear_probe_predictions,
    predict,
    sentence_features,
)
from minformers.objectives import pad
from minformers.similarity import mean_pool
from minformers.train import TrainConfig
from minformers.wordpiece import WordPieceTokenizer

torch.set_num_threads(1)
TOKENIZER = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "##s", "."])


def test_encode_sentences_cuts_pieces_and_keeps_the_closing_sep():
    ids, attention_mask = encode_sentences(TOKENIZER, ["good films .", "bad", ""], max_len=4)
    assert ids.tolist() == [[2, 5, 7, 3], [2, 6, 3, 0], [2, 3, 0, 0]]
    assert attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 0, 0]]


@pytest.mark.parametrize("call, match", [
    (lambda: encode_sentences(TOKENIZER, "good film", 8), "sequence of strings"),
    (lambda: encode_sentences(TOKENIZER, ["good"], 2), "max_len"),
])  # fmt: skip
def test_encode_sentences_rejects_bad_arguments(call, match):
    with pytest.raises((TypeError, ValueError), match=match):
        call()


def test_features_in_sorted_batches_equal_one_unsorted_pass():
    """Sorting by length and cutting each batch's padding must change nothing but float rounding, and the rows
    must come back in the caller's order."""
    torch.manual_seed(0)
    body = BertModel(BertConfig.tiny(vocab_size=50, max_len=16)).eval()
    lengths = torch.randint(2, 17, (23,)).tolist()
    ids, attention_mask = pad([torch.randint(5, 50, (n,)).tolist() for n in lengths], 0)
    with torch.no_grad():
        whole = body(ids, attention_mask=attention_mask)
    expected = {"cls": whole.pooled, "mean": mean_pool(whole.hidden_states, attention_mask)}
    for pooling, wanted in expected.items():
        got = sentence_features(body, ids, attention_mask, pooling=pooling, batch_size=4)
        torch.testing.assert_close(got, wanted, atol=1e-5, rtol=0)


def test_features_refuse_left_padding_and_unknown_pooling():
    body = BertModel(BertConfig.tiny(vocab_size=50, max_len=16))
    ids = torch.tensor([[0, 0, 7, 8]])
    with pytest.raises(ValueError, match="right-padded"):
        sentence_features(body, ids, (ids != 0).long())
    with pytest.raises(ValueError, match="pooling"):
        sentence_features(body, ids, torch.ones_like(ids), pooling="max")


def test_fit_classifier_learns_a_separable_problem():
    """Two Gaussian clouds: a linear probe must separate them almost perfectly, and report it on dev."""
    draw = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (400,), generator=draw)
    features = torch.randn(400, 8, generator=draw) + 3.0 * labels[:, None].float()
    torch.manual_seed(0)
    probe = nn.Linear(8, 2)
    schedule = TrainConfig(steps=100, lr=5e-2, warmup_steps=10, eval_every=50)
    history = fit_classifier(probe, (features[:300],), labels[:300], (features[300:],), labels[300:], schedule,
                             progress=False)
    assert history.eval_steps == [50, 100]
    assert history.last_eval("dev_accuracy") > 0.95
    assert (predict(probe, (features[300:],)) == labels[300:]).float().mean() > 0.95
    assert count_trainable(probe) == 8 * 2 + 2


def test_fit_classifier_rejects_misaligned_inputs():
    with pytest.raises(ValueError, match="one row per label"):
        fit_classifier(nn.Linear(2, 2), (torch.zeros(5, 2),), torch.zeros(4, dtype=torch.long), (torch.zeros(3, 2),),
                       torch.zeros(3, dtype=torch.long), TrainConfig(steps=2, warmup_steps=1))


def test_fit_classifier_seed_sets_the_batch_order():
    """The same seed repeats a run exactly; another seed draws other batches, so the same start ends elsewhere."""
    draw = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (64,), generator=draw)
    features = torch.randn(64, 4, generator=draw)
    schedule = TrainConfig(steps=5, lr=1e-2, warmup_steps=1, eval_every=5)

    def losses(seed: int) -> list[float]:
        torch.manual_seed(0)
        return fit_classifier(nn.Linear(4, 2), (features,), labels, (features,), labels, schedule, batch_size=8,
                              progress=False, seed=seed).train["loss"]

    assert losses(3) == losses(3)
    assert losses(3) != losses(4)
    with pytest.raises(ValueError, match="seed"):
        losses(-1)


def test_probe_verdicts_are_the_probe_s_accuracy_one_review_at_a_time():
    generator = torch.Generator().manual_seed(0)
    train_x, dev_x = torch.randn(40, 3, generator=generator), torch.randn(30, 3, generator=generator)
    train_y, dev_y = (train_x[:, 0] > 0).long(), (dev_x[:, 0] + 0.5 * dev_x[:, 1] > 0).long()  # dev: a shifted rule
    predicted = linear_probe_predictions(train_x, train_y, dev_x)
    assert predicted.shape == (30,) and set(predicted.tolist()) <= {0, 1}
    assert (predicted == dev_y).float().mean().item() == linear_probe_accuracy(train_x, train_y, dev_x, dev_y) < 1


def test_fine_tune_and_score_flags_the_final_models_dev_verdicts_from_its_last_evaluation():
    # the verdicts come from the last evaluation, not from another pass: they must be the final model's
    torch.manual_seed(0)
    features, labels = torch.randn(64, 4), torch.randint(0, 2, (64,))
    model = nn.Linear(4, 2)
    schedule = TrainConfig(steps=7, lr=0.05, warmup_steps=1, eval_every=5)  # evaluations at steps 5 and 7
    result = fine_tune_and_score(model, (features[:48],), labels[:48], (features[48:],), labels[48:], schedule)
    assert result.history.eval_steps == [5, 7]
    assert torch.equal(result.dev_correct, predict(model, (features[48:],)) == labels[48:])
    assert result.dev_correct.float().mean().item() == pytest.approx(result.history.last_eval("dev_accuracy"))
