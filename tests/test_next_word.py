"""BERT as a next-word predictor: the shifted targets by hand, the causal BERT against HF's decoder BERT
(BertLMHeadModel), no peeking at later tokens, the copy of a pretrained BERT, the no-fine-tuning [MASK] predictor
against one pass per prefix, the unigram floor, the attention share a causal mask removes, and short runs."""

import pytest
import torch
import torch.nn.functional as F
import transformers

from minformers.bert import BertConfig, BertForPreTraining
from minformers.convert.bert import hf_bert_config, hf_bert_state_dict
from minformers.gpt import GPT
from minformers.recipes.bert_pretraining import PretrainingRun
from minformers.recipes.news import news_corpus
from minformers.recipes.next_word import (
    MODELS,
    BertForNextWord,
    MaskedNextWord,
    NextWordRun,
    attention_to_later_tokens,
    block_losses,
    held_out,
    next_token_targets,
    next_word_losses,
    train_next_word,
    train_next_word_quietly,
    unigram_loss,
)
from minformers.recipes.objective_comparison import ObjectiveRun, causal_lm_losses
from minformers.support.parallel import map_in_workers

torch.set_num_threads(1)

TINY = BertConfig(vocab_size=99, d_model=32, n_layers=2, n_heads=4, d_ff=37, max_len=64, dropout=0.0)


@pytest.fixture(scope="module")
def corpus():
    return news_corpus(vocab_size=800, max_len=24, article_stride=12)  # the objectives tests' small corpus


def padded_ids(seed=0):
    """(4, 9) ids in [5, 99) and their mask: full, right-padded to 6 and to 2, and left-padded by 3."""
    input_ids = torch.randint(5, 99, (4, 9), generator=torch.Generator().manual_seed(seed))
    attention_mask = torch.ones(4, 9, dtype=torch.long)
    attention_mask[1, 6:] = attention_mask[2, 2:] = attention_mask[3, :3] = 0
    return input_ids.masked_fill(attention_mask == 0, 0), attention_mask


def test_next_token_targets_by_hand():
    ids = torch.tensor([[2, 7, 8, 3], [2, 9, 3, 0], [0, 0, 2, 5], [0, 0, 0, 0]])
    mask = (ids != 0).long()
    assert next_token_targets(ids, mask).tolist() == [
        [7, 8, 3, -100],  # the last position has no next token
        [9, 3, -100, -100],  # nor has a real token followed by padding
        [-100, -100, 5, -100],  # a pad before the first real token predicts nothing
        [-100, -100, -100, -100],
    ]
    assert next_token_targets(ids, mask.bool()).equal(next_token_targets(ids, mask))  # a bool mask works too
    assert next_token_targets(torch.tensor([[4]]), torch.tensor([[1]])).tolist() == [[-100]]
    with pytest.raises(ValueError, match=r"must both be \(B, T\)"):
        next_token_targets(ids, mask[:, :3])


def test_causal_lm_losses_are_the_mean_over_the_shifted_targets():
    ids, mask = padded_ids()
    ids, mask = ids[:3], mask[:3]  # right padding only, as in the news blocks
    logits = torch.randn(3, 9, 99, generator=torch.Generator().manual_seed(1))
    targets = next_token_targets(ids, mask)
    expected = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)

    def model(_):
        return logits

    torch.testing.assert_close(causal_lm_losses(model, ids, mask)["loss"], expected)


