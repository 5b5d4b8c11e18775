import math
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from minformers.bert import BertConfig, BertForPreTraining
from minformers.recipes import cloze
from minformers.recipes.bert_pretraining import PretrainingBatch
from minformers.recipes.cloze import (
    NOUN_SUBJECT,
    PRONOUN_SUBJECT,
    NameFact,
    Probe,
    agreement_probes,
    batch_sightings,
    candidate_ranks,
    candidate_ranks_of,
    frequency_baseline,
    frequency_correlation,
    held_out_sentences,
    mask_span,
    masked_logits,
    name_facts,
    name_probes,
    probe_metrics,
)
from minformers.wordpiece import WordPieceTokenizer

torch.set_num_threads(1)  # a tiny model: one thread is several times faster here than two

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "economy", "figures", "is", "are", "was", "were", "has", "have", "he", "they", "tony", "blair",
         "gordon", "brown", "said", "and", "met", ".", ",", "mr", "gro", "##wing", "slow", "hew", "##itt", "lleyton"]


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer(SPECIALS + WORDS)


def test_ranks_count_ties_against_the_answer():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 5.0, 1.0]])  # (2, 4)
    assert candidate_ranks(logits, torch.tensor([1, 2, 3]), torch.tensor([3, 2])).tolist() == [2, 1]
    assert candidate_ranks(logits, torch.tensor([1, 2, 3]), torch.tensor([1, 1])).tolist() == [1, 3]
    assert candidate_ranks(logits, torch.tensor([[0, 2], [0, 2]]), torch.tensor([0, 0])).tolist() == [2, 2]
    flat = torch.zeros(1, 4)  # a model that scores everything the same ranks every answer last
    assert candidate_ranks(flat, torch.tensor([0, 1, 2, 3]), torch.tensor([1])).tolist() == [4]


