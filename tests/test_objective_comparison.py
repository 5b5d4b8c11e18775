"""Four objectives at equal compute: equal-FLOP step counts, the batches each objective makes of the same blocks,
the losses, the FLOP count against its formula, the bodies the downstream tests read, and short runs."""

import math
import random

import pytest
import torch

from minformers.denoising import restore_spans
from minformers.encoder_decoder import EncoderDecoder
from minformers.finetuning import sentence_features
from minformers.gpt import GPT, language_model_loss
from minformers.objectives import IGNORE_INDEX, pad
from minformers.recipes.bert_pretraining import prediction_scores
from minformers.recipes.news import news_corpus
from minformers.recipes.next_word import unigram_loss
from minformers.recipes.objective_comparison import (
    OBJECTIVES,
    CausalBody,
    EncoderBody,
    HeldOutNats,
    MeanPooledClassifier,
    ObjectiveRun,
    _token_nats,
    causal_lm_losses,
    equal_compute_steps,
    gpt_config,
    pretrain,
    span_corruption_batch,
    step_flops,
    t5_config,
)
from minformers.scaling import training_flops_per_token

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def corpus():
    return news_corpus(vocab_size=800, max_len=24, article_stride=12)


def test_equal_compute_steps_rounds_each_share_to_the_nearest_step():
    assert equal_compute_steps({"a": 1e9, "b": 3e9}, 3e11) == {"a": 300, "b": 100}
    assert equal_compute_steps({"a": 6e9, "b": 3e9}, 1e10) == {"a": 2, "b": 3}  # 1.67 up, 3.33 down
    steps = equal_compute_steps({"gpt": 2.438e9, "bert": 1.427e9}, 1e11)
    assert steps == {"gpt": 41, "bert": 70} and all(type(value) is int for value in steps.values())
    for name, cost in {"gpt": 2.438e9, "bert": 1.427e9}.items():  # each total within half a step of the budget
        assert abs(steps[name] * cost - 1e11) <= cost / 2


@pytest.mark.parametrize("flops, budget, message", [
    ({"a": 1e9}, 0, "budget must be > 0"),
    ({"a": 0.0}, 1e9, r"flops_per_step\['a'\] must be > 0"),
    ({"a": 1e9}, 4e8, "less than one step"),
])
def test_equal_compute_steps_refuses_impossible_budgets(flops, budget, message):
    with pytest.raises(ValueError, match=message):
        equal_compute_steps(flops, budget)


def test_span_corruption_batch_by_hand():
    source, decoder_input, target = span_corruption_batch(
        [[2, 10, 11, 12, 13, 14, 15, 16, 17, 3], [2, 5, 3]], [90, 91, 92], random.Random(1), cls_id=2, sep_id=3,
        noise_density=0.25)
    assert source.tolist() == [[2, 90, 12, 13, 14, 15, 16, 17, 3], [2, 5, 3, 0, 0, 0, 0, 0, 0]]
    assert target.tolist() == [[90, 10, 11, 91, 3], [90, 3, 0, 0, 0]]  # a 1-token text is left whole
    assert decoder_input.tolist() == [[2, 90, 10, 11, 91], [2, 90, 3, 0, 0]]  # [CLS], then the target shifted


def test_span_corruption_batch_loses_nothing():
    rng = random.Random(0)
    blocks = [[2, *(rng.randrange(5, 100) for _ in range(rng.randrange(1, 30))), 3] for _ in range(50)]
    sentinels = list(range(100, 108))
    source, _, target = span_corruption_batch(blocks, sentinels, random.Random(3), cls_id=2, sep_id=3)
    for block, row, spans in zip(blocks, source.tolist(), target.tolist(), strict=True):
        inputs = [token for token in row if token != 0][1:-1]  # without [CLS], [SEP] and padding
        spans = [token for token in spans if token != 0][:-1]  # without the closing [SEP]
        assert restore_spans(inputs, spans, sentinels) == block[1:-1]
        assert spans[-1] in sentinels  # the target closes with a sentinel, as T5's does


