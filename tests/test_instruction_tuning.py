"""The instruction-tuning recipe: the format and answers by hand, held-out words kept out of training, and short
runs that train, reload from their checkpoint and answer in the format."""

import pytest
import torch

from minformers.recipes.instruction_tuning import (
    END,
    Example,
    SFTRun,
    answers,
    exact_match,
    fine_tune,
    held_out_examples,
    task_words,
)
from minformers.recipes.language_model_run import LMRun
from minformers.train import TrainConfig

torch.set_num_threads(1)
TINY_BASE = LMRun(schedule=TrainConfig(steps=2, lr=3e-3, warmup_steps=1, eval_every=2), batch_size=2,
                  validation_windows=2, sample_length=0, model_changes=(("n_layers", 1),))


def tiny_run(**changes) -> SFTRun:
    schedule = TrainConfig(steps=4, lr=1e-3, warmup_steps=1, eval_every=4)
    return SFTRun(**{"schedule": schedule, "batch_size": 4, "base": TINY_BASE, **changes})


@pytest.fixture(autouse=True)
def checkpoints_in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.setenv("MINFORMERS_CHECKPOINTS", str(tmp_path))


def test_the_format_and_answers_by_hand():
    assert Example("spell", "night").prompt == "Q: spell night\nA: "
    assert Example("spell", "night").response == "n-i-g-h-t" + END
    assert Example("shout", "night").response == "NIGHT@"
    assert Example("reverse", "abc").response == "cba@"


def test_held_out_words_never_appear_in_training():
    split = task_words()
    assert not set(split["train"]) & set(split["held_out"])
    everything = sorted(split["train"] + split["held_out"])
    assert everything[::4] == split["held_out"]
    assert all(3 <= len(word) <= 7 and word.isalpha() and word.islower() for word in everything)
    examples = held_out_examples(per_task=5)
    assert len(examples) == 15 and {e.word for e in examples} <= set(split["held_out"])
    assert examples == held_out_examples(per_task=5)  # the same words every time


@pytest.mark.parametrize("start", ["pretrained", "scratch"])
def test_a_short_run_trains_reloads_and_answers(start):
    model, history = fine_tune(tiny_run(start=start), progress=False)
    assert len(history.train["loss"]) == 4 and all(loss > 0 for loss in history.train["loss"])
    again, same = fine_tune(tiny_run(start=start), progress=False)
    assert same.train == history.train
    for mine, theirs in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(mine, theirs)
    examples = held_out_examples(per_task=2)
    written = answers(model, examples)
    assert len(written) == 6 and all(END not in text for text in written)
    assert exact_match(model, examples) == [a == e.response[:-1] for a, e in zip(written, examples, strict=True)]


def test_the_loss_on_every_token_is_another_run():
    response_only = fine_tune(tiny_run(), progress=False)[1].train["loss"]
    every_token = fine_tune(tiny_run(loss_on="all"), progress=False)[1].train["loss"]
    assert response_only[0] != every_token[0]


def test_bad_runs_are_refused():
    with pytest.raises(ValueError, match="start must be"):
        SFTRun(start="random")
    with pytest.raises(ValueError, match="loss_on must be"):
        SFTRun(loss_on="prompt")
