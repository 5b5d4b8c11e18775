"""Attention: parity with torch's scaled_dot_product_attention and nn.MultiheadAttention, masks, and the errors
MultiHeadAttention (the entry point) gives on bad input."""


import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minformers.attention import MultiHeadAttention, scaled_dot_product_attention
from minformers.masks import causal_mask, combine_masks, padding_mask, sliding_window_mask

B, H, T, D = 2, 3, 5, 4


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


def qkv(t_q=T, t_k=T):
    return torch.randn(B, H, t_q, D), torch.randn(B, H, t_k, D), torch.randn(B, H, t_k, D)


MASKS = {
    "none": None,
    "padding": padding_mask(torch.tensor([3, 5])),
    "causal": causal_mask(T),
    "sliding": sliding_window_mask(T, window=2),
    "combined": combine_masks(
        padding_mask(torch.tensor([3, 5])), sliding_window_mask(T, window=3, causal=False)
    ),
}



def test_hand_computed_example():
    # Scores q.k / sqrt(2): [0, 2/sqrt(2)] -> weights softmax([0, sqrt(2)]).
    q = torch.tensor([[1.0, 1.0]])
    k = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    v = torch.tensor([[10.0], [20.0]])
    p = torch.exp(torch.tensor(2**0.5)) / (1 + torch.exp(torch.tensor(2**0.5)))
    output, weights = scaled_dot_product_attention(q, k, v, return_weights=True)
    assert torch.allclose(weights, torch.stack([1 - p, p])[None])
    assert torch.allclose(output, (10 * (1 - p) + 20 * p).reshape(1, 1))


@pytest.mark.parametrize("name", MASKS)
def test_matches_torch_sdpa(name):
    q, k, v = qkv()
    mask = MASKS[name]
    ours, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.allclose(ours, theirs, atol=1e-6)
    assert torch.allclose(weights.sum(-1), torch.ones(B, H, T), atol=1e-6)
    if mask is not None:
        assert not weights.masked_select(~mask.expand_as(weights)).any()


def test_cross_attention_shapes_match_torch():
    q, k, v = qkv(t_q=2, t_k=7)
    v = torch.randn(B, H, 7, 6)  # D_v may differ from D
    ours = scaled_dot_product_attention(q, k, v, mask=causal_mask(2, t_k=7))
    assert ours.shape == (B, H, 2, 6)
    assert torch.allclose(
        ours, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(2, t_k=7)), atol=1e-6
    )


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = qkv()
    q.requires_grad_(True)
    mask = causal_mask(T).clone()
    mask[2] = False  # query 2 may attend nothing
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert torch.equal(output[:, :, 2], torch.zeros(B, H, D))
    assert torch.equal(weights[:, :, 2], torch.zeros(B, H, T))
    assert not output.isnan().any()
    output.sum().backward()
    assert torch.isfinite(q.grad).all()
    # torch 2.13 on CPU also returns zeros for a fully masked row (releases before 2.5 returned NaN),
    # so the whole output is compared, that row included.
    assert torch.allclose(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6)


def test_dropout_only_in_training():
    q, k, v = qkv()
    assert torch.equal(
        scaled_dot_product_attention(q, k, v, dropout_p=0.5), scaled_dot_product_attention(q, k, v)
    )
    _, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=True, return_weights=True)
    assert (weights == 0).any()


def torch_twin(ours: MultiHeadAttention) -> nn.MultiheadAttention:
    """nn.MultiheadAttention with our weights: its in_proj_weight is q, k, v stacked along dim 0."""
    theirs = nn.MultiheadAttention(ours.d_model, ours.n_heads, batch_first=True)
    with torch.no_grad():
        projections = (ours.q_proj, ours.k_proj, ours.v_proj)
        theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs.eval()


@pytest.mark.parametrize("masked", [False, True])
def test_mha_matches_torch_self_attention(masked):
    ours = MultiHeadAttention(d_model=12, n_heads=3).eval()
    theirs = torch_twin(ours)
    x = torch.randn(B, T, 12)
    lengths = torch.tensor([3, 5])
    mask = combine_masks(padding_mask(lengths), causal_mask(T)) if masked else None
    out, weights = ours(x, mask=mask, return_weights=True)
    assert out.shape == (B, T, 12) and weights.shape == (B, 3, T, T)
    # torch's bool masks mean True = blocked: invert ours.
    extra = (
        {"attn_mask": ~causal_mask(T), "key_padding_mask": ~padding_mask(lengths)[:, 0, 0]} if masked else {}
    )
    expected, expected_weights = theirs(x, x, x, **extra)  # weights averaged over heads by default
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(weights.mean(dim=1), expected_weights, atol=1e-5)
    assert torch.allclose(ours(x, mask=mask), expected, atol=1e-5)  # without weights: torch's fused kernel
    ours.fused = False
    assert torch.allclose(ours(x, mask=mask), expected, atol=1e-5)  # the written-out function


