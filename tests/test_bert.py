"""BERT: parity with HF transformers (tiny random configs and MiniLM's real weights), weight conversion both ways,
the BERT-base parameter count derived by hand, tied MLM weights, linear probes, and the errors on bad input."""

import json

import pytest
import torch
import transformers
from safetensors.torch import load_file

from minformers.bert import (
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    attention_mask_to_bool,
    count_parameters,
)
from minformers.convert.bert import bert_config_from_hf, hf_bert_config, hf_bert_state_dict, load_hf_bert
from minformers.masks import padding_mask
from minformers.support import data

torch.set_num_threads(1)

# HF's own BERT tests use these sizes: batch 13, seq 7, hidden 32; d_ff 37 is odd on purpose, so a swapped
# up/down projection cannot go unnoticed.
B, T = 13, 7
HF_TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    attn_implementation="eager",
)
TINY = BertConfig(vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=64)
ATOL = 1e-5


def tiny_inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, 99, (B, T), generator=generator)
    segment_ids = (torch.arange(T) >= 3).long().expand(B, T)  # [A A A B B B B]: two segments
    attention_mask = torch.ones(B, T, dtype=torch.long)
    attention_mask[1, 4:] = 0  # right padding of different lengths
    attention_mask[5, 1:] = 0
    attention_mask[8, :2] = 0  # and left padding: the mask is not only a length
    return input_ids, segment_ids, attention_mask


def hf_inputs(input_ids, segment_ids, attention_mask) -> dict:
    """HF's names for our arguments (HF calls segments token types)."""
    return {"input_ids": input_ids, "token_type_ids": segment_ids, "attention_mask": attention_mask}


def hf_pretraining(seed=0):
    torch.manual_seed(seed)
    return transformers.BertForPreTraining(transformers.BertConfig(**HF_TINY)).eval()


@pytest.mark.parametrize("masked", [False, True])
def test_hf_weights_loaded_into_ours_give_hf_outputs(masked):
    theirs = hf_pretraining()
    ours = load_hf_bert(BertForPreTraining(bert_config_from_hf(theirs.config)), theirs.state_dict()).eval()
    input_ids, segment_ids, attention_mask = tiny_inputs()
    attention_mask = attention_mask if masked else None
    with torch.no_grad():
        expected = theirs(**hf_inputs(input_ids, segment_ids, attention_mask), output_hidden_states=True)
        actual = ours(input_ids, segment_ids, attention_mask)
        body = ours.bert(input_ids, segment_ids, attention_mask, return_all_hidden_states=True)
    torch.testing.assert_close(actual.mlm_logits, expected.prediction_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.nsp_logits, expected.seq_relationship_logits, atol=ATOL, rtol=0)
    assert len(body.all_hidden_states) == len(expected.hidden_states) == 3  # embeddings + 2 layers
    for ours_state, hf_state in zip(body.all_hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(ours_state, hf_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.hidden_states, body.hidden_states, atol=0, rtol=0)


def test_losses_match_hf():
    theirs = hf_pretraining()
    ours = load_hf_bert(BertForPreTraining(TINY), theirs.state_dict()).eval()
    input_ids, segment_ids, attention_mask = tiny_inputs()
    mlm_labels = torch.full((B, T), -100)
    mlm_labels[:, 2] = input_ids[:, 2]  # one labelled position per row, plus a second in row 0
    mlm_labels[0, 5] = 7
    nsp_labels = torch.arange(B) % 2
    with torch.no_grad():
        labels = {"labels": mlm_labels, "next_sentence_label": nsp_labels}
        expected = theirs(**hf_inputs(input_ids, segment_ids, attention_mask), **labels)
        actual = ours(input_ids, segment_ids, attention_mask, mlm_labels=mlm_labels, nsp_labels=nsp_labels)
        mlm_only = ours(input_ids, segment_ids, attention_mask, mlm_labels=mlm_labels)
    torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=0)
    # The MLM loss is the mean of -log p(label) over the B + 1 labelled positions only, computed here from the
    # full (B, T, V) logits that an unlabelled call returns; a labelled call scores those positions alone.
    with torch.no_grad():
        full_logits = ours(input_ids, segment_ids, attention_mask).mlm_logits  # (B, T, V)
    log_probs = full_logits.log_softmax(-1)
    picked = [log_probs[row, 2, input_ids[row, 2]] for row in range(B)] + [log_probs[0, 5, 7]]
    torch.testing.assert_close(actual.mlm_loss, -torch.stack(picked).mean())
    assert actual.mlm_logits.shape == (B + 1, TINY.vocab_size)
    torch.testing.assert_close(actual.mlm_logits, full_logits[mlm_labels != -100])
    torch.testing.assert_close(actual.loss, actual.mlm_loss + actual.nsp_loss)
    assert mlm_only.nsp_loss is None and torch.equal(mlm_only.loss, mlm_only.mlm_loss)
    assert ours(input_ids).loss is None