def test_ranks_reject_bad_inputs():
    logits = torch.zeros(2, 5)
    with pytest.raises(ValueError, match="among its row's candidate_ids"):
        candidate_ranks(logits, torch.tensor([1, 2]), torch.tensor([1, 3]))
    with pytest.raises(ValueError, match="distinct"):
        candidate_ranks(logits, torch.tensor([1, 1, 2]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="logits"):
        candidate_ranks(torch.zeros(5), torch.tensor([1]), torch.tensor([1]))
    with pytest.raises(ValueError, match="answer_ids"):
        candidate_ranks(logits, torch.tensor([1]), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        candidate_ranks(logits, torch.tensor([1, 7]), torch.tensor([1, 1]))


def test_name_facts_count_pairs_and_keep_single_piece_answers(tokenizer):
    text = ("Tony Blair said. Mr Blair met Gordon Brown. Tony Blair and Gordon Brown met. Tony said. "
            "Lleyton Hewitt met Lleyton Hewitt. Gordon Brown said.")
    facts = name_facts(text, tokenizer, min_count=2)
    # "Tony Blair": 2 of Tony's 3 uses; "Gordon Brown": 3 of 3; "Lleyton Hewitt" is two pieces (hew ##itt): left
    # out; "Mr Blair" occurs once.
    assert facts == [NameFact("Gordon", "Brown", 3, 1.0), NameFact("Tony", "Blair", 2, 2 / 3)]
    assert name_facts(text, tokenizer, min_count=2, min_share=0.9) == [NameFact("Gordon", "Brown", 3, 1.0)]
    with pytest.raises(ValueError, match="min_share"):
        name_facts(text, tokenizer, min_share=0.3)


def test_mask_span_matches_encoding_the_masked_sentence(tokenizer):
    sentence = "Tony Blair said the economy is slow."
    start = sentence.index("is")
    ids, position, answer = mask_span(tokenizer, sentence, start, start + 2, max_len=32)
    assert ids == tuple(tokenizer.encode("Tony Blair said the economy [MASK] slow.", add_special_tokens=True))
    assert ids[position] == tokenizer.special_ids["mask"] and answer == tokenizer.vocab["is"]
    # A short window keeps the mask, near its middle.
    ids, position, _ = mask_span(tokenizer, sentence, start, start + 2, max_len=6)
    assert len(ids) == 6 and ids[position] == tokenizer.special_ids["mask"]
    assert ids[1:-1] == tuple(tokenizer.encode("the economy [MASK] slow"))
    # "growing" is two pieces, "hewitt" too: no single [MASK] holds them.
    assert mask_span(tokenizer, "the economy is growing", 15, 22, max_len=32) is None
    with pytest.raises(ValueError, match="start and end"):
        mask_span(tokenizer, sentence, 5, 5, max_len=32)
    with pytest.raises(TypeError, match="WordPieceTokenizer"):
        mask_span(object(), sentence, 0, 4, max_len=32)


def test_name_probes_mask_the_second_word_and_skip_copies(tokenizer):
    facts = [NameFact("Tony", "Blair", 5, 0.9), NameFact("Gordon", "Brown", 5, 0.9)]
    sentences = ["Tony Blair said.", "Tony Blair met Mr Blair.", "Gordon Brown said.", "Tony said.",
                 "Gordon Brown met Tony Blair."]
    probes = name_probes(facts, sentences, tokenizer, max_len=32)
    by_answer = Counter(tokenizer.id_to_token[probe.answer] for probe in probes)
    assert by_answer == {"blair": 2, "brown": 2}  # "Mr Blair" holds the answer twice: skipped
    assert all(probe.candidates == (tokenizer.vocab["blair"], tokenizer.vocab["brown"]) for probe in probes)
    for probe in probes:
        assert probe.input_ids == tuple(tokenizer.encode(probe.masked_sentence(), add_special_tokens=True))
    assert len(name_probes(facts, sentences, tokenizer, max_len=32, per_fact=1)) == 2
    # Two names with one second word: it is one candidate, not two.
    twice = name_probes([facts[1], NameFact("Mr", "Brown", 5, 0.9)], sentences + ["Mr Brown said."], tokenizer, 32)
    assert {probe.candidates for probe in twice} == {(tokenizer.vocab["brown"],)} and len(twice) == 3


def test_agreement_probes_are_balanced_and_offer_both_numbers(tokenizer):
    sentences = ["the economy is slow.", "the figures are slow.", "the economy was slow.", "the economy is growing.",
                 "he has met the figures.", "they have met.", "the figures were slow.", "The economy has met."]
    probes = agreement_probes(sentences, tokenizer, 32, NOUN_SUBJECT, "noun")
    forms = Counter(tokenizer.id_to_token[probe.answer] for probe in probes)
    assert forms == {"is": 1, "are": 1, "was": 1, "were": 1}  # no "have" after a noun: "has" is dropped too
    for probe in probes:
        other = tokenizer.vocab[cloze.OTHER_FORM[tokenizer.id_to_token[probe.answer]]]
        assert probe.candidates == (probe.answer, other) and probe.family == "noun"
    pronouns = agreement_probes(sentences, tokenizer, 32, PRONOUN_SUBJECT, "pronoun")
    assert sorted(tokenizer.id_to_token[probe.answer] for probe in pronouns) == ["has", "have"]
    with pytest.raises(ValueError, match="group named 'answer'"):
        agreement_probes(sentences, tokenizer, 32, r"the \w+ (is|are)", "noun")


def _tiny_bert(vocab_size):
    torch.manual_seed(0)
    return BertForPreTraining(BertConfig.tiny(vocab_size=vocab_size, d_model=32, n_heads=2, d_ff=64, max_len=32))


def test_masked_logits_equal_a_full_forward_pass(tokenizer):
    sentences = ["the economy is slow.", "the figures are slow.", "tony blair said the economy was slow and slow."]
    probes = agreement_probes(sentences, tokenizer, 32, NOUN_SUBJECT, "noun")
    probes += [Probe("x", *mask_span(tokenizer, sentences[2], 5, 10, 32)[:3], (12, 14), sentences[2], (5, 10))]
    model = _tiny_bert(tokenizer.vocab_size)
    logits = masked_logits(model, probes, tokenizer.special_ids["pad"], batch_size=2)  # two batches, padded
    with torch.no_grad():
        for row, probe in zip(logits, probes, strict=True):
            full = model(torch.tensor([probe.input_ids])).mlm_logits[0, probe.position]  # (V,)
            assert torch.allclose(row, full, atol=1e-5)
    with pytest.raises(ValueError, match="probes"):
        masked_logits(model, [], 0)


def _probe(family, answer, candidates):
    return Probe(family, (2, 4, 3), 1, answer, candidates, "x", (0, 1))


def test_metrics_accuracy_favourite_and_frequency_baseline():
    probes = [_probe("a", 5, (5, 6)), _probe("a", 6, (6, 5)), _probe("a", 5, (5, 6)), _probe("a", 6, (6, 5)),
              _probe("b", 7, (7, 8, 9)), _probe("b", 9, (7, 8, 9))]
    logits = torch.zeros(6, 10)
    logits[:4, 5] = 1.0  # always 5: right on the two probes whose answer is 5
    logits[4, 7], logits[5, 8] = 1.0, 1.0  # right, then wrong
    metrics = probe_metrics(logits, probes)
    assert metrics == {"accuracy_a": 0.5, "favourite_a": 1.0, "accuracy_b": 0.5, "favourite_b": 0.5}
    assert candidate_ranks_of(logits, probes).tolist() == [1, 2, 1, 2, 1, 3]
    counts = Counter({5: 10, 6: 3, 7: 1, 8: 1, 9: 4})
    assert frequency_baseline(probes, counts) == {"a": 0.5, "b": 0.5}
    assert frequency_baseline(probes, Counter({5: 1, 6: 1, 9: 1}))["a"] == 0.0  # a tie counts against


def test_frequency_correlation_is_one_for_a_model_that_predicts_frequencies():
    counts = Counter({index: (index * 37) % 101 for index in range(60)})
    prior = torch.tensor([math.log1p(counts[index]) for index in range(60)])
    logits = prior.expand(3, -1) + 5.0  # the same prediction at every mask, shifted: log_softmax removes the shift
    assert frequency_correlation(logits, counts) == pytest.approx(1.0, abs=1e-6)
    assert frequency_correlation(-logits, counts) == pytest.approx(-1.0, abs=1e-6)
    logits[:, 0] = 100.0  # a special token the model loves, left out of the correlation
    assert frequency_correlation(logits, counts, skip=[0]) == pytest.approx(1.0, abs=1e-4)


def test_batch_sightings_count_the_original_text_and_the_masked_answers():
    # Two steps; the sequence (11, 12) occurs twice, and its 12 is chosen for prediction once.
    batches = {
        0: PretrainingBatch(torch.tensor([[2, 11, 4, 3]]), torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4),
                            torch.tensor([[-100, -100, 12, -100]]), torch.tensor([0])),
        1: PretrainingBatch(torch.tensor([[2, 11, 12, 3], [2, 12, 11, 3]]), torch.zeros(2, 4, dtype=torch.long),
                            torch.ones(2, 4), torch.tensor([[-100, -100, -100, -100], [-100, -100, 11, -100]]),
                            torch.tensor([0, 0])),
    }
    seen, predicted = batch_sightings(batches.__getitem__, 2, {"pair": [11, 12], "one": [12]})
    assert seen == {"pair": (2, 1), "one": (3, 1)}
    assert predicted == Counter({12: 1, 11: 1})
    with pytest.raises(ValueError, match="empty"):
        batch_sightings(batches.__getitem__, 2, {"nothing": []})


def test_held_out_sentences_skip_used_articles_and_training_sentences(monkeypatch):
    articles = [{"text": "Used one. It is here."}, {"text": "Unused one. It is here.\nA new line."},
                {"text": "Unused one. It is here.\nA new line."}, {"text": "Used two."}]
    monkeypatch.setattr(cloze.data, "bbc_news", lambda: articles)
    corpus = SimpleNamespace(articles=[articles[0], articles[3]], train_text=lambda: "Used one. It is here.\nUsed two.")
    # The duplicate unused article counts once; "It is here." is in the training text, so it is dropped.
    assert held_out_sentences(corpus) == ["Unused one.", "A new line."]
