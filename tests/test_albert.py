"""ALBERT as a configuration of our BERT: a factorized embedding and one block shared by every layer. Parameter
counts equal Hugging Face's AlbertModel and AlbertForPreTraining built from the same sizes, exactly."""

import pytest
import torch
import transformers

from minformers.bert import BertConfig, BertForPreTraining, BertModel, count_parameters
from minformers.convert.bert import hf_albert_config, hf_bert_config


def hf_count(model_class, config: BertConfig) -> int:
    with torch.device("meta"):
        return sum(parameter.numel() for parameter in model_class(hf_albert_config(config)).parameters())


@pytest.mark.parametrize("config", [BertConfig.albert("base"), BertConfig.albert("large"),
                                    BertConfig.tiny(vocab_size=500, embedding_size=32, share_layers=True)],
                         ids=["base", "large", "tiny"])
def test_parameter_counts_equal_hf_albert(config):
    assert count_parameters(config, heads=False) == hf_count(transformers.AlbertModel, config)
    assert count_parameters(config) == hf_count(transformers.AlbertForPreTraining, config)


def test_albert_base_is_a_tenth_of_bert_base():
    albert, bert = count_parameters(BertConfig.albert(), heads=False), count_parameters(BertConfig.base(), heads=False)
    assert round(albert / 1e6, 1) == 11.7 and round(bert / 1e6) == 109  # the papers' "12 M" and "110 M"


def test_a_shared_layer_is_one_set_of_tensors():
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny(vocab_size=100, n_layers=4, embedding_size=16, share_layers=True))
    assert all(layer is model.layers[0] for layer in model.layers)
    pointers = {parameter.data_ptr() for layer in model.layers for parameter in layer.parameters()}
    assert len(pointers) == len(list(model.layers[0].parameters()))
    model(torch.tensor([[2, 5, 3]])).hidden_states.sum().backward()  # every use adds to the one gradient
    with torch.no_grad():
        model.layers[0].feed_forward.up_proj.weight.add_(1.0)
    assert torch.equal(model.layers[3].feed_forward.up_proj.weight, model.layers[0].feed_forward.up_proj.weight)


def test_factorized_embedding_shapes_and_tied_mlm_decoder():
    model = BertForPreTraining(BertConfig.tiny(vocab_size=100, embedding_size=16, share_layers=True))
    embeddings = model.bert.embeddings
    assert embeddings.token_embedding.weight.shape == (100, 16) and embeddings.projection.weight.shape == (128, 16)
    assert model.mlm_head.decoder.weight is embeddings.token_embedding.weight
    out = model(torch.tensor([[2, 5, 6, 3]]))
    assert out.mlm_logits.shape == (1, 4, 100) and out.hidden_states.shape == (1, 4, 128)


def test_albert_configs_do_not_pretend_to_be_hf_bert():
    with pytest.raises(ValueError, match="ALBERT-style"):
        hf_bert_config(BertConfig.albert())
    with pytest.raises(ValueError, match="size"):
        BertConfig.albert("huge")