def test_our_weights_exported_to_hf_give_our_outputs():
    torch.manual_seed(1)
    ours = BertForPreTraining(TINY).eval()
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**HF_TINY)).eval()
    theirs.load_state_dict(hf_bert_state_dict(ours), strict=True)  # every HF key, tied aliases included
    input_ids, segment_ids, attention_mask = tiny_inputs(seed=1)
    with torch.no_grad():
        expected = theirs(**hf_inputs(input_ids, segment_ids, attention_mask))
        actual = ours(input_ids, segment_ids, attention_mask)
    torch.testing.assert_close(actual.mlm_logits, expected.prediction_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(actual.nsp_logits, expected.seq_relationship_logits, atol=ATOL, rtol=0)
    # And back again: our -> HF -> our is the identity on every tensor.
    again = load_hf_bert(BertForPreTraining(TINY), theirs.state_dict())
    for (name, value), (_, original) in zip(again.state_dict().items(), ours.state_dict().items(), strict=True):
        assert torch.equal(value, original), name


def test_bare_model_and_classifier_convert_both_ways():
    torch.manual_seed(2)
    hf_config = transformers.BertConfig(**HF_TINY, num_labels=3)
    input_ids, segment_ids, attention_mask = tiny_inputs(seed=2)
    labels = torch.arange(B) % 3
    theirs_body = transformers.BertModel(hf_config).eval()
    ours_body = load_hf_bert(BertModel(TINY), theirs_body.state_dict()).eval()
    theirs_classifier = transformers.BertForSequenceClassification(hf_config).eval()
    ours_classifier = load_hf_bert(BertForSequenceClassification(TINY, 3), theirs_classifier.state_dict()).eval()
    with torch.no_grad():
        expected = theirs_body(**hf_inputs(input_ids, segment_ids, attention_mask))
        actual = ours_body(input_ids, segment_ids, attention_mask)
        torch.testing.assert_close(actual.hidden_states, expected.last_hidden_state, atol=ATOL, rtol=0)
        torch.testing.assert_close(actual.pooled, expected.pooler_output, atol=ATOL, rtol=0)
        expected = theirs_classifier(**hf_inputs(input_ids, segment_ids, attention_mask), labels=labels)
        actual = ours_classifier(input_ids, attention_mask, segment_ids, labels=labels)
        torch.testing.assert_close(actual.logits, expected.logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(actual.loss, expected.loss, atol=ATOL, rtol=0)
    transformers.BertModel(hf_config).load_state_dict(hf_bert_state_dict(ours_body), strict=True)
    transformers.BertForSequenceClassification(hf_config).load_state_dict(
        hf_bert_state_dict(ours_classifier), strict=True
    )


def test_loading_accepts_hf_variants_and_refuses_what_does_not_fit():
    theirs = hf_pretraining()
    state = dict(theirs.state_dict())
    body = {key.removeprefix("bert."): value for key, value in state.items() if key.startswith("bert.")}
    # A BertModel checkpoint (no "bert." prefix) loads into our BertModel; the buffers HF used to save are ignored.
    ours = load_hf_bert(BertModel(TINY), {**body, "embeddings.position_ids": torch.arange(64)[None]})
    assert torch.equal(ours.pooler.weight, theirs.bert.pooler.dense.weight)
    # A saved file keeps a tied tensor under one name only; the other is filled in from it.
    del state["cls.predictions.decoder.weight"], state["cls.predictions.decoder.bias"]
    ours = load_hf_bert(BertForPreTraining(TINY), state)
    assert torch.equal(ours.mlm_head.decoder.bias, theirs.cls.predictions.bias)
    with pytest.raises(ValueError, match=r"missing \['cls.predictions.decoder.bias', .*'cls.seq_relationship.bias'"):
        load_hf_bert(BertForPreTraining(TINY), body)
    ours = load_hf_bert(BertForPreTraining(TINY), body, strict=False)  # body only, heads left as initialised
    assert torch.equal(ours.bert.embeddings.norm.weight, theirs.bert.embeddings.LayerNorm.weight)
    with pytest.raises(ValueError, match=r"missing \[\]; unexpected \['cls.predictions.bias', "):
        load_hf_bert(BertModel(TINY), theirs.state_dict())
    untied = {**theirs.state_dict(), "cls.predictions.decoder.weight": torch.zeros(99, 32)}
    with pytest.raises(ValueError, match="cls.predictions.decoder.weight and embeddings.word_embeddings.weight differ"):
        load_hf_bert(BertForPreTraining(TINY), untied)
    with pytest.raises(ValueError, match=r"embeddings.word_embeddings.weight has shape \(99, 32\).*\(98, 32\)"):
        load_hf_bert(BertModel(BertConfig(**{**TINY.__dict__, "vocab_size": 98})), body)


def test_minilm_real_weights_match_hf():
    folder = data.minilm_dir()
    theirs = transformers.BertModel.from_pretrained(str(folder)).eval()
    config = bert_config_from_hf(json.loads((folder / "config.json").read_text()))
    assert (config.d_model, config.n_layers, config.n_heads, config.d_ff) == (384, 6, 12, 1536)
    ours = load_hf_bert(BertModel(config), load_file(str(folder / "model.safetensors"))).eval()
    tokenizer = transformers.BertTokenizer(vocab_file=str(folder / "vocab.txt"))
    sentences = ["The cat sat on the mat.", "A transformer reads every word of a sentence at once.", "Hello!"]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert batch["attention_mask"].sum(1).tolist() == [9, 13, 4]  # real tokens, [CLS] and [SEP] included
    with torch.no_grad():
        expected = theirs(**batch)
        actual = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    torch.testing.assert_close(actual.hidden_states, expected.last_hidden_state, atol=1e-4, rtol=0)
    torch.testing.assert_close(actual.pooled, expected.pooler_output, atol=1e-4, rtol=0)


def test_bert_base_has_110_million_parameters():
    config = BertConfig.base()
    V, C, L, F, P, S = config.vocab_size, config.d_model, config.n_layers, config.d_ff, config.max_len, 2
    embeddings = (V + P + S) * C + 2 * C  # three tables, then LayerNorm (weight and bias)
    attention = 4 * (C * C + C)  # q, k, v, out projections with biases
    feed_forward = (C * F + F) + (F * C + C)
    layer = attention + feed_forward + 2 * 2 * C  # two LayerNorms
    pooler = C * C + C
    body = embeddings + L * layer + pooler
    mlm_head = (C * C + C) + 2 * C + V  # transform and LayerNorm; the decoder reuses the embedding, adds a bias
    nsp_head = C * 2 + 2
    assert body == 109_482_240
    assert body + mlm_head + nsp_head == 110_106_428
    assert count_parameters(config, heads=False) == body
    assert count_parameters(config) == body + mlm_head + nsp_head
    with torch.device("meta"):
        assert transformers.BertModel(hf_bert_config(config)).num_parameters() == body
        assert transformers.BertForPreTraining(hf_bert_config(config)).num_parameters() == 110_106_428


def test_mlm_decoder_is_the_token_embedding_and_gets_gradient_from_both_uses():
    torch.manual_seed(0)
    model = BertForPreTraining(TINY).eval()  # no dropout, so the two runs below compute the same function
    embedding = model.bert.embeddings.token_embedding.weight
    assert model.mlm_head.decoder.weight is embedding
    input_ids, segment_ids, _ = tiny_inputs()
    labels = input_ids.clone()
    model(input_ids, segment_ids, mlm_labels=labels).loss.backward()
    # Feed the two uses separate copies of the matrix: the tied gradient is the sum of their gradients.
    reading, writing = embedding.detach().clone().requires_grad_(), embedding.detach().clone().requires_grad_()
    weights = {"bert.embeddings.token_embedding.weight": reading, "mlm_head.decoder.weight": writing}
    arguments = (input_ids, segment_ids, None, labels)
    torch.func.functional_call(model, weights, arguments, tie_weights=False).loss.backward()
    assert reading.grad.abs().sum() > 0 and writing.grad.abs().sum() > 0
    torch.testing.assert_close(embedding.grad, reading.grad + writing.grad)
    assert torch.count_nonzero(reading.grad[0]) == 0  # [PAD] never occurs here, and padding_idx blocks it anyway


def test_shapes_on_a_tiny_config():
    model = BertForPreTraining(TINY).eval()
    input_ids, segment_ids, attention_mask = tiny_inputs()
    output = model(input_ids, segment_ids, attention_mask)
    assert output.mlm_logits.shape == (B, T, 99)
    assert output.nsp_logits.shape == (B, 2)
    assert output.hidden_states.shape == (B, T, 32)
    body = model.bert(input_ids, return_all_hidden_states=True)
    assert body.pooled.shape == (B, 32) and len(body.all_hidden_states) == TINY.n_layers + 1
    assert model.bert(input_ids).all_hidden_states is None
    assert model(input_ids[:, :1]).mlm_logits.shape == (B, 1, 99)
    assert model(torch.zeros(1, 64, dtype=torch.long)).mlm_logits.shape == (1, 64, 99)  # exactly max_len fits


def test_attention_mask_is_our_padding_mask_and_padding_changes_nothing_real():
    lengths = torch.tensor([3, 7, 5])
    attention_mask = (torch.arange(7) < lengths[:, None]).long()  # HF's (B, T) 1/0 form, right padding
    assert torch.equal(attention_mask_to_bool(attention_mask), padding_mask(lengths, 7))
    torch.manual_seed(0)
    model = BertModel(TINY).eval()
    short = torch.tensor([[2, 11, 12, 3]])
    padded = torch.tensor([[2, 11, 12, 3, 50, 60, 70]])  # whatever sits in the padding must not matter
    with torch.no_grad():
        alone = model(short).hidden_states
        with_padding = model(padded, attention_mask=torch.tensor([[1, 1, 1, 1, 0, 0, 0]])).hidden_states
    torch.testing.assert_close(with_padding[:, :4], alone, atol=ATOL, rtol=0)


def test_causal_mask_hides_later_tokens_and_keeps_padding_masked():
    torch.manual_seed(0)
    model = BertModel(TINY).eval()
    input_ids, segment_ids, attention_mask = tiny_inputs()
    changed = input_ids.clone()
    changed[:, 4:] = torch.randint(1, 99, (B, T - 4), generator=torch.Generator().manual_seed(1))  # tokens 4..6
    with torch.no_grad():
        causal = model(input_ids, segment_ids, attention_mask, causal=True).hidden_states
        later_changed = model(changed, segment_ids, attention_mask, causal=True).hidden_states
        prefix = model(input_ids[:, :4], segment_ids[:, :4], attention_mask[:, :4], causal=True).hidden_states
        both_ways = model(input_ids, segment_ids, attention_mask).hidden_states
        default = model(input_ids, segment_ids, attention_mask, causal=False).hidden_states
    torch.testing.assert_close(later_changed[:, :4], causal[:, :4], atol=ATOL, rtol=0)  # 0..3 never read 4..6
    torch.testing.assert_close(prefix, causal[:, :4], atol=ATOL, rtol=0)  # the same as cutting the sequence
    assert not torch.allclose(later_changed[:, 4:], causal[:, 4:])  # the later positions read themselves
    assert not torch.allclose(both_ways[:, :4], causal[:, :4])  # bidirectional: early positions read later ones
    assert torch.equal(default, both_ways)  # causal=False is the old behaviour
    # Padding stays masked under the causal mask: row 8 is left-padded at 0 and 1, so its real tokens never read
    # them, whatever they hold.
    repadded = input_ids.clone()
    repadded[8, :2] = torch.tensor([97, 98])
    with torch.no_grad():
        again = model(repadded, segment_ids, attention_mask, causal=True).hidden_states
    torch.testing.assert_close(again[8, 2:], causal[8, 2:], atol=ATOL, rtol=0)


def test_causal_bert_matches_hf_decoder_bert():
    """HF's BertLMHeadModel with is_decoder=True is BERT with a causal mask: the same hidden states as ours."""
    ours = BertModel(TINY).eval()
    config = transformers.BertConfig(**HF_TINY, is_decoder=True)
    theirs = transformers.BertModel(config).eval()
    theirs.load_state_dict(hf_bert_state_dict(ours))
    input_ids, segment_ids, attention_mask = tiny_inputs()  # right and left padding
    with torch.no_grad():
        expected = theirs(**hf_inputs(input_ids, segment_ids, attention_mask)).last_hidden_state
        actual = ours(input_ids, segment_ids, attention_mask, causal=True).hidden_states
    # Every real token agrees. A left pad may read no key at all: we give it zeros, HF a uniform average.
    real = attention_mask.bool()
    torch.testing.assert_close(actual[real], expected[real], atol=ATOL, rtol=0)


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"input_ids": torch.rand(2, 5)}, TypeError, "input_ids must be an integer tensor, got torch.float32"),
        ({"input_ids": torch.tensor([[1, 99]])}, ValueError, r"input_ids must be in \[0, vocab_size=99\), got \[99\]"),
        ({"input_ids": torch.tensor([[-1, 3]])}, ValueError, r"input_ids must be in \[0, vocab_size=99\), got \[-1\]"),
        ({"input_ids": torch.ones(1, 65, dtype=torch.long)}, ValueError, "length 65, more than max_len=64"),
        ({"input_ids": torch.ones(5, dtype=torch.long)}, ValueError, r"input_ids must have shape \(B, T\)"),
        ({"segment_ids": torch.tensor([[0, 2]])}, ValueError, r"segment_ids must be in \[0, n_segments=2\)"),
        ({"segment_ids": torch.tensor([[0, 1, 1]])}, ValueError, r"segment_ids must have shape \(1, 2\), got \(1, 3\)"),
        ({"segment_ids": torch.tensor([[0.0, 1.0]])}, TypeError, "segment_ids must be an integer tensor"),
        ({"attention_mask": torch.tensor([[1, 2]])}, ValueError, "attention_mask must hold only 0/1"),
        ({"attention_mask": torch.tensor([[1]])}, ValueError, r"attention_mask must have the shape of input_ids"),
        ({"mlm_labels": torch.tensor([[5, 99]])}, ValueError, r"mlm_labels must be in \[0, vocab_size=99\) or -100"),
        ({"nsp_labels": torch.tensor([2])}, ValueError, r"nsp_labels must be in \[0, classes=2\) or -100"),
        ({"nsp_labels": torch.tensor([[1]])}, ValueError, r"nsp_labels must have shape \(1,\)"),
    ],
)
def test_bad_inputs_are_refused_naming_the_argument(arguments, error, message):
    model = BertForPreTraining(TINY)
    with pytest.raises(error, match=message):
        model(**{"input_ids": torch.tensor([[2, 3]]), **arguments})


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"d_model": 30}, ValueError, "d_model must be divisible by n_heads, got 30 and 4"),
        ({"vocab_size": 0}, ValueError, "vocab_size must be >= 1, got 0"),
        ({"n_layers": 2.0}, TypeError, "n_layers must be an int"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\), got 1.0"),
        ({"layer_norm_eps": 0.0}, ValueError, "layer_norm_eps must be > 0"),
        ({"pad_id": 99}, ValueError, "pad_id must be < vocab_size=99, got 99"),
        ({"activation": "swish"}, ValueError, "activation must be one of .*got 'swish'"),
    ],
)
def test_bad_config_fields_are_refused_by_name(changes, error, message):
    with pytest.raises(error, match=message):
        BertConfig(**{**TINY.__dict__, **changes})


