"""GPT-1's classifier: the input format, the head reading the extract token, the auxiliary loss over text pieces
only, L3 in the shared classifier loop, and the review corpus that pretraining reads."""

import pytest
import torch
from torch import nn

from minformers.bpe import ByteBPETokenizer, train_bpe
from minformers.finetuning import fit_classifier
from minformers.gpt import GPT, GPTConfig
from minformers.recipes.gpt_classifier import (
    CLASSIFY,
    END,
    SPECIAL_TOKENS,
    FineTuneRun,
    GPTClassifier,
    classifier_for,
    encode_for_classifier,
    fine_tune_on_reviews,
    review_corpus,
    text_lm_loss,
)
from minformers.recipes.language_model_run import LMRun, train_language_model
from minformers.support import data
from minformers.train import TrainConfig

torch.set_num_threads(1)
VOCAB, MERGES = train_bpe("a good film, a bad film, a long film", 270, special_tokens=SPECIAL_TOKENS)
TOKENIZER = ByteBPETokenizer(VOCAB, MERGES, special_tokens=SPECIAL_TOKENS)
END_ID, CLASSIFY_ID = TOKENIZER.encode(END)[0], TOKENIZER.encode(CLASSIFY)[0]


def test_encoding_cuts_the_text_and_keeps_the_extract_token():
    ids, lengths = encode_for_classifier(TOKENIZER, ["a good film, a bad film", "film"], max_len=5)
    assert lengths.tolist() == [5, len(TOKENIZER.encode("film")) + 2]
    assert ids[0].tolist() == [END_ID, *TOKENIZER.encode("a good film, a bad film")[:3], CLASSIFY_ID]
    assert ids[1, lengths[1] - 1] == CLASSIFY_ID and (ids[1, lengths[1]:] == END_ID).all()
    with pytest.raises(TypeError, match="sequence of strings"):
        encode_for_classifier(TOKENIZER, "film", max_len=5)


def make_classifier():
    torch.manual_seed(0)
    return GPTClassifier(GPT(GPTConfig.tiny(vocab_size=TOKENIZER.vocab_size, n_layers=1, max_len=16))).eval()


def test_padding_changes_neither_the_logits_nor_the_auxiliary_loss():
    """The head reads position length-1 and the causal mask hides what follows it, so whatever fills the padding
    cannot matter; the loss must leave the padding out too."""
    model = make_classifier()
    ids, lengths = encode_for_classifier(TOKENIZER, ["a good film", "a long film, a bad film"], max_len=16)
    noisy = ids.clone()
    for row, length in enumerate(lengths):
        noisy[row, length:] = torch.randint(0, TOKENIZER.vocab_size, (ids.shape[1] - length,))
    clean, dirty = model(ids, lengths), model(noisy, lengths)
    torch.testing.assert_close(clean.logits, dirty.logits)
    torch.testing.assert_close(clean.lm_loss, dirty.lm_loss)
    alone = model(ids[:1, : lengths[0]], lengths[:1])  # the short row without any padding at all
    torch.testing.assert_close(alone.logits, clean.logits[:1], atol=1e-5, rtol=1e-5)


def test_auxiliary_loss_averages_over_text_pieces_only():
    logits = torch.randn(1, 6, 11, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[0, 5, 6, 7, 1, 0]])  # END, three pieces, CLASSIFY, padding
    pieces = [-torch.log_softmax(logits[0, t - 1], dim=-1)[ids[0, t]] for t in (1, 2, 3)]
    torch.testing.assert_close(text_lm_loss(logits, ids, torch.tensor([5])), torch.stack(pieces).mean())


def test_lengths_are_checked():
    model = make_classifier()
    ids, lengths = encode_for_classifier(TOKENIZER, ["a good film"], max_len=16)
    with pytest.raises(ValueError, match="lengths"):
        model(ids, lengths + 1)


