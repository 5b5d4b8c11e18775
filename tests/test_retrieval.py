"""BM25 against scores derived by hand and against the properties its formula promises; recall@k and MRR on hand
examples; dense retrieval with MiniLM in our BERT against Hugging Face's BertModel; the cross-encoder's inputs,
loss and reranking.

No pinned package implements BM25 (rank_bm25 and Lucene are not dependencies of the course), so the reference is
the formula worked by hand on a three-document collection.
"""

import json
import math
import random

import pytest
import torch

from minformers.bert import BertConfig, BertModel
from minformers.convert.bert import bert_config_from_hf
from minformers.retrieval import (
    BM25,
    PASSAGE,
    PASSAGE_MATCHED,
    QUESTION,
    QUESTION_MATCHED,
    CrossEncoder,
    RerankingData,
    dense_scores,
    embed_texts,
    first_relevant_rank,
    listwise_loss,
    mean_reciprocal_rank,
    pair_inputs,
    recall_at_k,
    rerank,
    reranking_batches,
    reranking_loss,
    tokenize,
    top_k,
)
from minformers.train import TrainConfig, train

torch.set_num_threads(1)  # small models run several times faster on one thread (see minformers.support.runtime)

DOCUMENTS = [["the", "cat", "sat"], ["a", "dog", "sat", "on", "a", "cat", "mat"], ["dogs", "bark"]]


def test_bm25_matches_the_formula_worked_by_hand():
    # N = 3 documents of lengths 3, 7 and 2: avgdl = 4. "cat" is in 2 of them, "mat" in 1, "sat" in 2.
    # idf(cat) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln 1.6; idf(mat) = ln(1 + 2.5 / 1.5) = ln(8 / 3).
    # With k1 = 1.5, b = 0.75, document 0 (|d| = 3): K = 1.5 * (0.25 + 0.75 * 3 / 4) = 1.21875;
    # document 1 (|d| = 7): K = 1.5 * (0.25 + 0.75 * 7 / 4) = 2.34375. One occurrence scores idf * 2.5 / (1 + K).
    index = BM25(DOCUMENTS)
    cat_0 = math.log(1.6) * 2.5 / (1 + 1.21875)
    cat_1 = math.log(1.6) * 2.5 / (1 + 2.34375)
    mat_1 = math.log(8 / 3) * 2.5 / (1 + 2.34375)
    torch.testing.assert_close(index.scores(["cat"]), torch.tensor([cat_0, cat_1, 0.0], dtype=torch.float64))
    torch.testing.assert_close(index.scores(["cat", "mat"]), torch.tensor([cat_0, cat_1 + mat_1, 0.0],
                                                                          dtype=torch.float64))
    # "a" occurs twice in document 1: f = 2 -> idf * 2 * 2.5 / (2 + K)
    a_1 = math.log(1 + 2.5 / 1.5) * 2 * 2.5 / (2 + 2.34375)
    assert index.scores(["a"])[1].item() == pytest.approx(a_1, rel=1e-12)


def test_bm25_parameters_do_what_the_formula_says():
    # k1 = 0: a term counts once, whatever its frequency and the document's length (only idf is left).
    flat = BM25(DOCUMENTS, k1=0.0).scores(["a", "cat"])
    assert flat[1].item() == pytest.approx(math.log(1 + 2.5 / 1.5) + math.log(1.6))
    # b = 0: no length normalisation, so one occurrence scores the same in a short and a long document.
    no_length = BM25(DOCUMENTS, b=0.0).scores(["cat"])
    assert no_length[0].item() == pytest.approx(no_length[1].item())
    # b = 1 penalises the long document more than b = 0.75 does.
    assert BM25(DOCUMENTS, b=1.0).scores(["cat"])[1] < BM25(DOCUMENTS, b=0.75).scores(["cat"])[1]


def test_bm25_saturates_with_term_frequency_and_never_goes_negative():
    # Repeats of a term add less and less, never beyond idf * (k1 + 1); a term in every document still scores >= 0.
    documents = [["x"] * count + ["pad"] * (10 - count) for count in range(1, 11)] + [["other"] * 10]
    index = BM25(documents, k1=1.2, b=0.0)
    scores = index.scores(["x"])[:10]
    gains = scores.diff()
    assert bool((gains > 0).all()) and bool((gains.diff() < 0).all())
    assert scores.max().item() < index.idf("x") * 2.2
    assert BM25([["same"], ["same"], ["same"]]).scores(["same"]).min().item() > 0


def test_bm25_is_a_sum_over_query_terms_and_ignores_unknown_ones():
    index = BM25(DOCUMENTS)
    torch.testing.assert_close(index.scores(["cat", "dog"]), index.scores(["cat"]) + index.scores(["dog"]))
    torch.testing.assert_close(index.scores(["cat", "cat"]), 2 * index.scores(["cat"]))  # repeats count, as Lucene
    assert torch.equal(index.scores(["zebra"]), torch.zeros(3, dtype=torch.float64))
    assert torch.equal(index.scores([]), torch.zeros(3, dtype=torch.float64))


