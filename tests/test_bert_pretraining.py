"""The tiny-BERT pretraining recipe: the corpus split, the batches (BERT's masking and NSP conventions), and a short
run that resumes from its checkpoint."""

from dataclasses import replace

import pytest
import torch

from minformers.bert import IGNORE_INDEX, BertConfig, BertForPreTraining
from minformers.objectives import SentencePair, split_sentences
from minformers.recipes import bert_pretraining
from minformers.recipes.bert_pretraining import (
    PretrainingRun,
    masking_shares,
    prediction_scores,
    pretrain_tiny_bert,
    pretraining_batch,
    pretraining_losses,
    unigram_log_frequencies,
)
from minformers.recipes.news import SPECIALS, _news_corpus, news_corpus
from minformers.train import TrainConfig
from minformers.wordpiece import WordPieceTokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpus():
    return news_corpus(vocab_size=800, max_len=24, article_stride=12)


def test_corpus_respects_its_settings(corpus):
    assert corpus.tokenizer.vocab_size == 800
    assert corpus.tokenizer.id_to_token[: len(SPECIALS)] == list(SPECIALS)
    assert len(corpus.articles) == len(range(0, 2092, 12))  # 2,092 distinct texts among the 2,225 articles
    for pair in corpus.train_pairs + corpus.validation_pairs:
        assert len(pair.input_ids) <= 24 and len(pair.segment_ids) == len(pair.input_ids)
    # A vocabulary trained on the articles spells frequent words whole.
    assert corpus.tokenizer.tokenize("the government said") == ["the", "government", "said"]


def test_validation_pairs_come_from_held_out_articles(corpus):
    """Every tenth article is held out: its sentences start validation pairs and no training pair."""
    starts = {tuple(pair.input_ids[1 : pair.segment_ids.index(1) - 1]) for pair in corpus.train_pairs}
    held_out = {tuple(pair.input_ids[1 : pair.segment_ids.index(1) - 1]) for pair in corpus.validation_pairs}
    # Identical articles are dropped (BBC's folder holds 133 texts twice); a few sentences are still shared, by
    # stock phrases and by two write-ups of one story, but a copied article would share dozens.
    shared = starts & held_out
    assert len(shared) <= 0.01 * len(held_out), len(shared)
    assert len(corpus.validation_pairs) > 0.05 * len(corpus.train_pairs)


def test_corpus_is_cached_and_its_vocabulary_reused_from_disk(corpus):
    assert news_corpus(vocab_size=800, max_len=24, article_stride=12) is corpus
    news_corpus.cache_clear()
    again = news_corpus(vocab_size=800, max_len=24, article_stride=12)
    assert again.tokenizer.id_to_token == corpus.tokenizer.id_to_token
    assert [pair.input_ids for pair in again.train_pairs] == [pair.input_ids for pair in corpus.train_pairs]
    # what the disk cache gives back is what a fresh build makes
    fresh = _news_corpus(vocab_size=800, max_len=24, article_stride=12, tokenizer="wordpiece")
    assert again.train_documents == fresh.train_documents
    assert again.validation_pairs == fresh.validation_pairs


def test_pretraining_batch_follows_bert_conventions():
    tokenizer = WordPieceTokenizer([*SPECIALS, *(f"w{i}" for i in range(95))])
    pairs = [SentencePair([2, *range(5, 45), 3, *range(45, 60), 3], [0] * 42 + [1] * 16, is_next=1),
             SentencePair([2, 7, 3, 8, 3], [0, 0, 0, 1, 1], is_next=0)] * 50
    batch = pretraining_batch(tokenizer, pairs, torch.Generator().manual_seed(0))
    assert batch.input_ids.shape == batch.segment_ids.shape == batch.attention_mask.shape == (100, 58)
    assert batch.nsp_labels[:2].tolist() == [0, 1]  # 0 = B follows A
    assert batch.attention_mask[1].tolist() == [1] * 5 + [0] * 53
    chosen = batch.mlm_labels != IGNORE_INDEX
    assert not chosen[batch.attention_mask == 0].any()  # padding is never a target
    original = torch.where(chosen, batch.mlm_labels, batch.input_ids)
    specials = torch.isin(original, torch.arange(len(SPECIALS)))
    assert not (chosen & specials).any()  # nor is [CLS] or [SEP]
    rate = chosen.sum() / (~specials & (batch.attention_mask == 1)).sum()
    assert 0.11 < rate < 0.19  # 15% of about 2,800 ordinary tokens: 4 standard deviations either side
    masked_share = (batch.input_ids[chosen] == tokenizer.special_ids["mask"]).float().mean()
    assert 0.7 < masked_share < 0.9  # 80% of the chosen become [MASK]