def test_config_converts_to_and_from_hf():
    for config in (TINY, BertConfig.base(), BertConfig.large(), BertConfig.tiny(vocab_size=500, activation="relu")):
        assert bert_config_from_hf(hf_bert_config(config)) == config
        assert bert_config_from_hf(hf_bert_config(config).to_dict()) == config
    assert (BertConfig.large().d_model, BertConfig.tiny(100).d_model, BertConfig.tiny(100).max_len) == (1024, 128, 128)
    with pytest.raises(ValueError, match="hidden_dropout_prob and attention_probs_dropout_prob must be equal"):
        bert_config_from_hf({**hf_bert_config(TINY).to_dict(), "attention_probs_dropout_prob": 0.0})
    with pytest.raises(ValueError, match="position_embedding_type must be 'absolute'"):
        bert_config_from_hf({**hf_bert_config(TINY).to_dict(), "position_embedding_type": "relative_key"})


def test_frozen_body_is_a_linear_probe():
    torch.manual_seed(0)
    pretrained = BertForPreTraining(TINY)
    before = {name: value.clone() for name, value in pretrained.state_dict().items()}
    probe = BertForSequenceClassification.from_body(pretrained, n_classes=3, freeze_body=True)
    trainable = [name for name, parameter in probe.named_parameters() if parameter.requires_grad]
    assert trainable == ["classifier.weight", "classifier.bias"]
    probe.train()
    assert probe.training and not probe.bert.training  # the frozen body keeps its dropout off
    input_ids, segment_ids, attention_mask = tiny_inputs()
    labels = torch.arange(B) % 3
    with torch.no_grad():  # the logits are the classifier applied to the pretrained model's pooled [CLS]
        pooled = pretrained.eval().bert(input_ids, segment_ids, attention_mask).pooled
        logits = probe.eval()(input_ids, attention_mask, segment_ids).logits
        torch.testing.assert_close(logits, probe.classifier(pooled))
    start = {name: value.clone() for name, value in probe.state_dict().items()}
    optimizer = torch.optim.SGD([p for p in probe.parameters() if p.requires_grad], lr=0.5)
    probe.train()(input_ids, attention_mask, segment_ids, labels=labels).loss.backward()
    optimizer.step()
    changed = sorted(name for name, value in probe.state_dict().items() if not torch.equal(value, start[name]))
    assert changed == ["classifier.bias", "classifier.weight"]
    assert all(torch.equal(value, before[name]) for name, value in pretrained.state_dict().items())


