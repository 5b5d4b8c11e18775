"""Fine-tuning the shared encoder: it is trained once and then loaded, the control starts from the seed's random
weights, and a run scores every dev sentence. A small corpus and a one-layer run stand in for the book's."""

import pytest
import torch

from minformers.finetuning import fit_linear_probe
from minformers.recipes import bert_classifier, bert_pretraining, news
from minformers.recipes.bert_classifier import (
    EncoderFineTuneRun,
    TopicFineTuneRun,
    encoder_classifier,
    fine_tune_encoder_on_reviews,
    fine_tune_encoder_on_topics,
)
from minformers.recipes.bert_pretraining import PretrainingRun
from minformers.recipes.news import news_corpus
from minformers.recipes.transfer import MeanPoolClassifier
from minformers.train import TrainConfig

torch.set_num_threads(1)

SMALL_RUN = PretrainingRun.roberta(schedule=TrainConfig(steps=6, lr=2e-3, warmup_steps=1, eval_every=3),
                                   batch_size=8, validation_size=16, model_changes=(("n_layers", 1),))
SHORT = TrainConfig(steps=4, lr=1e-3, warmup_steps=1, eval_every=2)


@pytest.fixture
def small_encoder(monkeypatch):
    corpus = news_corpus(vocab_size=800, max_len=24, article_stride=12)
    for module in (bert_pretraining, bert_classifier):
        monkeypatch.setattr(module, "ENCODER_RUN", SMALL_RUN)
    for module in (bert_pretraining, bert_classifier, news):
        monkeypatch.setattr(module, "news_corpus", lambda: corpus)
    news.topic_task.cache_clear()  # built again from the small corpus, and forgotten after
    yield corpus
    news.topic_task.cache_clear()


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


def test_shared_encoder_is_trained_once_then_loaded_quietly(small_encoder, monkeypatch, capsys):
    first = bert_pretraining.shared_encoder()

    def no_training(*args, **kwargs):
        raise AssertionError("a later page must load the shared encoder, not train it again")

    monkeypatch.setattr(PretrainingRun, "losses", no_training)
    capsys.readouterr()
    second = bert_pretraining.shared_encoder()
    assert capsys.readouterr() == ("", "")  # no build talk on the page that loads it
    assert not second.training and same_weights(first, second)


def test_classifier_starts_from_the_shared_body_or_the_seed_s_random_weights(small_encoder):
    encoder = bert_pretraining.shared_encoder()
    pretrained = encoder_classifier(EncoderFineTuneRun(pretrained=True, seed=1))
    assert same_weights(pretrained.bert, encoder.bert) and pretrained.bert is not encoder.bert
    control = encoder_classifier(EncoderFineTuneRun(pretrained=False, seed=1))
    assert not same_weights(control.bert, encoder.bert)
    assert same_weights(control, encoder_classifier(EncoderFineTuneRun(pretrained=False, seed=1)))
    assert not same_weights(control, encoder_classifier(EncoderFineTuneRun(pretrained=False, seed=2)))
    mean_head = encoder_classifier(EncoderFineTuneRun(pretrained=True, seed=1, pooling="mean"))
    assert isinstance(mean_head, MeanPoolClassifier) and same_weights(mean_head.bert, encoder.bert)
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean'"):
        EncoderFineTuneRun(pooling="max")


def test_a_run_scores_every_dev_sentence_and_prints_nothing(small_encoder, capsys):
    result = fine_tune_encoder_on_reviews(EncoderFineTuneRun(pretrained=True, seed=1, schedule=SHORT))
    assert capsys.readouterr() == ("", "")
    assert result.dev_correct.dtype == torch.bool and len(result.dev_correct) == 1056
    assert result.history.eval_steps == [2, 4]
    assert result.history.last_eval("dev_accuracy") == pytest.approx(result.dev_correct.float().mean().item())


def test_a_given_body_is_the_starting_point_and_the_head_still_follows_the_seed(small_encoder):
    body = bert_pretraining.shared_encoder().bert  # a body trained further would come in the same way
    classifier = encoder_classifier(EncoderFineTuneRun(pretrained=True, seed=1, pooling="mean"), body)
    assert classifier.bert is body
    other_seed = encoder_classifier(EncoderFineTuneRun(pretrained=True, seed=2, pooling="mean"), body)
    assert not same_weights(classifier.classifier, other_seed.classifier)


def test_the_topic_task_holds_only_articles_the_encoder_never_read(small_encoder):
    task = news.topic_task()
    read = {article["text"] for article in small_encoder.articles}
    unseen = {article["text"] for article in news.distinct_articles()} - read
    assert len(task.labels) == len(unseen)
    pool = {row for rows in task.pool for row in rows}
    selection, scoring = set(task.selection.tolist()), set(task.scoring.tolist())
    assert not (pool & selection or pool & scoring or selection & scoring)
    assert len(pool | selection | scoring) == len(task.labels)
    rows = task.labelled(per_topic=3, seed=1)
    assert torch.bincount(task.labels[rows]).tolist() == [3] * len(task.topics)
    assert set(rows.tolist()) <= pool and torch.equal(rows, task.labelled(per_topic=3, seed=1))
    with pytest.raises(ValueError, match="per_topic must be 1 to"):
        task.labelled(per_topic=10_000, seed=1)


def test_a_topic_run_scores_its_split_and_probe_first_needs_the_mean_head(small_encoder):
    run = TopicFineTuneRun(seed=1, per_topic=2, split="selection", schedule=SHORT, probe_first=True)
    result = fine_tune_encoder_on_topics(run)
    assert len(result.dev_correct) == len(news.topic_task().selection)
    with pytest.raises(ValueError, match="probe_first needs pooling='mean'"):
        TopicFineTuneRun(pooling="cls", probe_first=True)
    with pytest.raises(ValueError, match="split must be"):
        TopicFineTuneRun(split="test")


def test_the_fitted_probe_reads_raw_features_whatever_their_scale():
    # the standardisation is folded into the layer: shifting and scaling the features
    # changes neither the probe's verdicts nor how well it separates the classes
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(60) % 3
    features = torch.randn(60, 4, generator=generator) + labels[:, None].float()
    probe = fit_linear_probe(features, labels)
    moved = fit_linear_probe(features * 1000 + 5, labels)
    assert torch.equal(probe(features).argmax(-1), moved(features * 1000 + 5).argmax(-1))
    assert (probe(features).argmax(-1) == labels).float().mean() > 0.8
