"""The encoder-decoder: identical to torch.nn.Transformer on the same weights (post-LN and pre-LN, both
directions of conversion), teacher forcing, padding, and decoding (cached = uncached, beam 1 = greedy, a wide
beam finds the exhaustive optimum)."""

import itertools

import pytest
import torch
from torch import nn

from minformers.convert.pytorch import load_torch_transformer, to_torch_transformer
from minformers.encoder_decoder import BOS, EOS, PAD, EncoderDecoder, TransformerConfig, sequence_loss, shift_right
from minformers.seq2seq_decoding import beam_search, greedy_decode

torch.set_num_threads(1)


def tiny(**changes) -> EncoderDecoder:
    torch.manual_seed(0)
    return EncoderDecoder(TransformerConfig.tiny(source_vocab_size=11, target_vocab_size=13, **changes))


def batch():
    source = torch.tensor([[5, 6, 7, 8, EOS], [9, 4, EOS, PAD, PAD]])
    targets = torch.tensor([[3, 4, 5, EOS], [6, EOS, PAD, PAD]])
    return source, targets


def torch_logits(model: EncoderDecoder, theirs: nn.Transformer, source, target_inputs):
    """Our embeddings and output layer around torch's stacks; torch's bool masks mean True = blocked."""
    src, tgt = model._embed(model.source_embedding, source), model._embed(model.target_embedding, target_inputs)
    causal = torch.triu(torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool), diagonal=1)
    hidden = theirs(src, tgt, tgt_mask=causal, src_key_padding_mask=source == PAD,
                    memory_key_padding_mask=source == PAD)
    return hidden @ model.target_embedding.weight.T


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")  # torch's note on pre-LN and its fast path
@pytest.mark.parametrize("norm_first", [False, True])
def test_same_logits_as_torch_transformer_both_ways(norm_first):
    model = tiny(norm_first=norm_first).train()  # dropout is 0; train mode keeps torch off its fast path
    source, targets = batch()
    inputs = shift_right(targets)
    theirs = to_torch_transformer(model).train()
    torch.testing.assert_close(model(source, inputs), torch_logits(model, theirs, source, inputs),
                               atol=1e-5, rtol=1e-5)
    torch.manual_seed(1)
    fresh = nn.Transformer(64, 4, 2, 2, 256, 0.0, batch_first=True, norm_first=norm_first).train()
    if not norm_first:
        fresh.encoder.norm = fresh.decoder.norm = None
    load_torch_transformer(model, fresh)
    torch.testing.assert_close(model(source, inputs), torch_logits(model, fresh, source, inputs),
                               atol=1e-5, rtol=1e-5)


def test_post_ln_refuses_torch_final_norms():
    model = tiny()
    theirs = nn.Transformer(64, 4, 2, 2, 256, 0.0, batch_first=True)
    with pytest.raises(ValueError, match="final norms differ"):
        load_torch_transformer(model, theirs)


def test_source_padding_changes_nothing():
    model = tiny().eval()
    source, targets = batch()
    padded = torch.cat([source, torch.full((2, 3), PAD)], dim=1)
    inputs = shift_right(targets)
    torch.testing.assert_close(model(source, inputs), model(padded, inputs), atol=1e-5, rtol=1e-5)


def test_loss_ignores_target_padding():
    model = tiny().eval()
    source, targets = batch()
    logits = model(source, shift_right(targets))
    short = model(source[1:, :3], shift_right(targets[1:, :2]))
    assert sequence_loss(logits[1:], targets[1:]).item() == pytest.approx(sequence_loss(short, targets[1:, :2]).item(),
                                                                        rel=1e-5)
    assert shift_right(targets)[0].tolist() == [BOS, 3, 4, 5]


def test_cached_decoding_equals_uncached_and_beam_one_equals_greedy():
    model = tiny().eval()
    source, _ = batch()
    greedy = greedy_decode(model, source, max_len=12)
    assert torch.equal(greedy, greedy_decode(model, source, max_len=12, use_cache=False))
    assert torch.equal(greedy, beam_search(model, source, beam_size=1, max_len=12))


def sequence_log_prob(model, source, output) -> float:
    targets = torch.tensor([output])
    logits = model(source, shift_right(targets)).log_softmax(-1)
    return logits[0, torch.arange(len(output)), targets[0]].sum().item()


def test_a_beam_as_wide_as_the_tree_finds_the_most_likely_output():
    """Alpha 0 ranks by log-probability. With V = 5 and 3 steps, a beam of 25 keeps every prefix of length 2, so
    it must find the best of all outputs: EOS at the end, or 3 tokens without EOS (cut by max_len)."""
    torch.manual_seed(3)
    model = EncoderDecoder(TransformerConfig.tiny(source_vocab_size=6, target_vocab_size=5)).eval()
    source = torch.tensor([[3, 4, EOS]])
    words = [token for token in range(5) if token != EOS]
    candidates = [[*prefix, EOS] for n in range(3) for prefix in itertools.product(words, repeat=n)]
    candidates += [list(prefix) for prefix in itertools.product(words, repeat=3)]
    with torch.no_grad():
        best = max(candidates, key=lambda output: sequence_log_prob(model, source, output))
    found = beam_search(model, source, beam_size=25, max_len=3, alpha=0.0)[0]
    assert found[found != PAD].tolist() == best


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m(torch.tensor([[20]]), torch.tensor([[BOS]])), ValueError, "source_ids must be in"),
    (lambda m: m(torch.tensor([[4.0]]), torch.tensor([[BOS]])), TypeError, "must be an integer tensor"),
    (lambda m: greedy_decode(m, torch.tensor([[4, EOS]]), max_len=64), ValueError, "max_len"),
    (lambda m: beam_search(m, torch.tensor([[4, EOS]]), beam_size=0, max_len=5), ValueError, "beam_size"),
])  # fmt: skip
def test_bad_inputs_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call(tiny())


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings"):
        TransformerConfig.tiny(source_vocab_size=10, target_vocab_size=12, share_embeddings=True)
    model = EncoderDecoder(TransformerConfig.tiny(source_vocab_size=10, target_vocab_size=10, share_embeddings=True))
    assert model.source_embedding.weight is model.target_embedding.weight
