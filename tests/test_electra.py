"""ELECTRA: the generator and discriminator equal HF's ElectraForMaskedLM and ElectraForPreTraining with the same
weights; replaced-token labels mark exactly the replaced positions; no gradient crosses the sampling."""

import pytest
import torch
import transformers

from minformers.bert import BertConfig
from minformers.convert.bert import hf_electra_config, hf_electra_state_dict
from minformers.electra import Electra, electra_forward, generator_config
from minformers.objectives import IGNORE_INDEX, mask_tokens

VOCAB = 60
SPECIAL = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]


@pytest.fixture
def model() -> Electra:
    torch.manual_seed(0)
    return Electra(BertConfig.tiny(vocab_size=VOCAB, d_model=64, n_heads=4, d_ff=128)).eval()  # no dropout


@pytest.fixture
def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(5, VOCAB, (3, 10), generator=torch.Generator().manual_seed(1))
    ids[:, 0], ids[:, -1] = 2, 3
    attention_mask = torch.ones_like(ids)
    attention_mask[1, 7:] = 0  # a padded row
    ids[1, 7:] = 0
    return ids, attention_mask


def test_discriminator_equals_hf_electra_for_pretraining(model, inputs):
    ids, attention_mask = inputs
    theirs = transformers.ElectraForPreTraining(hf_electra_config(model.config)).eval()
    theirs.load_state_dict(hf_electra_state_dict(model, "discriminator"), strict=True)
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=attention_mask).logits
        ours = model.discriminator(ids, attention_mask=attention_mask)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_generator_equals_hf_electra_for_masked_lm(model, inputs):
    ids, attention_mask = inputs
    config = model.generator.config
    assert (config.d_model, config.embedding_width) == (16, 64)  # a quarter of the width, the shared tables' width
    theirs = transformers.ElectraForMaskedLM(hf_electra_config(config)).eval()
    theirs.load_state_dict(hf_electra_state_dict(model, "generator"), strict=True)
    with torch.no_grad():
        expected = theirs(input_ids=ids, attention_mask=attention_mask).logits
        ours = model.generator(ids, attention_mask=attention_mask).mlm_logits
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)


def test_embeddings_are_one_set_of_tensors_trained_by_both_losses(model, inputs):
    ids, attention_mask = inputs
    shared = model.discriminator.bert.embeddings.token_embedding.weight
    assert model.generator.mlm_head.decoder.weight is shared
    masked, labels = mask_tokens(ids, VOCAB, 4, SPECIAL, p=0.3, generator=torch.Generator().manual_seed(0))
    output = electra_forward(model, masked, labels, attention_mask=attention_mask,
                             generator=torch.Generator().manual_seed(0))
    (mlm_grad,) = torch.autograd.grad(output.mlm_loss, shared, retain_graph=True)
    (rtd_grad,) = torch.autograd.grad(output.rtd_loss, shared)
    assert mlm_grad.abs().sum() > 0 and rtd_grad.abs().sum() > 0


def test_no_gradient_flows_through_the_sampling(model, inputs):
    ids, attention_mask = inputs
    masked, labels = mask_tokens(ids, VOCAB, 4, SPECIAL, p=0.3, generator=torch.Generator().manual_seed(0))
    output = electra_forward(model.train(), masked, labels, attention_mask=attention_mask,
                             generator=torch.Generator().manual_seed(0))
    output.rtd_loss.backward()
    generator_only = [parameter for name, parameter in model.generator.named_parameters()
                      if "layers" in name or "mlm_head.dense" in name]
    assert generator_only and all(p.grad is None for p in generator_only)
    torch.testing.assert_close(output.loss, output.mlm_loss + 50.0 * output.rtd_loss)


def test_labels_mark_exactly_the_replaced_positions(model, inputs):
    ids, attention_mask = inputs
    masked, labels = mask_tokens(ids, VOCAB, 4, SPECIAL, p=0.5, generator=torch.Generator().manual_seed(3))
    chosen = labels != IGNORE_INDEX
    # Make the generator sample one token almost surely, and plant that token as the original at a masked position:
    # there the sample equals the original, and the position must be labelled original (0).
    favourite = 7
    with torch.no_grad():
        model.generator.mlm_head.decoder.bias.fill_(-30.0)
        model.generator.mlm_head.decoder.bias[favourite] = 30.0
    row, column = chosen.nonzero()[0].tolist()
    ids[row, column] = labels[row, column] = favourite
    output = electra_forward(model, masked, labels, attention_mask=attention_mask,
                             generator=torch.Generator().manual_seed(0))
    assert torch.equal(output.rtd_labels, (output.corrupted_ids != ids).float())
    assert output.rtd_labels[row, column] == 0 and output.corrupted_ids[row, column] == favourite
    assert torch.equal(output.corrupted_ids[~chosen], ids[~chosen])  # only masked positions change
    assert output.rtd_labels[~chosen].sum() == 0
    replaced = chosen & (ids != favourite)
    assert replaced.any() and bool(output.rtd_labels[replaced].eq(1).all())


def test_generator_config_rejects_a_width_it_cannot_split():
    with pytest.raises(ValueError, match="divisor"):
        generator_config(BertConfig.tiny(vocab_size=VOCAB), divisor=3)