def test_bert_for_next_word_matches_hf_bert_lm_head_model():
    """HF's BertLMHeadModel (is_decoder=True) is BERT as a next-word predictor: same logits at every real token,
    and its loss on labels with -100 at padding (HF shifts them itself) equals ours on the shifted targets."""
    torch.manual_seed(0)
    ours = BertForNextWord(TINY).eval()
    config = hf_bert_config(TINY)
    config.is_decoder = True
    theirs = transformers.BertLMHeadModel(config).eval()
    state = {key: value for key, value in hf_bert_state_dict(ours).items() if not key.startswith("bert.pooler")}
    theirs.load_state_dict(state)  # strict: every HF weight comes from ours (HF's decoder BERT has no pooler)
    ids, mask = padded_ids()
    with torch.no_grad():
        logits = ours(ids, mask)
        output = theirs(input_ids=ids, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(logits[real], output.logits[real], atol=1e-5, rtol=0)
    # The losses agree on right-padded rows; with left padding HF also scores the last pad's guess of the first
    # real token, which next_token_targets leaves out.
    with torch.no_grad():
        right = theirs(input_ids=ids[:3], attention_mask=mask[:3], labels=ids[:3].masked_fill(mask[:3] == 0, -100))
    loss = F.cross_entropy(logits[:3].flatten(0, 1), next_token_targets(ids[:3], mask[:3]).flatten(),
                           ignore_index=-100)
    torch.testing.assert_close(loss, right.loss, atol=1e-5, rtol=0)


def test_no_position_reads_a_later_token_and_right_padding_needs_no_mask():
    torch.manual_seed(0)
    model = BertForNextWord(TINY).eval()
    ids, mask = padded_ids()
    changed = ids.clone()
    changed[:, 5:] = torch.randint(5, 99, (4, 4), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = model(ids)
        torch.testing.assert_close(model(changed)[:, :5], logits[:, :5], atol=1e-5, rtol=0)
        masked = model(ids[:3], mask[:3])  # the right-padded rows, with their mask
    torch.testing.assert_close(masked[mask[:3].bool()], logits[:3][mask[:3].bool()], atol=1e-5, rtol=0)


def test_from_pretraining_copies_encoder_and_head_and_keeps_them_tied():
    torch.manual_seed(0)
    pretrained = BertForPreTraining(TINY)
    before = {name: tensor.clone() for name, tensor in pretrained.state_dict().items()}
    model = BertForNextWord.from_pretraining(pretrained)
    assert model.mlm_head.decoder.weight is model.bert.embeddings.token_embedding.weight  # still tied
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name  # every weight but the NSP head's, copied
    torch.optim.SGD(model.parameters(), lr=1.0).zero_grad()
    next_word_losses(model, padded_ids())["loss"].backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    for name, tensor in pretrained.state_dict().items():
        assert torch.equal(tensor, before[name]), name  # training the copy leaves the pretrained model alone
    with pytest.raises(TypeError, match="model must be a BertForPreTraining"):
        BertForNextWord.from_pretraining(model)


def test_masked_next_word_is_one_mlm_pass_per_prefix():
    torch.manual_seed(0)
    pretrained = BertForPreTraining(TINY).eval()
    ids, mask = padded_ids()
    ids, mask = ids[:2], mask[:2]
    with torch.no_grad():
        logits = MaskedNextWord(pretrained, mask_id=4, chunk_size=1)(ids)  # chunks of one block: the loop runs
        assert logits.shape == (2, 9, 99) and not logits[:, -1].any()
        for row in range(2):
            for t in range(8):
                prefix = torch.cat([ids[row, : t + 1], torch.tensor([4])])[None]  # x_0..x_t [MASK]
                expected = pretrained(prefix).mlm_logits[0, -1]
                torch.testing.assert_close(logits[row, t], expected, atol=1e-5, rtol=0)


def test_unigram_loss_by_hand():
    blocks = torch.tensor([[2, 5, 5, 3], [2, 6, 3, 0]])
    mask = (blocks != 0).long()
    # training targets: 5, 5, 3, 6, 3 -> counts + 1 over V = 7: 5 -> 3, 3 -> 3, 6 -> 2, the other four 1: total 12
    held = torch.tensor([[2, 6, 4, 0]])
    expected = -(torch.tensor(2 / 12).log() + torch.tensor(1 / 12).log()) / 2  # targets 6 and 4
    assert unigram_loss(blocks, mask, held, (held != 0).long(), vocab_size=7) == pytest.approx(expected.item())


def test_block_losses_are_each_blocks_mean():
    torch.manual_seed(0)
    model = BertForNextWord(TINY).eval()
    ids, mask = padded_ids()
    ids, mask = ids[:3], mask[:3]
    losses = block_losses(model, ids, mask)
    for row in range(3):
        length = int(mask[row].sum())
        expected = next_word_losses(model, (ids[row : row + 1, :length], mask[row : row + 1, :length]))["loss"]
        assert losses[row].item() == pytest.approx(expected.item(), abs=1e-5)


def test_attention_to_later_tokens_of_uniform_attention():
    torch.manual_seed(0)
    model = BertForNextWord(TINY).bert.eval()
    for layer in model.layers:  # zero queries and keys: every score 0, attention uniform over the real keys
        for projection in (layer.attention.q_proj, layer.attention.k_proj):
            torch.nn.init.zeros_(projection.weight)
            torch.nn.init.zeros_(projection.bias)
    T = 8
    full = torch.randint(5, 99, (3, T))
    shares = attention_to_later_tokens(model, full, torch.ones(3, T, dtype=torch.long))
    assert shares == pytest.approx([(T - 1) / (2 * T)] * 2)
    half = torch.ones(3, T, dtype=torch.long)
    half[:, 4:] = 0  # 4 real tokens: the padding is never attended, so (4 - 1) / (2 * 4)
    assert attention_to_later_tokens(model, full, half) == pytest.approx([3 / 8] * 2)


def test_runs_read_the_objectives_pages_blocks_and_models(corpus):
    run = NextWordRun(steps=10, batch_size=4, validation_size=8)
    objective = ObjectiveRun("causal LM", steps=10, batch_size=4, validation_size=8)
    for step in (0, 3):
        ours, theirs = run.batches(corpus)(step), objective.batches(corpus)(step)
        assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])
    other = NextWordRun(steps=10, batch_size=4, data_seed=1).batches(corpus)(0)
    assert not torch.equal(other[0], run.batches(corpus)(0)[0])
    assert torch.equal(run.validation(corpus)[0], objective.validation(corpus)[0])
    gpt = run.model(corpus, "GPT")
    assert isinstance(gpt, GPT)
    for (name, ours), (_, theirs) in zip(gpt.state_dict().items(), objective.model(corpus).state_dict().items(),
                                         strict=True):
        assert torch.equal(ours, theirs), name
    scratch = run.model(corpus, "BERT from scratch")  # the BERT page's starting weights, with a zero output bias
    start = PretrainingRun(output_bias="zeros").model(corpus)  # like the GPT's output, which has no bias
    for name, tensor in scratch.state_dict().items():
        assert torch.equal(tensor, start.state_dict()[name]), name
    assert not torch.equal(NextWordRun(data_seed=1).model(corpus, "BERT from scratch").bert.pooler.weight,
                           scratch.bert.pooler.weight)
    with pytest.raises(ValueError, match="name must be one of"):
        run.model(corpus, "ELECTRA")
    with pytest.raises(ValueError, match="needs pretrained"):
        run.model(corpus, "pretrained BERT")
    with pytest.raises(ValueError, match="only the pretrained BERT run takes pretrained"):
        run.model(corpus, "GPT", pretrained=start)