def test_fine_tuning_updates_the_body_of_a_copy():
    pretrained = BertModel(TINY)
    model = BertForSequenceClassification.from_body(pretrained, n_classes=2)
    assert model.bert is not pretrained and torch.equal(model.bert.pooler.weight, pretrained.pooler.weight)
    input_ids, _, _ = tiny_inputs()
    model(input_ids, labels=torch.arange(B) % 2).loss.backward()
    assert model.bert.embeddings.token_embedding.weight.grad.abs().sum() > 0
    with pytest.raises(TypeError, match="body must be a BertModel"):
        BertForSequenceClassification.from_body(torch.nn.Linear(2, 2), n_classes=2)
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        BertForSequenceClassification(TINY, n_classes=1)


def test_classifier_reads_a_second_positional_input_as_the_attention_mask():
    # fit_classifier calls model(ids, attention_mask): padding must be masked out, not read as a segment id
    torch.manual_seed(0)
    model = BertForSequenceClassification(TINY, n_classes=2).eval()
    ids = torch.tensor([[2, 7, 8, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    with torch.no_grad():
        positional = model(ids, mask).logits
        torch.testing.assert_close(positional, model(ids, attention_mask=mask).logits)
        torch.testing.assert_close(positional, model(ids[:, :4]).logits)  # as if the padding were not there
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        BertForSequenceClassification(TINY, n_classes=1)


def test_dropout_is_off_in_eval_and_on_in_training():
    torch.manual_seed(0)
    model = BertForPreTraining(TINY)  # dropout 0.1
    input_ids, segment_ids, attention_mask = tiny_inputs()
    model.eval()
    with torch.no_grad():
        first = model(input_ids, segment_ids, attention_mask).mlm_logits
        assert torch.equal(first, model(input_ids, segment_ids, attention_mask).mlm_logits)
        model.train()
        assert not torch.equal(model(input_ids, segment_ids, attention_mask).mlm_logits, first)


def test_initialisation_follows_bert():
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.tiny(vocab_size=1000))
    weights = torch.cat([model.bert.layers[0].feed_forward.up_proj.weight.flatten(), model.mlm_head.dense.weight[0]])
    assert abs(weights.std().item() - 0.02) < 0.001
    assert torch.count_nonzero(model.bert.layers[1].attention.q_proj.bias) == 0
    assert torch.equal(model.bert.embeddings.norm.weight, torch.ones(128))
    assert torch.count_nonzero(model.bert.embeddings.token_embedding.weight[0]) == 0  # [PAD] row
    assert abs(model.bert.embeddings.position_embedding.embedding.weight.std().item() - 0.02) < 0.002
