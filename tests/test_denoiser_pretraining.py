"""The denoising pretraining recipe: which target tokens count as hidden, the split losses, checkpoint reuse, a quiet
run, and clear errors."""

import random
import re

import pytest
import torch

from minformers.encoder_decoder import EOS, EncoderDecoder
from minformers.recipes.denoiser_pretraining import (
    OBJECTIVES,
    DenoisingIds,
    DenoisingRun,
    corrupt,
    denoising_batch,
    denoising_scores,
    pretrain_denoiser,
    pretrain_denoiser_quietly,
)
from minformers.train import TrainConfig

IDS = DenoisingIds(mask=3, sentinels=tuple(range(4, 28)))
VOCAB = 60


def sentences(count, seed):
    rng = random.Random(seed)
    return [[rng.randrange(28, VOCAB) for _ in range(rng.randrange(4, 20))] for _ in range(count)]


def test_bart_hides_exactly_the_tokens_its_masks_replaced():
    rng = random.Random(0)
    for tokens in sentences(200, 1):
        example = corrupt("BART text infilling", tokens, IDS, rng)
        assert example.targets == [*tokens, EOS] and not example.hidden[-1]
        kept = [token for token, hidden in zip(example.targets, example.hidden, strict=True) if not hidden]
        assert kept == [token for token in example.inputs if token != IDS.mask]  # the rest is copied, in order
        assert sum(example.hidden) == round(0.3 * len(tokens))  # BART's 30% of the tokens


def test_t5_hides_the_span_tokens_and_not_the_sentinels():
    rng = random.Random(0)
    for tokens in sentences(200, 2):
        example = corrupt("T5 span corruption", tokens, IDS, rng)
        spans = [token for token in example.targets[:-1] if token not in IDS.sentinels]
        assert [token for token, hidden in zip(example.targets, example.hidden, strict=True) if hidden] == spans
        assert len(spans) + sum(token not in IDS.sentinels for token in example.inputs[:-1]) == len(tokens)
        assert example.inputs[-1] == example.targets[-1] == EOS


def test_split_losses_average_back_to_the_whole():
    torch.manual_seed(0)
    model = EncoderDecoder(DenoisingRun("BART text infilling").config(VOCAB)).eval()
    batch = denoising_batch("BART text infilling", sentences(16, 3), IDS, seed=0)
    scores = denoising_scores(model, batch)
    real = batch.targets != 0
    hidden, shown = batch.hidden.sum().item(), (real & ~batch.hidden).sum().item()
    whole = (scores["hidden_loss"] * hidden + scores["shown_loss"] * shown) / (hidden + shown)
    assert scores["loss"] == pytest.approx(whole, rel=1e-5)
    assert 0.0 <= scores["shown_accuracy"] <= 1.0


def test_a_second_run_loads_the_first_and_a_quiet_one_prints_nothing(capsys):
    run = DenoisingRun("T5 span corruption", TrainConfig(steps=4, lr=1e-3, warmup_steps=1, eval_every=2),
                       batch_size=4)
    job = (run, sentences(40, 4), sentences(8, 5), IDS, VOCAB)
    first, history = pretrain_denoiser(*job, progress=False)
    capsys.readouterr()
    second, again = pretrain_denoiser_quietly(job)
    assert capsys.readouterr() == ("", "")
    assert again.eval == history.eval and again.train == history.train  # loaded, not trained again
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(),
                                                 strict=True))
    assert set(history.eval) == {"val_loss", "val_hidden_loss", "val_shown_loss", "val_shown_accuracy"}


@pytest.mark.parametrize("call", [
    lambda: corrupt("MLM", [30, 31], IDS, random.Random(0)),
    lambda: pretrain_denoiser(DenoisingRun("GPT"), sentences(8, 0), sentences(2, 0), IDS, VOCAB),
])
def test_an_unknown_objective_is_refused_by_name(call):
    with pytest.raises(ValueError, match=re.escape(f"objective must be one of {OBJECTIVES}")):
        call()