def test_bm25_scores_do_not_depend_on_document_order():
    draw = random.Random(0)
    documents = [[draw.choice("abcdefgh") for _ in range(draw.randint(1, 12))] for _ in range(30)]
    order = list(range(30))
    draw.shuffle(order)
    query = list("abc")
    original = BM25(documents).scores(query)
    shuffled = BM25([documents[i] for i in order]).scores(query)
    torch.testing.assert_close(shuffled, original[order])


def test_bm25_search_and_top_k_break_ties_by_lower_id():
    index = BM25([["cat"], ["dog"], ["cat"], ["cat", "cat"]])
    assert index.search(["cat"], k=3) == [3, 0, 2]
    assert top_k(torch.tensor([[1.0, 1.0, 1.0], [0.0, 2.0, 1.0]]), k=2) == [[0, 1], [1, 2]]


def test_bm25_rejects_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        BM25([])
    with pytest.raises(TypeError, match="list of terms"):
        BM25(["the cat sat"])
    with pytest.raises(ValueError, match="k1"):
        BM25(DOCUMENTS, k1=-1)
    with pytest.raises(ValueError, match="b must be in"):
        BM25(DOCUMENTS, b=1.5)
    with pytest.raises(ValueError, match="b must be in"):
        BM25(DOCUMENTS, b=float("nan"))
    with pytest.raises(TypeError, match="not a str"):
        BM25(DOCUMENTS).scores("cat")
    with pytest.raises(ValueError, match="k must be"):
        top_k(torch.zeros(1, 3), k=0)


def test_tokenize_lowercases_and_splits_on_non_alphanumerics():
    assert tokenize("BBC's £5.6bn deal, in 2004") == ["bbc", "s", "5", "6bn", "deal", "in", "2004"]
    with pytest.raises(TypeError):
        tokenize(["a"])


def test_recall_and_mrr_on_hand_examples():
    rankings = [[3, 1, 2], [0, 4, 5], [7, 8, 9]]
    relevant = [{1}, {5, 6}, {2}]
    assert recall_at_k(rankings, relevant, k=1) == 0.0
    assert recall_at_k(rankings, relevant, k=2) == pytest.approx(1 / 3)  # only query 0's passage, by rank 2
    assert recall_at_k(rankings, relevant, k=3) == pytest.approx((1 + 0.5 + 0) / 3)  # half of query 1's two
    assert recall_at_k(rankings, relevant, k=100) == recall_at_k(rankings, relevant, k=3)
    assert mean_reciprocal_rank(rankings, relevant) == pytest.approx((1 / 2 + 1 / 3 + 0) / 3)
    assert first_relevant_rank([7, 8, 9], {2}) is None
    with pytest.raises(ValueError, match="equal length"):
        recall_at_k(rankings, relevant[:2], k=1)
    with pytest.raises(ValueError, match="non-empty set"):
        mean_reciprocal_rank([[1]], [set()])


def test_dense_retrieval_with_minilm_matches_hugging_face():
    """MiniLM in our BertModel, mean-pooled and normalised by embed_texts, against HF's BertModel on the same ids:
    the sentence vectors and the cosine scores agree to float precision, and the ranking is the same."""
    from safetensors.torch import load_file
    from transformers import BertModel as HFBertModel

    from minformers.convert.bert import load_hf_bert
    from minformers.finetuning import encode_sentences
    from minformers.support import data
    from minformers.wordpiece import WordPieceTokenizer

    model_dir = data.minilm_dir()
    ours = BertModel(bert_config_from_hf(json.loads((model_dir / "config.json").read_text())))
    ours = load_hf_bert(ours, load_file(model_dir / "model.safetensors")).eval()
    theirs = HFBertModel.from_pretrained(model_dir).eval()
    tokenizer = WordPieceTokenizer.from_vocab_file(model_dir / "vocab.txt")
    passages = ["The bank raised interest rates to 4.75%.", "Chelsea won the match 2-0 at home.",
                "Shares in the carmaker fell after it recalled diesel cars.", "Rain is expected in the north."]
    questions = ["interest rates rose", "football result", "car recall"]
    vectors = embed_texts(ours, tokenizer, passages, batch_size=3)  # batches of mixed lengths: padding must not count

    ids, mask = encode_sentences(tokenizer, passages, max_len=128)
    with torch.no_grad():
        hidden = theirs(input_ids=ids, attention_mask=mask).last_hidden_state  # (N, T, C)
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    expected = pooled / pooled.norm(dim=1, keepdim=True)
    torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=0)
    scores = dense_scores(embed_texts(ours, tokenizer, questions), vectors)
    assert scores.shape == (3, 4)
    assert [row[0] for row in top_k(scores, k=1)] == [0, 1, 2]  # each question finds its passage