def test_a_short_run_learns_and_a_second_call_loads_it(corpus):
    run = PretrainingRun(schedule=TrainConfig(steps=30, lr=2e-3, warmup_steps=3, eval_every=15), batch_size=8,
                         validation_size=32, model_changes=(("n_layers", 1),))
    model, history = pretrain_tiny_bert(corpus, run, progress=False)
    assert not model.training and len(model.bert.layers) == 1
    assert history.eval_steps == [15, 30]
    assert history.train["mlm_loss"][-1] < history.train["mlm_loss"][0]
    again, same_history = pretrain_tiny_bert(corpus, run, progress=False)  # from the finished checkpoint
    assert same_history.train == history.train
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


def test_roberta_blocks_cover_each_article_in_order(corpus):
    run = PretrainingRun.roberta()
    blocks = run.examples(corpus, "validation")
    cls_id, sep_id = corpus.tokenizer.special_ids["cls"], corpus.tokenizer.special_ids["sep"]
    assert all(block.input_ids[0] == cls_id and block.input_ids[-1] == sep_id for block in blocks)
    assert all(len(block.input_ids) <= corpus.max_len and set(block.segment_ids) == {0} for block in blocks)
    stream = [token for block in blocks for token in block.input_ids[1:-1]]
    expected = [token for document in corpus.validation_documents for sentence in document for token in sentence]
    assert stream == expected  # every token once, in order: nothing dropped at block edges
    full = sum(len(block.input_ids) == corpus.max_len for block in blocks)
    assert full >= len(blocks) - len(corpus.validation_documents)  # only an article's last block may be short


def test_static_masking_repeats_a_mask_and_dynamic_masking_does_not(corpus):
    static = PretrainingRun.roberta(masking="static", train_size=4, batch_size=32)
    dynamic = PretrainingRun.roberta(train_size=4, batch_size=32)
    for run, repeats in ((static, True), (dynamic, False)):
        batches = run.batches(corpus)
        masks = {}  # example (its original ids) -> the set of masks it was seen with
        for step in range(3):
            batch = batches(step)
            original = torch.where(batch.mlm_labels != IGNORE_INDEX, batch.mlm_labels, batch.input_ids)
            for row in range(len(original)):
                key = tuple(original[row].tolist())
                masks.setdefault(key, set()).add(tuple((batch.mlm_labels[row] != IGNORE_INDEX).tolist()))
        assert len(masks) == 4  # train_size: only the first 4 examples are drawn
        assert all(len(seen) == 1 for seen in masks.values()) == repeats


def test_data_seed_draws_another_run_and_seed_0_is_the_step_seeded_one(corpus):
    run = PretrainingRun.roberta(batch_size=8)
    same, other = run.batches(corpus), replace(run, data_seed=1).batches(corpus)
    examples = run.examples(corpus, "train")
    chosen = torch.randint(len(examples), (8,), generator=torch.Generator().manual_seed(3))  # step 3's own seed
    batch = same(3)
    original = torch.where(batch.mlm_labels != IGNORE_INDEX, batch.mlm_labels, batch.input_ids)
    for row, index in enumerate(chosen.tolist()):
        block = examples[index].input_ids
        assert original[row, : len(block)].tolist() == block
    assert not torch.equal(batch.input_ids, other(3).input_ids)
    assert torch.equal(other(3).input_ids, replace(run, data_seed=1).batches(corpus)(3).input_ids)
    with pytest.raises(ValueError, match="data_seed"):
        replace(run, data_seed=-1)


