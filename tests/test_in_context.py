"""The key -> value task: prompts carry their answers exactly when the key was shown, batches are reproducible, and
a model that reads the prompt perfectly scores the ideal accuracy."""

import pytest
import torch

from minformers.attention_patterns import uniform_causal_weights
from minformers.in_context import KeyValueTask, query_correct, query_loss, weight_on_match

TASK = KeyValueTask(n_keys=5, n_values=4, n_queries=6)


def decode(task, batch, row):
    """The row's examples as {key: value} and its queries as keys, read back from token ids."""
    n = batch.input_ids.shape[1] - task.n_queries
    examples = {t // task.n_values: t % task.n_values for t in batch.input_ids[row, :n].tolist()}
    queries = [t - task.n_keys * task.n_values for t in batch.input_ids[row, n:].tolist()]
    return examples, queries


@pytest.mark.parametrize("n_examples", [0, 1, 3, 5])
def test_answers_are_in_the_prompt_exactly_when_the_key_was_shown(n_examples):
    batch = TASK.batch(seed=3, n_examples=n_examples, batch_size=20)
    assert batch.input_ids.shape == (20, n_examples + TASK.n_queries)
    for row in range(20):
        examples, queries = decode(TASK, batch, row)
        assert len(examples) == n_examples  # distinct keys
        for query, answer, shown in zip(queries, batch.answers[row].tolist(), batch.shown[row].tolist(), strict=True):
            assert 0 <= query < TASK.n_keys and shown == (query in examples)
            if shown:
                assert answer == TASK.answer_token(examples[query])


def test_batches_are_reproducible_and_maps_differ_between_rows():
    one, again = TASK.batch(seed=7), TASK.batch(seed=7)
    assert torch.equal(one.input_ids, again.input_ids) and torch.equal(one.answers, again.answers)
    assert not torch.equal(one.input_ids, TASK.batch(seed=8).input_ids)
    full = KeyValueTask(n_keys=8, n_values=8).batch(seed=0, n_examples=8, batch_size=16)
    assert len({tuple(sorted(row.tolist())) for row in full.input_ids[:, :8]}) == 16  # 16 different maps


class PromptReader(torch.nn.Module):
    """A hand-written perfect model: looks up the query's key among the examples; guesses value 0 otherwise."""

    def __init__(self, task):
        super().__init__()
        self.task = task

    def forward(self, input_ids):
        task, (batch, length) = self.task, input_ids.shape
        logits = torch.zeros(batch, length, task.vocab_size)
        for row in range(batch):
            known = {}
            for position, token in enumerate(input_ids[row].tolist()):
                if token < task.n_keys * task.n_values:
                    known[token // task.n_values] = token % task.n_values
                else:
                    key = token - task.n_keys * task.n_values
                    logits[row, position, task.answer_token(known.get(key, 0))] = 1.0
        return logits


def test_a_perfect_prompt_reader_scores_the_ideal_accuracy():
    reader, task = PromptReader(TASK), TASK
    batch = task.batch(seed=0, n_examples=2, batch_size=2000)
    correct = query_correct(reader, batch)
    assert correct[batch.shown].all()
    chance = correct[~batch.shown].float().mean().item()
    assert chance == pytest.approx(1 / task.n_values, abs=0.02)  # 9,600 guesses: about 4 standard errors
    assert correct.float().mean().item() == pytest.approx(task.ideal_accuracy(2), abs=0.02)
    assert query_loss(reader, batch).dim() == 0


def test_matching_example_points_at_the_example_with_the_querys_key():
    batch = TASK.batch(seed=1, n_examples=3, batch_size=50)
    matching = TASK.matching_example(batch)
    assert torch.equal(matching >= 0, batch.shown)
    for row in range(50):
        examples = batch.input_ids[row, :3].tolist()
        queries = decode(TASK, batch, row)[1]
        for query, index in zip(queries, matching[row].tolist(), strict=True):
            if index >= 0:
                assert examples[index] // TASK.n_values == query


def test_weight_on_match_scores_a_reading_head_one_and_an_even_head_its_share():
    batch = TASK.batch(seed=2, n_examples=4, batch_size=30)
    B, T = batch.input_ids.shape
    reader = torch.zeros(1, B, 2, T, T)  # head 0 reads the matching example; head 1 reads the first token
    reader[..., 0] = 1.0
    matching = TASK.matching_example(batch)
    for row, query in zip(*torch.nonzero(batch.shown, as_tuple=True), strict=True):
        position = 4 + query  # the query's position in the prompt
        reader[0, row, 0, position] = 0.0
        reader[0, row, 0, position, matching[row, query]] = 1.0
    score = weight_on_match(TASK, reader, batch)
    assert score.shape == (1, 2) and score[0, 0] == 1.0
    assert score[0, 1] == pytest.approx((matching[batch.shown] == 0).float().mean().item())
    # Spread evenly, the query at position p gives 1 / (p + 1) to each token at or before it.
    even = weight_on_match(TASK, uniform_causal_weights(1, B, 1, T), batch)
    positions = torch.arange(4, T).expand(B, -1)[batch.shown]
    assert even.item() == pytest.approx((1 / (positions + 1)).mean().item())
    with pytest.raises(ValueError, match="no query's key was shown"):
        zero = TASK.batch(seed=2, n_examples=0, batch_size=3)
        weight_on_match(TASK, uniform_causal_weights(1, 3, 1, TASK.n_queries), zero)
    with pytest.raises(ValueError, match="weights must be"):
        weight_on_match(TASK, reader[0], batch)


def test_bad_counts_are_refused():
    with pytest.raises(ValueError, match="n_examples"):
        TASK.batch(seed=0, n_examples=6)
    with pytest.raises(ValueError, match="n_keys"):
        KeyValueTask(n_keys=0)