def test_causal_lm_loss_ignores_padding():
    torch.manual_seed(0)
    model = GPT(gpt_config(ObjectiveRun("causal LM").body_config(news_corpus(vocab_size=800, max_len=24,
                                                                              article_stride=12)))).eval()
    row = torch.tensor([[2, 50, 60, 70, 3]])
    padded = torch.tensor([[2, 50, 60, 70, 3, 0, 0], [2, 50, 60, 70, 3, 9, 9]])  # the padding's ids do not matter
    attention_mask = torch.tensor([[1] * 5 + [0, 0]] * 2)
    with torch.no_grad():
        alone = language_model_loss(model(row), row)
        for ids in padded:
            loss = causal_lm_losses(model, ids[None], attention_mask[:1])["loss"]
            torch.testing.assert_close(loss, alone)


def test_every_objective_reads_the_same_blocks_at_a_step(corpus):
    runs = {objective: ObjectiveRun(objective, batch_size=6) for objective in OBJECTIVES}
    batches = {objective: run.batches(corpus)(7) for objective, run in runs.items()}
    mlm = batches["MLM"]
    original = torch.where(mlm.mlm_labels != IGNORE_INDEX, mlm.mlm_labels, mlm.input_ids)
    # MLM and RTD train through pretrain_tiny_bert, which draws from their PretrainingRun: the same blocks and masks.
    for objective in ("MLM", "RTD"):
        theirs = runs[objective].bert_run().batches(corpus)(7)
        assert torch.equal(theirs.input_ids, batches[objective].input_ids)
        assert torch.equal(theirs.mlm_labels, batches[objective].mlm_labels)
    ids, attention_mask = batches["causal LM"]
    assert torch.equal(ids, original) and torch.equal(attention_mask, mlm.attention_mask)
    source, _, target = batches["span corruption"]
    sentinels = runs["span corruption"].sentinels(corpus)
    for row, length, corrupted, spans in zip(original, attention_mask.sum(1), source, target, strict=True):
        inputs = [token for token in corrupted.tolist() if token != 0][1:-1]
        spans = [token for token in spans.tolist() if token != 0][:-1]
        assert restore_spans(inputs, spans, sentinels) == row[1 : length - 1].tolist()
    assert min(sentinels) == corpus.tokenizer.vocab_size  # sentinels come after the vocabulary


def test_supervised_positions(corpus):
    counts = {}
    for objective in OBJECTIVES:
        run = ObjectiveRun(objective, batch_size=8)
        counts[objective] = run.supervised_positions(run.batches(corpus)(0))
    real = int(ObjectiveRun("RTD", batch_size=8).batches(corpus)(0).attention_mask.sum())
    assert counts["RTD"] == real and counts["causal LM"] == real - 8  # every token, or every token but the first
    assert 0.05 * real < counts["MLM"] < 0.25 * real  # about 15% of the text (blocks hold 2 specials of 24)
    assert counts["MLM"] < counts["span corruption"] < counts["causal LM"]