def test_length_schedule_keeps_the_tokens_per_step(corpus):
    run = PretrainingRun.roberta(short_len=6, short_fraction=0.5, batch_size=4,
                                 schedule=TrainConfig(steps=10, lr=1e-3, warmup_steps=1, eval_every=10))
    batches = run.batches(corpus)
    short, long = batches(4), batches(5)  # steps 0-4 are the short half
    assert short.input_ids.shape == (4 * 24 // 6, 6) and long.input_ids.shape[0] == 4
    assert long.input_ids.shape[1] <= 24


def test_electra_run_trains_the_discriminator_as_its_body(corpus):
    run = PretrainingRun.electra(schedule=TrainConfig(steps=6, lr=2e-3, warmup_steps=1, eval_every=3), batch_size=8,
                                 validation_size=16, model_changes=(("n_layers", 1),), probe_size=50)
    model, history = pretrain_tiny_bert(corpus, run, progress=False)
    assert model.bert is model.discriminator.bert
    assert {"val_mlm_loss", "val_rtd_loss", "val_rtd_accuracy", "val_replaced", "probe_accuracy"} <= set(history.eval)
    assert 0.05 < history.last_eval("val_replaced") < 0.16  # 15% masked, fewer replaced: some samples are right
    torch.testing.assert_close(torch.tensor(history.train["loss"]),
                               torch.tensor(history.train["mlm_loss"]) + 50 * torch.tensor(history.train["rtd_loss"]))


def test_a_run_from_the_shared_encoder_starts_from_its_weights(corpus, monkeypatch):
    # a random stand-in for the shared encoder, on the small test corpus: the real one takes minutes to train
    torch.manual_seed(1)
    stand_in = BertForPreTraining(PretrainingRun().config(corpus))
    monkeypatch.setattr(bert_pretraining, "shared_encoder", lambda: stand_in)
    monkeypatch.setattr(bert_pretraining, "news_corpus", lambda: corpus)
    mlm = PretrainingRun.roberta(start="shared").model(corpus)
    for name, tensor in stand_in.state_dict().items():  # the MLM head included: an MLM run continues it
        assert torch.equal(mlm.state_dict()[name], tensor), name
    electra = PretrainingRun.electra(start="shared").model(corpus)
    for name, tensor in stand_in.bert.state_dict().items():
        assert torch.equal(electra.bert.state_dict()[name], tensor), name
    assert electra.generator.bert.embeddings.token_embedding is electra.bert.embeddings.token_embedding
    scratch = PretrainingRun.roberta().model(corpus)
    assert not torch.equal(scratch.bert.layers[0].attention.q_proj.weight, mlm.bert.layers[0].attention.q_proj.weight)
    with pytest.raises(ValueError, match="shared encoder"):
        PretrainingRun.roberta(start="shared", model_changes=(("n_layers", 1),)).model(corpus)


@pytest.mark.parametrize("maker", [PretrainingRun, PretrainingRun.electra])
def test_unigram_output_bias_starts_the_mlm_loss_at_the_frequency_floor(corpus, maker):
    """Step 0 with the unigram bias scores what a frequency table scores, where BERT's zero bias starts near log V."""
    unigram, zeros = maker(validation_size=64), maker(validation_size=64, output_bias="zeros")
    batch = pretraining_batch(corpus.tokenizer, unigram.examples(corpus, "validation")[:64],
                              torch.Generator().manual_seed(0))
    log_p = unigram_log_frequencies([example.input_ids for example in unigram.examples(corpus, "train")],
                                    corpus.tokenizer.vocab_size, list(corpus.tokenizer.special_ids.values()))
    floor = -log_p[batch.mlm_labels[batch.mlm_labels != IGNORE_INDEX]].mean().item()
    with torch.no_grad():
        started = {run.output_bias: run.losses(run.model(corpus).eval(), batch)["mlm_loss"].item()
                   for run in (unigram, zeros)}
    # within 0.1 rather than equal: the untrained body adds small random logits (about 0.01 nats for BERT, 0.04
    # for ELECTRA's narrower generator), and random logits raise a loss on average
    assert floor <= started["unigram"] < floor + 0.1
    assert started["zeros"] > floor + 0.5  # near log V: every token equally likely
    assert torch.count_nonzero(zeros.model(corpus).mlm_head.decoder.bias if maker is PretrainingRun
                               else zeros.model(corpus).generator.mlm_head.decoder.bias) == 0
    torch.testing.assert_close(unigram.token_log_frequencies(corpus), log_p)  # the run's own table is the same


def test_validation_batch_is_the_same_every_time_and_follows_the_run_s_masking(corpus):
    run = PretrainingRun(validation_size=64)
    first, again = run.validation_batch(corpus), run.validation_batch(corpus)
    assert first.input_ids.shape[0] == 64 and run.validation_batch(corpus, size=8).input_ids.shape[0] == 8
    assert torch.equal(first.input_ids, again.input_ids) and torch.equal(first.mlm_labels, again.mlm_labels)
    heavy = PretrainingRun(validation_size=64, mask_rate=0.4).validation_batch(corpus)
    assert (heavy.mlm_labels != IGNORE_INDEX).sum() > 2 * (first.mlm_labels != IGNORE_INDEX).sum()


def test_unigram_log_frequencies_count_ordinary_tokens_only():
    log_p = unigram_log_frequencies([[2, 7, 7, 3], [2, 7, 8, 3]], vocab_size=10, special_ids=[0, 1, 2, 3, 4])
    assert log_p.exp().sum().item() == pytest.approx(1.0)
    assert log_p[7] > log_p[8] > log_p[9] == log_p[2]  # seen 3 times, once, never; a special counts as never


@pytest.mark.parametrize("changes, message", [
    ({"sentence_task": "nsp", "objective": "electra"}, "no sentence task"),
    ({"short_fraction": 0.5}, "short_len"),
    ({"masking": "sometimes"}, "masking"),
    ({"output_bias": "random"}, "output_bias"),
    ({"start": "checkpoint"}, "start"),
])
def test_run_refuses_settings_that_do_not_go_together(changes, message):
    with pytest.raises(ValueError, match=message):
        PretrainingRun(**changes)


def test_byte_level_corpus_spells_every_article_exactly():
    corpus = news_corpus(vocab_size=400, max_len=24, article_stride=12, tokenizer="byte_bpe")
    tokenizer = corpus.tokenizer
    assert [tokenizer.special_ids[role] for role in ("pad", "unk", "cls", "sep", "mask")] == [0, 1, 2, 3, 4]
    assert tokenizer.vocab_size == 400
    article = corpus.articles[0]["text"]  # index 0: a validation article
    stream = [token for sentence in corpus.validation_documents[0] for token in sentence]
    assert tokenizer.decode(stream) == " ".join(split_sentences(article))  # nothing lost, no [UNK]
    batch = pretraining_batch(tokenizer, PretrainingRun.roberta().examples(corpus, "train")[:8],
                              torch.Generator().manual_seed(0))
    assert int(batch.input_ids.max()) < 400 and (batch.mlm_labels != IGNORE_INDEX).any()
    with pytest.raises(ValueError, match="tokenizer"):
        news_corpus(tokenizer="sentencepiece")


def test_default_masking_is_bert_s_and_a_run_s_settings_reach_its_batches(corpus):
    default = PretrainingRun.roberta().batches(corpus)(3)
    examples = PretrainingRun.roberta().examples(corpus, "train")
    generator = torch.Generator().manual_seed(3)
    chosen = torch.randint(len(examples), (16,), generator=generator)
    expected = pretraining_batch(corpus.tokenizer, [examples[i] for i in chosen.tolist()], generator)
    assert torch.equal(default.input_ids, expected.input_ids) and torch.equal(default.mlm_labels, expected.mlm_labels)

    mask_id = corpus.tokenizer.special_ids["mask"]
    for split in ((1.0, 0.0, 0.0), (0.8, 0.2, 0.0)):
        batch = PretrainingRun.roberta(mask_rate=0.4, mask_split=split, batch_size=64).batches(corpus)(0)
        predicted = batch.mlm_labels != IGNORE_INDEX
        ordinary = (batch.attention_mask == 1).sum() - 2 * len(batch.input_ids)  # all but [CLS] and [SEP]
        assert 0.35 < predicted.sum() / ordinary < 0.45  # 40% of about 2,000 tokens
        shown_true = (batch.input_ids == batch.mlm_labels) & predicted
        if split[0] == 1.0:
            assert bool((batch.input_ids[predicted] == mask_id).all())
        else:  # nothing is kept: the true token shows only where a random draw hit it (1 in 2,995)
            assert shown_true.sum() <= 2 and 0.1 < (batch.input_ids[predicted] != mask_id).float().mean() < 0.3


@pytest.mark.parametrize("changes, error, message", [
    ({"mask_rate": 0.0}, ValueError, "mask_rate must be in"),
    ({"mask_rate": 1.5}, ValueError, "mask_rate must be in"),
    ({"mask_split": (0.8, 0.1)}, ValueError, "three shares"),
    ({"mask_split": (0.8, 0.3, -0.1)}, ValueError, "three shares"),
    ({"mask_split": (0.8, 0.1, 0.2)}, ValueError, "summing to 1"),
    ({"mask_split": 0.8}, TypeError, "mask_split must be a tuple"),
])
def test_run_refuses_impossible_masking(changes, error, message):
    with pytest.raises(error, match=message):
        PretrainingRun(**changes)


def test_masking_shares_match_the_masks_drawn():
    """Three ordinary ids, so a random draw hits the original one time in three: the formula must count it."""
    tokenizer = WordPieceTokenizer([*SPECIALS, "a", "b", "c"])
    pair = SentencePair([2, *([5, 6, 7] * 10), 3], [0] * 32, is_next=1)
    for rate, split in ((0.15, (0.8, 0.1, 0.1)), (0.4, (0.5, 0.5, 0.0)), (0.3, (0.0, 0.0, 1.0))):
        batch = pretraining_batch(tokenizer, [pair] * 2000, torch.Generator().manual_seed(0), rate, split)
        predicted = batch.mlm_labels != IGNORE_INDEX
        shown = {"predicted": predicted, "shown [MASK]": predicted & (batch.input_ids == 4),
                 "shown the true token": predicted & (batch.input_ids == batch.mlm_labels)}
        shown["shown a wrong token"] = predicted & ~shown["shown [MASK]"] & ~shown["shown the true token"]
        expected = masking_shares(rate, split, n_ordinary=3)
        assert abs(sum(expected.values()) - 2 * rate) < 1e-12  # the three ways to be shown cover the predicted
        for role, where in shown.items():
            share = where.sum().item() / 60_000  # 2,000 rows of 30 ordinary tokens
            assert abs(share - expected[role]) < 4 * (expected[role] * (1 - expected[role]) / 60_000) ** 0.5 + 1e-9
    with pytest.raises(ValueError, match="n_ordinary"):
        masking_shares(0.15, (0.8, 0.1, 0.1), n_ordinary=0)


def test_prediction_scores_agree_with_the_training_loss_and_a_plain_forward(corpus):
    tokenizer = corpus.tokenizer
    batch = pretraining_batch(tokenizer, PretrainingRun.roberta().examples(corpus, "validation")[:64],
                              torch.Generator().manual_seed(0), mask_rate=0.3)
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=tokenizer.vocab_size, n_layers=1)).eval()
    scores = prediction_scores(model, batch, tokenizer)
    with torch.no_grad():
        training = pretraining_losses(model, batch, nsp=False)
        original = torch.where(batch.mlm_labels != IGNORE_INDEX, batch.mlm_labels, batch.input_ids)
        logits = model(original, batch.segment_ids, batch.attention_mask).mlm_logits  # (B, T, V)
    assert abs(scores["all predicted"]["loss"] - training["mlm_loss"].item()) < 1e-5
    assert abs(scores["all predicted"]["accuracy"] - training["mlm_accuracy"].item()) < 1e-6
    seen = ("[MASK]", "a wrong token", "the true token")
    assert sum(scores[kind]["count"] for kind in seen) == scores["all predicted"]["count"]
    weighted = sum(scores[kind]["loss"] * scores[kind]["count"] for kind in seen) / scores["all predicted"]["count"]
    assert abs(weighted - scores["all predicted"]["loss"]) < 1e-4
    predicted = batch.mlm_labels != IGNORE_INDEX
    plain = torch.nn.functional.cross_entropy(logits[predicted], original[predicted]).item()
    assert scores["unmasked"]["count"] == int(predicted.sum()) and abs(scores["unmasked"]["loss"] - plain) < 1e-4
    nothing_random = pretraining_batch(tokenizer, PretrainingRun.roberta().examples(corpus, "validation")[:8],
                                       torch.Generator().manual_seed(0), mask_split=(1.0, 0.0, 0.0))
    empty = prediction_scores(model, nothing_random, tokenizer)["a wrong token"]
    assert empty["count"] == 0 and empty["loss"] != empty["loss"]  # NaN