@pytest.mark.parametrize("name", MODELS)
def test_a_short_run_learns_and_a_second_call_loads_it(corpus, name):
    run = NextWordRun(steps=12, batch_size=4, eval_every=6, validation_size=16)
    pretrained = PretrainingRun().model(corpus) if name == "pretrained BERT" else None
    pretraining = PretrainingRun() if name == "pretrained BERT" else None
    before = None if pretrained is None else {key: value.clone() for key, value in pretrained.state_dict().items()}
    first = train_next_word(corpus, run, name, pretrained, pretraining, progress=False)
    assert not first.model.training and first.history.eval_steps == [6, 12]
    assert set(first.history.eval) == {"val_loss", "val_accuracy"}
    assert first.history.train["loss"][-1] < first.history.train["loss"][0]
    assert first.history.last_eval("val_loss") == pytest.approx(held_out(first.model, run.validation(corpus))
                                                                ["val_loss"])
    again = train_next_word(corpus, run, name, pretrained, pretraining, progress=False)
    assert again.history.train == first.history.train
    if before is not None:
        assert all(torch.equal(value, before[key]) for key, value in pretrained.state_dict().items())


def test_a_quiet_run_in_workers_matches_a_run_in_process(corpus, capsys):
    run = NextWordRun(steps=4, batch_size=4, eval_every=2, validation_size=8)
    here = train_next_word(corpus, run, "GPT", progress=False)
    capsys.readouterr()
    [there] = map_in_workers(train_next_word_quietly, [(corpus, run, "GPT", None, None)], workers=1)
    assert capsys.readouterr() == ("", "")
    assert there.history.train == here.history.train  # the worker loaded the same run's checkpoint


def test_bad_settings_are_refused(corpus):
    for changes, message in [({"steps": 1}, "steps must be >= 2"), ({"lr": 0.0}, "lr must be > 0"),
                             ({"batch_size": 0}, "batch_size must be >= 1"),
                             ({"data_seed": -1}, "data_seed must be >= 0")]:
        with pytest.raises(ValueError, match=message):
            NextWordRun(**changes)
    with pytest.raises(ValueError, match="give pretrained and pretraining together"):
        train_next_word(corpus, NextWordRun(steps=2), "GPT", pretraining=PretrainingRun())
    assert NextWordRun(steps=5, eval_every=20).schedule.eval_every == 5  # never more than the run