def test_bodies_have_one_shape_and_gpt_and_t5_mirror_it(corpus):
    body = ObjectiveRun("MLM").body_config(corpus)
    gpt, t5 = gpt_config(body), t5_config(body, n_sentinels=8)
    for config in (gpt, t5):
        assert (config.d_model, config.n_heads, config.d_ff, config.activation) == (128, 2, 512, body.activation)
        assert not config.norm_first  # post-LN, as BERT
    assert gpt.n_layers == t5.n_encoder_layers == t5.n_decoder_layers == body.n_layers == 2
    assert t5.source_vocab_size == body.vocab_size + 8 and t5.share_embeddings
    models = {objective: ObjectiveRun(objective).model(corpus) for objective in OBJECTIVES}
    layers = {objective: sum(p.numel() for p in ObjectiveRun(objective).body(model).parameters())
              for objective, model in models.items() if objective != "span corruption"}
    assert layers["MLM"] == layers["RTD"]  # the same BertModel
    # MLM's and RTD's bodies start from the same weights: the comparison starts from one point.
    for (name, ours), (_, theirs) in zip(models["MLM"].bert.state_dict().items(),
                                         models["RTD"].bert.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


def test_step_flops_of_causal_lm_equals_the_formula(corpus):
    run = ObjectiveRun("causal LM", batch_size=4)
    ids, _ = run.batches(corpus)(0)
    B, T = ids.shape
    formula = training_flops_per_token(run.model(corpus).config, context=T) * B * T
    assert step_flops(corpus, run, samples=1) == formula
    costs = {objective: step_flops(corpus, ObjectiveRun(objective, batch_size=4), samples=1)
             for objective in OBJECTIVES}
    # MLM is the cheapest: its output layer runs on 15% of the positions. Which of GPT and T5 is dearest depends on
    # V: GPT's output layer runs at every position (the page's V = 3,000 makes it the dearest), T5 adds a decoder.
    assert min(costs, key=costs.get) == "MLM"
    assert costs["RTD"] < 1.25 * costs["MLM"]  # ELECTRA's generator is a quarter as wide: about 1/16 the cost


def test_causal_body_is_unchanged_by_right_padding():
    corpus_free_config = gpt_config(ObjectiveRun("MLM").body_config(news_corpus(vocab_size=800, max_len=24,
                                                                                 article_stride=12)))
    torch.manual_seed(0)
    body = CausalBody(GPT(corpus_free_config)).eval()
    ids = torch.tensor([[2, 40, 41, 3, 0, 0], [2, 40, 41, 42, 43, 3]])
    with torch.no_grad():
        hidden = body(ids, attention_mask=ids != 0).hidden_states
        alone = body(ids[:1, :4]).hidden_states
    torch.testing.assert_close(hidden[:1, :4], alone)
    torch.testing.assert_close(hidden[0, :3], hidden[1, :3])  # causal: the shared prefix has the same states


def test_encoder_body_reads_the_encoder(corpus):
    run = ObjectiveRun("span corruption")
    model = run.model(corpus).eval()
    ids = torch.tensor([[2, 40, 41, 3, 0], [2, 7, 8, 9, 3]])
    with torch.no_grad():
        torch.testing.assert_close(EncoderBody(model)(ids).hidden_states, model.encode(ids)[0])
    assert isinstance(run.body(model), EncoderBody) and isinstance(model, EncoderDecoder)
    decoder = sum(p.numel() for p in model.decoder_layers.parameters())
    assert run.body_parameters(model) == sum(p.numel() for p in model.parameters()) - decoder


def test_mean_pooled_classifier_copies_its_body(corpus):
    run = ObjectiveRun("causal LM")
    body = run.body(run.model(corpus))
    before = {name: tensor.clone() for name, tensor in body.state_dict().items()}
    classifier = MeanPooledClassifier(body)
    ids, attention_mask = torch.tensor([[2, 40, 41, 3, 0]]), torch.tensor([[1, 1, 1, 1, 0]])
    loss = classifier(ids, attention_mask).logsumexp(-1).sum()
    loss.backward()
    torch.optim.SGD(classifier.parameters(), lr=1.0).step()
    for name, tensor in body.state_dict().items():
        assert torch.equal(tensor, before[name]), name  # the pretrained body is untouched
    assert classifier(ids, attention_mask).shape == (1, 2)
    with pytest.raises(ValueError, match="n_classes"):
        MeanPooledClassifier(body, n_classes=1)


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_sentence_features_read_every_body(corpus, objective):
    run = ObjectiveRun(objective)
    ids = torch.tensor([[2, 40, 41, 3, 0], [2, 7, 8, 9, 3]])
    features = sentence_features(run.body(run.model(corpus)), ids, (ids != 0).long(), pooling="mean")
    assert features.shape == (2, 128) and torch.isfinite(features).all()


@pytest.mark.parametrize("objective", ["causal LM", "span corruption"])
def test_a_short_run_learns_and_a_second_call_loads_it(corpus, objective):
    run = ObjectiveRun(objective, steps=24, batch_size=8, validation_size=32)
    first = pretrain(corpus, run, progress=False)
    assert not first.model.training and first.history.eval_steps == [24]
    assert first.history.train["loss"][-1] < first.history.train["loss"][0]
    groups = ["next token"] if objective == "causal LM" else ["target", "hidden text", "sentinels and [SEP]"]
    names = ("loss", "floor", "accuracy", "positions", "standard error")
    assert set(first.history.eval) == {f"{group} {name}" for group in groups for name in names}
    again = pretrain(corpus, run, progress=False)  # from the finished checkpoint
    assert again.history.train == first.history.train
    for (name, ours), (_, theirs) in zip(first.model.state_dict().items(), again.model.state_dict().items(),
                                         strict=True):
        assert torch.equal(ours, theirs), name


def test_causal_floor_is_next_words_unigram_loss(corpus):
    run = ObjectiveRun("causal LM")
    ids, attention_mask = run.validation(corpus)
    nats = run.held_out_nats(corpus, run.model(corpus), (ids, attention_mask), run.floor_log_frequencies(corpus))
    blocks, block_mask = pad([example.input_ids for example in run.bert_run().examples(corpus, "train")], 0)
    floor = unigram_loss(blocks, block_mask, ids, attention_mask, corpus.tokenizer.vocab_size)
    # the same targets and counts; only the smoothing differs (add-0.5 here, add-one there)
    assert abs(nats["next token"].floor.mean().item() - floor) < 0.01
    assert len(nats["next token"].loss) == int(attention_mask[:, 1:].sum())


def test_span_floor_counts_sentinels_and_sep(corpus):
    run = ObjectiveRun("span corruption")
    log_frequencies = run.floor_log_frequencies(corpus)
    assert log_frequencies.shape == (corpus.tokenizer.vocab_size + run.n_sentinels,)
    # every target holds the first sentinel once and [SEP] once, so the two are equally frequent ...
    first, sep = run.sentinels(corpus)[0], corpus.tokenizer.special_ids["sep"]
    torch.testing.assert_close(log_frequencies[first], log_frequencies[sep])
    # ... and, at one block in seven or so tokens of target, far more frequent than any word
    words = log_frequencies[: corpus.tokenizer.vocab_size].clone()
    words[sep] = -math.inf
    assert log_frequencies[first] > words.max() and log_frequencies.exp().sum().item() == pytest.approx(1.0)


def test_a_predictor_of_the_frequencies_sits_at_the_floor():
    log_frequencies = torch.tensor([0.5, 0.3, 0.2]).log()
    targets = torch.tensor([0, 0, 1, 2, 0])
    at_floor = _token_nats(log_frequencies.expand(5, 3), targets, log_frequencies)
    assert at_floor.below_floor == pytest.approx(0.0, abs=1e-6)
    knowing = _token_nats(torch.nn.functional.one_hot(targets, 3) * 20.0, targets, log_frequencies)
    assert knowing.below_floor == pytest.approx(-log_frequencies[targets].mean().item(), abs=1e-6)  # loss ~ 0
    assert knowing.correct.all() and at_floor.correct.tolist() == [True, True, False, False, True]
    paired = HeldOutNats(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.5, 2.0, 3.5]), torch.ones(3, dtype=bool))
    assert paired.standard_error == pytest.approx(torch.tensor([0.5, 0.0, 0.5]).std().item() / math.sqrt(3))


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_held_out_nats_agree_with_the_training_losses(corpus, objective):
    run = ObjectiveRun(objective, validation_size=24)
    model, held_out = run.model(corpus).eval(), run.validation(corpus)
    log_frequencies = run.floor_log_frequencies(corpus)
    nats = run.held_out_nats(corpus, model, held_out, log_frequencies)
    with torch.no_grad():
        losses = run.losses(model, held_out)
    if objective in ("causal LM", "span corruption"):
        group = next(iter(nats))  # the objective's own loss comes first
        torch.testing.assert_close(nats[group].loss.mean(), losses["loss"])
        torch.testing.assert_close(nats[group].correct.float().mean(), losses["accuracy"])
    if objective == "span corruption":  # the target split in two: the same losses, the words against their own floor
        text, marks = nats["hidden text"], nats["sentinels and [SEP]"]
        torch.testing.assert_close(torch.cat([text.loss, marks.loss]).sort().values, nats["target"].loss.sort().values)
        assert len(marks.loss) >= 2 * len(held_out[0])  # at least one sentinel and [SEP] per block
        target = held_out[2][held_out[2] != 0]
        marks = torch.tensor([*run.sentinels(corpus), corpus.tokenizer.special_ids["sep"]])
        words = torch.ones(len(log_frequencies), dtype=torch.bool)
        words[marks] = False
        # a word's floor: its share of the targets' word tokens, i.e. its target frequency over the words' total
        expected = -(log_frequencies[target[~torch.isin(target, marks)]] - log_frequencies[words].logsumexp(0))
        torch.testing.assert_close(text.floor, expected)
    if objective == "MLM":  # the three groups split the predicted positions
        predicted = int((held_out.mlm_labels != IGNORE_INDEX).sum())
        assert sum(len(group.loss) for group in nats.values()) == predicted
        assert len(nats["[MASK]"].loss) > 0.6 * predicted  # 80% of them, in expectation
        total = sum(group.loss.sum() for group in nats.values()) / predicted
        torch.testing.assert_close(total, losses["mlm_loss"])
        scores = prediction_scores(model, held_out, corpus.tokenizer)  # the BERT pages' split, by what was shown
        for name, group in nats.items():
            assert scores[name]["count"] == len(group.loss)
            assert scores[name]["loss"] == pytest.approx(group.loss.mean().item(), rel=1e-5)
    if objective == "RTD":
        replaced = losses["replaced"].item()
        torch.testing.assert_close(nats["replaced?"].loss.mean(), losses["rtd_loss"])
        entropy = -(replaced * math.log(replaced) + (1 - replaced) * math.log(1 - replaced))
        assert nats["replaced?"].floor.mean().item() == pytest.approx(entropy, rel=1e-5)
        assert len(nats["generator at [MASK]"].loss) < len(nats["replaced?"].loss) * 0.2


def test_evaluations_are_spread_over_the_run():
    assert ObjectiveRun("MLM", steps=120, evaluations=4).schedule.eval_every == 30
    assert ObjectiveRun("MLM", steps=123, evaluations=4).schedule.eval_every == 31  # 31, 62, 93 and the last, 123
    assert ObjectiveRun("MLM", steps=50).schedule.eval_every == 50


@pytest.mark.parametrize("changes, message", [
    ({"objective": "NSP"}, "objective must be one of"),
    ({"evaluations": 0}, "evaluations must be >= 1"),
    ({"steps": 10, "evaluations": 11}, "evaluations must be <= steps=10"),
    ({"steps": 1}, "steps must be >= 2"),
    ({"noise_density": 1.5}, r"noise_density must be in \(0, 1\)"),
    ({"n_sentinels": 1}, "n_sentinels must be >= 2"),
    ({"lr": 0.0}, "lr must be > 0"),
])
def test_run_refuses_bad_settings(changes, message):
    with pytest.raises(ValueError, match=message):
        ObjectiveRun(**{"objective": "MLM", **changes})
