"""The character-model recipe: both architectures train on the same windows, keep their samples, and reload."""

import pytest
import torch

from minformers.gpt import GPT
from minformers.llama import LlamaForCausalLM
from minformers.recipes.language_model_run import LMRun, train_language_model
from minformers.recipes.shakespeare_gpt import PROMPT, shakespeare_characters
from minformers.train import TrainConfig

torch.set_num_threads(1)


@pytest.mark.parametrize("architecture, kind", [("gpt", GPT), ("llama", LlamaForCausalLM)])
def test_a_short_run_records_samples_and_reloads(architecture, kind):
    corpus = shakespeare_characters()
    run = LMRun(architecture=architecture, schedule=TrainConfig(steps=6, lr=3e-3, warmup_steps=1, eval_every=3),
                  batch_size=2, validation_windows=4, sample_length=10, model_changes=(("n_layers", 1),))
    model, history = train_language_model(corpus, run, progress=False)
    assert isinstance(model, kind) and not model.training
    assert history.eval_steps == [3, 6] and len(history.text["sample"]) == 2
    assert all(text.startswith(PROMPT) and len(text) == len(PROMPT) + 10 for text in history.text["sample"])
    again, same = train_language_model(corpus, run, progress=False)
    assert same.train == history.train and same.text == history.text


def test_the_two_architectures_have_about_the_same_size():
    from minformers.gpt import count_parameters as gpt_parameters
    from minformers.llama import count_parameters as llama_parameters

    corpus = shakespeare_characters()
    gpt, llama = gpt_parameters(LMRun().config(corpus)), llama_parameters(LMRun("llama").config(corpus))
    assert abs(gpt - llama) / gpt < 0.03, (gpt, llama)


def test_unknown_architecture_is_refused():
    with pytest.raises(ValueError, match="architecture"):
        LMRun(architecture="rwkv")


def test_write_samples_gives_the_same_texts_for_a_seed_and_prints_nothing(monkeypatch, capsys):
    from minformers.recipes import shakespeare_gpt
    from minformers.support.runtime import log

    corpus = shakespeare_characters()
    torch.manual_seed(0)
    model = GPT(LMRun(model_changes=(("n_layers", 1),)).config(corpus)).eval()  # untrained: only the plumbing
    monkeypatch.setattr(shakespeare_gpt, "train_language_model", lambda *args, **kwargs: log("training") or (model,))
    first = shakespeare_gpt.write_samples({"temperature": 1.0}, PROMPT, samples=3, length=12, seed=5)
    assert len(first) == 3 and all(len(text) == 12 for text in first) and len(set(first)) > 1
    assert shakespeare_gpt.write_samples({"temperature": 1.0}, PROMPT, samples=3, length=12, seed=5) == first
    assert shakespeare_gpt.write_samples({"temperature": 0}, PROMPT, samples=2, length=12, seed=5)[0] in (
        shakespeare_gpt.write_samples({"temperature": 0}, PROMPT, samples=1, length=12, seed=9))  # greedy: no draws
    assert capsys.readouterr() == ("", "")


def test_the_scored_windows_average_to_the_runs_own_validation_loss():
    from minformers.recipes.decoder_comparison import scored_run, unigram_floor

    run = LMRun(schedule=TrainConfig(steps=4, lr=3e-3, warmup_steps=1, eval_every=4), batch_size=2,
                validation_windows=5, sample_length=0, model_changes=(("n_layers", 1),))
    history, losses = scored_run(run)
    assert len(losses) == 5
    assert abs(sum(losses) / len(losses) - history.last_eval("val_loss")) < 1e-5  # float32 means in another order
    assert unigram_floor(shakespeare_characters(), run) > 0
