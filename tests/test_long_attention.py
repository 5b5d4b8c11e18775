"""Banded attention equals full attention under the same mask, its memory grows linearly, and the KV cache formula
matches a real cache."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from minformers.attention import scaled_dot_product_attention
from minformers.gpt import GPT, GPTConfig
from minformers.kv_cache import KVCache
from minformers.long_attention import (
    kv_cache_bytes,
    linear_attention,
    local_global_attention,
    sliding_window_attention,
)
from minformers.masks import combine_masks, local_global_mask, padding_mask, sliding_window_mask
from minformers.support.measure import peak_tensor_bytes


def random_qkv(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator) for _ in range(3))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("length, window", list(itertools.product([1, 2, 7, 16, 33], [1, 2, 5, 16, 40])))
def test_banded_equals_full_attention_with_the_sliding_window_mask(length, window, causal):
    q, k, v = random_qkv(2, 3, length, 8, seed=length * 100 + window)
    full = scaled_dot_product_attention(q, k, v, sliding_window_mask(length, window, causal=causal))
    torch.testing.assert_close(sliding_window_attention(q, k, v, window, causal=causal), full, atol=1e-6, rtol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_banded_with_padding_matches_and_fully_masked_rows_are_zero(causal):
    length, window = 20, 4
    q, k, v = random_qkv(3, 2, length, 8)
    keys_kept = padding_mask(torch.tensor([20, 9, 0]), max_len=length)  # the third sequence has no real token
    mask = combine_masks(sliding_window_mask(length, window, causal=causal), keys_kept)
    ours = sliding_window_attention(q, k, v, window, causal=causal, key_mask=keys_kept)
    torch.testing.assert_close(ours, scaled_dot_product_attention(q, k, v, mask), atol=1e-6, rtol=0)
    assert not ours.isnan().any()
    assert ours[2].eq(0).all()  # no key at all: zeros, not NaN
    if causal:  # with a causal window, the queries far past the 9 real tokens see only padding
        assert ours[1, :, 9 + window - 1 :].eq(0).all()


def test_banded_matches_torch_fused_attention_and_different_value_width():
    q, k, _ = random_qkv(1, 4, 50, 16)
    v = torch.randn(1, 4, 50, 12)  # D_v differs from D
    mask = sliding_window_mask(50, 8)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(sliding_window_attention(q, k, v, 8), theirs, atol=1e-5, rtol=0)


def test_banded_gradients_equal_full_attention_gradients():
    q, k, v = (x.requires_grad_() for x in random_qkv(1, 2, 19, 4))
    sliding_window_attention(q, k, v, 5, causal=False).square().sum().backward()
    ours = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    scaled_dot_product_attention(q, k, v, sliding_window_mask(19, 5, causal=False)).square().sum().backward()
    for mine, theirs in zip(ours, (q.grad, k.grad, v.grad), strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)


def test_window_covering_the_sequence_is_plain_causal_attention():
    q, k, v = random_qkv(2, 10, 4)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(sliding_window_attention(q, k, v, 10), full, atol=1e-6, rtol=0)


def test_memory_of_banded_attention_grows_linearly_and_full_attention_quadratically():
    banded, full = [], []
    for length in (512, 1024, 2048):
        q, k, v = random_qkv(1, 2, length, 16)
        banded.append(peak_tensor_bytes(lambda q=q, k=k, v=v: sliding_window_attention(q, k, v, 64)))
        full.append(peak_tensor_bytes(lambda q=q, k=k, v=v, n=length: scaled_dot_product_attention(
            q, k, v, sliding_window_mask(n, 64))))
    for smaller, larger in itertools.pairwise(banded):
        assert 1.8 < larger / smaller < 2.2  # twice the length, twice the memory
    for smaller, larger in itertools.pairwise(full):
        assert 3.6 < larger / smaller < 4.4  # twice the length, four times the memory
    assert banded[-1] < full[-1] / 10


@pytest.mark.parametrize("length, window, global_positions", [
    (1, 1, [0]), (5, 1, [0]), (16, 2, [0, 15]), (33, 4, [3, 20, 7]), (40, 50, [10]), (12, 3, []),
])
def test_local_global_equals_full_attention_with_longformer_mask(length, window, global_positions):
    q, k, v = random_qkv(2, 3, length, 8, seed=length)
    full = scaled_dot_product_attention(q, k, v, local_global_mask(length, window, global_positions))
    ours = local_global_attention(q, k, v, window, global_positions)
    torch.testing.assert_close(ours, full, atol=1e-6, rtol=0)


def test_bad_inputs_name_the_argument():
    q, k, v = random_qkv(1, 6, 4)
    with pytest.raises(ValueError, match="window must be >= 1"):
        sliding_window_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="same length T"):
        sliding_window_attention(q, k[:, :5], v[:, :5], 2)
    with pytest.raises(ValueError, match="same last dim D"):
        sliding_window_attention(q, k[..., :3], v, 2)
    with pytest.raises(TypeError, match="key_mask must be a bool tensor"):
        sliding_window_attention(q, k, v, 2, key_mask=torch.ones(1, 1, 6))
    with pytest.raises(ValueError, match="key_mask must have shape"):
        sliding_window_attention(q, k, v, 2, key_mask=torch.ones(1, 6, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="global_positions must be distinct ints in"):
        local_global_attention(q, k, v, 2, [6])
    with pytest.raises(ValueError, match="global_positions must be distinct ints in"):
        local_global_attention(q, k, v, 2, [1, 1])


def test_kv_cache_bytes_equals_a_real_cache_filled_by_a_gpt():
    config = GPTConfig.tiny(vocab_size=50, n_layers=3, d_model=32, n_heads=4, max_len=40)
    model = GPT(config).eval()
    for length in (1, 7, 40):
        cache = KVCache(config.n_layers)
        with torch.no_grad():
            model(torch.zeros(2, length, dtype=torch.long), cache=cache)
        held = sum(t.nbytes for t in cache.keys + cache.values)
        expected = kv_cache_bytes(config.n_layers, config.n_heads, config.d_model // config.n_heads, length,
                                  batch=2, bytes_per_value=4)
        assert held == expected


def test_kv_cache_bytes_of_a_rolling_window_stop_growing():
    sizes = [kv_cache_bytes(2, 2, 8, length, window=16) for length in (8, 16, 17, 1000)]
    assert sizes == [2 * 2 * 2 * 8 * 8 * 2, *[2 * 2 * 2 * 16 * 8 * 2] * 3]
    with pytest.raises(ValueError, match="length must be >= 0"):
        kv_cache_bytes(2, 2, 8, -1)


@pytest.mark.parametrize("causal", [True, False])
def test_linear_attention_equals_its_quadratic_form(causal):
    # Written as T x T weights: phi(q_i) . phi(k_j), zero above the diagonal when causal, each row normalised.
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 12, 4, dtype=torch.float64), torch.randn(2, 3, 12, 4, dtype=torch.float64)
    v = torch.randn(2, 3, 12, 5, dtype=torch.float64)
    similarity = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)  # (B, H, T, T), all positive
    if causal:
        similarity = similarity.tril()
    expected = (similarity / similarity.sum(-1, keepdim=True)) @ v
    torch.testing.assert_close(linear_attention(q, k, v, causal=causal), expected, rtol=0, atol=1e-12)


def test_linear_attention_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="q and k must be"):
        linear_attention(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 5), torch.randn(1, 2, 3, 4))