TINY_ENCODER = BertModel(BertConfig.tiny(vocab_size=40, d_model=16, n_heads=2, d_ff=32, max_len=64))
SPECIAL = {"cls": 1, "sep": 2, "pad": 0}


def test_pair_inputs_marks_shared_tokens_and_fits_max_len():
    ids, segments, mask = pair_inputs([5, 6, 7], [[7, 8], [9, 9, 9, 9, 9, 9, 9, 9, 9, 9]], SPECIAL, max_len=10)
    assert ids.tolist() == [[1, 5, 6, 7, 2, 7, 8, 2, 0, 0], [1, 5, 6, 7, 2, 9, 9, 9, 9, 2]]
    q, p, qm, pm = QUESTION, PASSAGE, QUESTION_MATCHED, PASSAGE_MATCHED
    assert segments.tolist() == [[q, q, q, qm, q, pm, p, p, q, q], [q, q, q, q, q, p, p, p, p, p]]
    assert mask.tolist() == [[1] * 8 + [0, 0], [1] * 10]
    _, plain, _ = pair_inputs([5, 6, 7], [[7, 8]], SPECIAL, match_hint=False)
    assert plain.tolist() == [[q] * 5 + [p] * 3]


def test_cross_encoder_starts_from_the_encoders_embeddings_and_freezes_its_tables():
    model = CrossEncoder.on_embeddings(TINY_ENCODER, d_model=8, n_layers=1, n_heads=2, max_len=32)
    ours, theirs = model.bert.embeddings, TINY_ENCODER.embeddings
    assert torch.equal(ours.token_embedding.weight, theirs.token_embedding.weight)
    assert torch.equal(ours.position_embedding.embedding.weight, theirs.position_embedding.embedding.weight[:32])
    assert torch.equal(ours.segment_embedding.weight[2], theirs.segment_embedding.weight[0])
    assert not ours.token_embedding.weight.requires_grad and ours.segment_embedding.weight.requires_grad
    scores = model(*pair_inputs([5, 6], [[6, 7], [8]], SPECIAL))
    assert scores.shape == (2,)
    with pytest.raises(ValueError, match="n_segments=4"):
        CrossEncoder(BertConfig.tiny(vocab_size=40))


def test_listwise_loss_is_cross_entropy_of_the_first_column():
    scores = torch.tensor([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]])
    losses = listwise_loss(scores)
    expected = -(scores.log_softmax(dim=1)[:, 0]).mean()
    torch.testing.assert_close(losses["loss"], expected)
    assert losses["accuracy"].item() == 0.5


def test_reranker_learns_to_put_the_passage_sharing_the_question_tokens_first():
    """A task only the match hint can solve quickly: each question is three random tokens, its passage holds them
    among random others, and the negatives are random passages. After a short training the reranker puts the right
    passage first far more often than the chance rate of 1 in 8."""
    torch.manual_seed(0)
    draw = random.Random(0)
    passages = [[draw.randrange(3, 40) for _ in range(12)] for _ in range(60)]
    questions = [draw.sample(passage, 3) for passage in passages]
    data = RerankingData(questions, passages, [{i} for i in range(60)], [list(range(60))] * 60)
    model = CrossEncoder.on_embeddings(TINY_ENCODER, d_model=16, n_layers=1, n_heads=2, max_len=32)
    batches = reranking_batches(data, SPECIAL, group_size=4, questions_per_step=8, hard_negatives=1, max_len=32)
    train(model, batches, reranking_loss(4), TrainConfig(steps=60, lr=3e-3, warmup_steps=5, eval_every=60),
          progress=False)
    rankings = [rerank(model, questions[i], draw.sample([p for p in range(60) if p != i], 7) + [i], passages,
                       SPECIAL, max_len=32) for i in range(60)]
    assert recall_at_k(rankings, [{i} for i in range(60)], k=1) > 0.5


def test_reranking_batches_put_the_relevant_passage_first_in_each_group():
    draw = random.Random(1)
    passages = [[draw.randrange(3, 40) for _ in range(5)] for _ in range(20)]
    data = RerankingData([[3]] * 20, passages, [{i} for i in range(20)], [[(i + 1) % 20] for i in range(20)])
    batches = reranking_batches(data, SPECIAL, group_size=3, questions_per_step=4, hard_negatives=1)
    ids, segments, mask = batches(0)
    assert ids.shape[0] == 12 and segments.shape == ids.shape == mask.shape
    assert torch.equal(batches(0)[0], ids)  # seeded by the step
    with pytest.raises(ValueError, match="hard_negatives"):
        reranking_batches(data, SPECIAL, group_size=2, hard_negatives=2)


def test_rerank_keeps_first_stage_order_on_ties():
    class Constant(torch.nn.Module):
        def forward(self, ids, segments, mask):
            return torch.zeros(len(ids))

    assert rerank(Constant(), [5], [4, 2, 9], [[1]] * 10, SPECIAL) == [4, 2, 9]
