"""The RAG page's data and reader: passages, questions made by rule (each answer in its passage, reproducible),
exact match, the chat prompt, and SmolLM2's tokenizer read from its GGUF file against Hugging Face's."""

import pytest
import torch

from minformers.bpe import ByteBPETokenizer, train_bpe
from minformers.objectives import split_sentences
from minformers.recipes.rag import (
    BLANK,
    NUMBER,
    build_library,
    exact_match,
    fact_questions,
    normalise_number,
    read_answer,
    reader_prompt,
    relevant_passages,
    reply_start,
    split_passages,
    unique_articles,
)

TEXT = ("Profits rose 12% to £3.4bn in 2004. The firm employs 5,200 staff. It plans to open 40 new shops next "
        "year, said chief executive John Smith. Analysts were surprised.")


def test_split_passages_keeps_whole_sentences_within_the_word_limit():
    passages = split_passages(TEXT, max_words=12)
    assert " ".join(passages) == TEXT  # nothing lost or reordered
    assert all(len(passage.split()) <= 12 or len(split_sentences(passage)) == 1 for passage in passages)
    assert len(passages) == 3  # the 14-word sentence stands alone
    assert split_passages("One very long sentence of many many words.", max_words=3) == [
        "One very long sentence of many many words."]  # a sentence is never cut
    with pytest.raises(ValueError, match="max_words"):
        split_passages(TEXT, max_words=0)


def test_build_library_records_articles_and_openings():
    articles = [{"title": "A", "text": TEXT}, {"title": "B", "text": "Short one. Another."}]
    library = build_library(articles, max_words=12)
    assert library.titles == ["A", "B"]
    assert library.first_passage[1] == library.article_of.index(1)
    assert library.passages[library.first_passage[1]] == "Short one. Another."
    with pytest.raises(ValueError, match="empty"):
        build_library([])


def test_fact_questions_blank_the_digits_of_a_number_that_is_not_a_year():
    passages = split_passages(TEXT, max_words=12)
    questions = fact_questions(passages, seed=3, window=2, min_words=5)
    assert questions == fact_questions(passages, seed=3, window=2, min_words=5)  # reproducible
    assert [question.passage for question in questions] == [0, 1]  # the third passage holds no number
    for question in questions:
        assert question.answer in passages[question.passage] and question.answer in question.sentence
        assert question.answer != "2004"
        assert question.text.count(BLANK) == 1 and len(question.text.split()) <= 5
        assert question.text.replace(BLANK, question.answer) in question.sentence  # a window of the sentence
    assert {question.answer for question in questions} <= {"12", "3.4", "5,200", "40"}
    units = fact_questions(["Profits rose to £3.4bn this year, up from last year."], window=3, min_words=5)
    assert units[0].text == "Profits rose to £____bn this year, up" and units[0].answer == "3.4"
    assert fact_questions(["In 2004 the firm was sold again after a long fight."], min_words=5) == []  # a year
    assert fact_questions(["Sales of 12 vans and 12 cars rose a little this year."], min_words=5) == []  # twice


def test_fact_questions_on_the_news_library():
    """On real articles: every answer is in its passage, never among the other numbers of its own question, and
    the relevant passages include any copy of the sentence elsewhere."""
    library = build_library(unique_articles()[::200])
    questions = fact_questions(library.passages, seed=0)
    assert len(questions) > 10
    for question, relevant in zip(questions, relevant_passages(questions, library.passages), strict=True):
        assert question.passage in relevant
        assert question.text.replace(BLANK, question.answer) in question.sentence
        assert question.answer not in [number["value"] for number in NUMBER.finditer(question.text)]
    copy = [*library.passages, library.passages[questions[0].passage]]
    assert relevant_passages(questions[:1], copy) == [{questions[0].passage, len(copy) - 1}]


def test_exact_match_compares_the_digits_of_the_first_number():
    assert normalise_number(" $1,200m") == "1200" and normalise_number("none") == ""
    assert exact_match(" 5,200.", "5,200") and exact_match("5200 staff", "5,200")
    assert exact_match(" £3.4bn", "3.4") and exact_match("3.4%", "3.4")  # units and currency aside
    assert not exact_match(" 3.45", "3.4") and not exact_match(" 34", "3.4")
    assert not exact_match(" 12 or 40", "40")  # only the first number counts
    assert not exact_match(" I do not know.", "40")


def test_reader_prompt_is_smollm2_chat_with_the_reply_started():
    closed = reader_prompt("profits rose ____% to")
    opened = reader_prompt("profits rose ____% to", passage="Profits rose 12% to £3.4bn.")
    assert closed.startswith("<|im_start|>system\n") and closed.endswith("<|im_start|>assistant\nprofits rose ")
    assert "Passage: Profits rose 12% to £3.4bn.\nFill in the blank: profits rose ____% to<|im_end|>" in opened
    assert "Passage" not in closed
    assert reader_prompt("____ came", start="It was").endswith("<|im_start|>assistant\nIt was")
    assert reply_start("____ came") == "The missing number is "


def test_read_answer_decodes_only_the_new_tokens_and_stops_at_the_end_of_turn():
    specials = ["<|im_start|>", "<|im_end|>"]
    vocab, merges = train_bpe("a b 1 2", vocab_size=258, special_tokens=specials)
    tokenizer = ByteBPETokenizer(vocab, merges, special_tokens=specials)
    reply = tokenizer.encode(" 12.<|im_end|>\nmore")

    class Scripted(torch.nn.Module):  # a decoder that writes `reply`, one token per call
        config = type("Config", (), {"max_len": 4096, "n_layers": 1})
        calls = 0

        def forward(self, input_ids, cache=None):
            logits = torch.full((1, input_ids.shape[1], tokenizer.vocab_size), -1e9)
            logits[0, -1, reply[min(self.calls, len(reply) - 1)]] = 0.0
            self.calls += 1
            return logits

    model = Scripted()
    assert read_answer(model, tokenizer, "a ____ b", max_new_tokens=len(reply)) == " 12."


@pytest.mark.slow
def test_smollm2_tokenizer_from_gguf_matches_hugging_face():
    """Our ByteBPETokenizer built from the GGUF file's tokens and merges gives HF's ids (HF's own GGUF reader and
    tokenizer conversion) on news articles and on the chat format with its special tokens."""
    from transformers import AutoTokenizer

    from minformers.convert.gguf_file import read_gguf
    from minformers.recipes.rag import gguf_tokenizer
    from minformers.support import data

    path = data.smollm2_gguf()
    ours = gguf_tokenizer(read_gguf(path))
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    texts = [article["title"] + "\n" + article["text"] for article in unique_articles()[::100]]
    texts.append(reader_prompt("rose ____ to £3.4bn, up 12%", passage="Profits rose 12% to £3.4bn in 2004."))
    for text in texts:
        assert ours.encode(text) == theirs.encode(text, add_special_tokens=False)
    assert ours.encode("The capital of France is") == [504, 3575, 282, 4649, 314]  # as test_llama's check