def test_mha_matches_torch_cross_attention():
    ours = MultiHeadAttention(d_model=8, n_heads=2).eval()
    theirs = torch_twin(ours)
    query, memory = torch.randn(B, 3, 8), torch.randn(B, 7, 8)
    lengths = torch.tensor([7, 4])
    out, weights = ours(query, memory, mask=padding_mask(lengths), return_weights=True)
    expected, expected_weights = theirs(
        query, memory, memory, key_padding_mask=~padding_mask(lengths)[:, 0, 0]
    )
    assert out.shape == (B, 3, 8) and weights.shape == (B, 2, 3, 7)
    assert torch.allclose(out, expected, atol=1e-5)
    assert torch.allclose(weights.mean(dim=1), expected_weights, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: MultiHeadAttention(10, 3), ValueError, "d_model must be divisible by n_heads, got 10 and 3"),
        (lambda: MultiHeadAttention(8, 0), ValueError, "n_heads must be >= 1"),
        (lambda: MultiHeadAttention(8, 2, dropout=1.5), ValueError, "dropout must be in"),
        (
            lambda: MultiHeadAttention(8, 2)(torch.randn(2, 5, 6)),
            ValueError,
            r"query must have shape \(B, T, 8\)",
        ),
        (lambda: MultiHeadAttention(8, 2)(torch.randn(5, 8)), ValueError, "query must have shape"),
        (
            lambda: MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), torch.randn(2, 5, 4)),
            ValueError,
            "key must",
        ),
        (lambda: MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), torch.randn(3, 5, 8)), ValueError, "share B"),
        (
            lambda: MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), mask=torch.ones(5, 5)),
            TypeError,
            r"mask must be a bool tensor \(True = may attend\), got torch.float32",
        ),
        (
            lambda: MultiHeadAttention(8, 2)(torch.randn(2, 5, 8), mask=causal_mask(4)),
            ValueError,
            r"mask of shape \(4, 4\) does not broadcast",
        ),
    ],
)
def test_mha_rejects_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(("t_q", "t_k", "lengths"), [(5, 5, None), (5, 5, [3, 5]), (2, 5, None), (2, 5, [4, 5])])
def test_causal_flag_is_the_causal_mask(fused, t_q, t_k, lengths):
    """causal=True gives what the explicit causal mask gives: as torch's is_causal flag when the mask is square and
    alone (the fused path), built out when the queries are the last t_q of t_k keys (a cache) or a padding mask
    comes too."""
    attention = MultiHeadAttention(d_model=12, n_heads=3).eval()
    attention.fused = fused
    query, memory = torch.randn(B, t_q, 12), torch.randn(B, t_k, 12)
    padding = None if lengths is None else padding_mask(torch.tensor(lengths))
    expected = attention(query, memory, mask=combine_masks(padding, causal_mask(t_q, t_k)))
    assert torch.allclose(attention(query, memory, mask=padding, causal=True), expected, atol=1e-6)


def test_weights_asked_of_a_fused_attention_come_from_the_written_out_path():
    attention = MultiHeadAttention(d_model=8, n_heads=2).eval()
    x = torch.randn(B, T, 8)
    assert attention.fused  # the default: the weights are never built unless asked for
    output, weights = attention(x, causal=True, return_weights=True)
    assert torch.allclose(weights.sum(-1), torch.ones(B, 2, T))
    assert torch.equal(weights.triu(diagonal=1), torch.zeros_like(weights))  # nothing read from later positions
    assert torch.allclose(output, attention(x, causal=True), atol=1e-6)


def test_fused_attention_gives_zeros_for_a_query_with_no_key():
    attention = MultiHeadAttention(d_model=8, n_heads=2).eval()
    x, mask = torch.randn(1, T, 8), torch.ones(T, T, dtype=torch.bool)
    mask[2] = False  # query 2 may attend nothing: it reads zeros, so its output is the output projection's bias
    fused = attention(x, mask=mask)
    attention.fused = False
    assert torch.allclose(fused, attention(x, mask=mask), atol=1e-6)
    assert torch.allclose(fused[0, 2], attention.out_proj.bias)


def test_recorded_attention_keeps_each_layers_weights_and_leaves_outputs_alone():
    from minformers.attention import recorded_attention
    from minformers.gpt import GPT, GPTConfig

    model = GPT(GPTConfig(vocab_size=11, d_model=16, n_layers=3, n_heads=2, d_ff=32, max_len=8)).eval()
    ids = torch.randint(0, 11, (2, 6))
    with torch.no_grad():
        plain = model(ids)
        with recorded_attention(model) as weights:
            recorded = model(ids)
    assert torch.allclose(recorded, plain, atol=1e-5)
    assert [tuple(w.shape) for w in weights] == [(2, 2, 6, 6)] * 3  # one per layer, in order
    # the first layer's weights, recomputed by hand from its input
    first = model.layers[0]
    x = model.token_embedding(ids) + model.position_embedding(6)
    _, expected = first.attention(first.attention_norm(x), causal=True, return_weights=True)
    assert torch.allclose(weights[0], expected, atol=1e-6)
    with torch.no_grad():
        model(ids)
    assert len(weights) == 3  # the hooks are gone after the block
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        with recorded_attention(nn.Linear(2, 2)):
            pass