def test_l3_weights_the_language_model_loss_and_logs_both_terms():
    ids, lengths = encode_for_classifier(TOKENIZER, ["a good film", "a bad film"] * 4, max_len=16)
    labels = torch.tensor([1, 0] * 4)
    schedule = TrainConfig(steps=2, lr=1e-3, warmup_steps=1, eval_every=2)
    history = fit_classifier(make_classifier(), (ids, lengths), labels, (ids, lengths), labels, schedule,
                             batch_size=4, progress=False, lm_weight=0.5)
    train = history.train
    for total, classifier, lm in zip(train["loss"], train["classifier_loss"], train["lm_loss"], strict=True):
        assert total == pytest.approx(classifier + 0.5 * lm, rel=1e-5)
    assert set(history.eval) == {"dev_loss", "dev_accuracy", "dev_lm_loss"}
    with pytest.raises(ValueError, match="lm_weight needs a model whose output has .lm_loss"):
        fit_classifier(nn.Linear(3, 2), (torch.randn(8, 3),), labels, (torch.randn(8, 3),), labels, schedule,
                       batch_size=4, progress=False, lm_weight=0.5)


def test_review_corpus_keeps_the_extract_token_out_of_pretraining():
    corpus = review_corpus()
    end, classify = (corpus.tokenizer.encode(token)[0] for token in SPECIAL_TOKENS)
    assert not (corpus.train_ids == classify).any() and not (corpus.validation_ids == classify).any()
    assert int((corpus.train_ids == end).sum()) == len(data.movie_review_splits()["train"])  # one per sentence
    assert corpus.tokenizer.vocab_size == 2048


# A pretraining of two steps: enough to give a body that differs from its random start, in a second.
TINY_PRETRAINING = LMRun(schedule=TrainConfig(steps=2, lr=1e-3, warmup_steps=1, eval_every=2), batch_size=2,
                         sample_length=0, model_changes=(("n_layers", 1), ("d_model", 32), ("n_heads", 2),
                                                         ("d_ff", 64), ("max_len", 16)))
TINY_FINE_TUNE = TrainConfig(steps=2, lr=1e-3, warmup_steps=1, eval_every=2)


def test_classifier_for_loads_the_pretrained_body_or_the_seeds_random_one():
    language_model, _ = train_language_model(review_corpus(), TINY_PRETRAINING, progress=False)
    pretrained = classifier_for(FineTuneRun(TINY_PRETRAINING, TINY_FINE_TUNE, seed=1))
    for name, weight in language_model.state_dict().items():
        assert torch.equal(pretrained.gpt.state_dict()[name], weight)
    again, other = (classifier_for(FineTuneRun(TINY_PRETRAINING, TINY_FINE_TUNE, seed=s)) for s in (1, 2))
    assert torch.equal(again.head.weight, pretrained.head.weight)
    assert not torch.equal(other.head.weight, pretrained.head.weight)
    control = classifier_for(FineTuneRun(TINY_PRETRAINING, TINY_FINE_TUNE, seed=1, pretrained=False))
    embedding = "token_embedding.weight"
    assert not torch.equal(control.gpt.state_dict()[embedding], language_model.state_dict()[embedding])


def test_fine_tune_on_reviews_scores_every_dev_sentence(capsys):
    result = fine_tune_on_reviews(FineTuneRun(TINY_PRETRAINING, TINY_FINE_TUNE, lm_weight=0.5, seed=1,
                                              classify_len=8))
    dev = data.movie_review_splits()["dev"]
    assert result.dev_correct.shape == (len(dev),) and result.dev_correct.dtype == torch.bool
    # the final model's verdicts are the ones its last evaluation scored
    assert result.dev_correct.float().mean().item() == pytest.approx(result.history.last_eval("dev_accuracy"))
    assert set(result.history.eval) == {"dev_loss", "dev_accuracy", "dev_lm_loss"}
    assert capsys.readouterr() == ("", "")  # quiet: it runs on worker processes
