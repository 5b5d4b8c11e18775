"""Generation: the KV cache changes nothing but speed, greedy is deterministic, top-k=1 is greedy, top-p keeps the
right tokens, and the context limit is enforced or cropped on request."""

import pytest
import torch

from minformers.generation import filter_logits, generate, next_token
from minformers.gpt import GPT, GPTConfig
from minformers.kv_cache import KVCache

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GPT(GPTConfig.tiny(vocab_size=30, max_len=24, n_layers=2)).eval()


def test_cached_forward_equals_full_forward(model):
    ids = torch.randint(0, 30, (2, 12))
    cache = KVCache(model.config.n_layers)
    with torch.no_grad():
        full = model(ids)
        pieces = [model(ids[:, :5], cache=cache)] + [model(ids[:, t : t + 1], cache=cache) for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("options", [dict(temperature=0), dict(temperature=0.8, top_k=5), dict(top_p=0.9)])
def test_cached_generation_equals_uncached_token_for_token(model, options):
    prompt = torch.randint(0, 30, (3, 4))
    outputs = [generate(model, prompt, 15, generator=torch.Generator().manual_seed(7), use_cache=use_cache,
                        **options) for use_cache in (True, False)]
    assert torch.equal(*outputs)


def test_greedy_is_deterministic_and_top_k_1_is_greedy(model):
    prompt = torch.tensor([[3, 1, 4]])
    greedy = generate(model, prompt, 10, temperature=0)
    assert torch.equal(greedy, generate(model, prompt, 10, temperature=0))
    top_1 = generate(model, prompt, 10, temperature=1.5, top_k=1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(greedy, top_1)


def test_sampling_follows_the_distribution():
    """With probabilities 0.5, 0.3, 0.2, 20,000 draws land within 4 standard deviations of them."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).expand(20_000, 3)
    draws = next_token(logits, generator=torch.Generator().manual_seed(0))
    shares = torch.bincount(draws, minlength=3) / 20_000
    sigma = (torch.tensor([0.5, 0.3, 0.2]) * torch.tensor([0.5, 0.7, 0.8]) / 20_000).sqrt()
    assert ((shares - torch.tensor([0.5, 0.3, 0.2])).abs() < 4 * sigma).all()


def test_filters_keep_the_right_tokens():
    logits = torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]]))
    kept = lambda filtered: torch.isfinite(filtered[0]).nonzero().flatten().tolist()  # noqa: E731
    assert kept(filter_logits(logits, top_k=2)) == [1, 3]
    assert kept(filter_logits(logits, top_p=0.4)) == [1]  # the top token alone reaches 0.4
    assert kept(filter_logits(logits, top_p=0.71)) == [1, 2, 3]  # 0.4 + 0.3 = 0.7 < 0.71, so 0.2 joins
    assert kept(filter_logits(logits, top_p=1.0)) == [0, 1, 2, 3]


def test_context_limits(model):
    long_prompt = torch.randint(0, 30, (1, 30))
    with pytest.raises(ValueError, match="crop_prompt=True"):
        generate(model, long_prompt, 1)
    assert generate(model, long_prompt, 1, crop_prompt=True, use_cache=False).shape == (1, 25)
    with pytest.raises(ValueError, match="use_cache=False"):
        generate(model, long_prompt[:, :20], 10)
    assert generate(model, long_prompt[:, :20], 10, use_cache=False).shape == (1, 30)  # a sliding window


@pytest.mark.parametrize("options, match", [
    (dict(temperature=-1), "temperature"), (dict(top_p=0.0), "top_p"), (dict(top_k=0), "top_k"),
])  # fmt: skip
def test_bad_options_get_clear_errors(model, options, match):
    with pytest.raises(ValueError, match=match):
        generate(model, torch.tensor([[1]]), 2, **options)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_logits_that_name_no_token_get_clear_errors(temperature):
    inf, nan = float("inf"), float("nan")
    with pytest.raises(ValueError, match=r"every logit of rows \[1\] is -inf, so no token can be chosen"):
        next_token(torch.tensor([[0.0, -inf], [-inf, -inf]]), temperature)
    with pytest.raises(ValueError, match=r"the logits of rows \[0\] contain NaN"):
        next_token(torch.tensor([[0.0, nan], [0.0, 1.0]]), temperature)
    assert next_token(torch.tensor([[-inf, 0.0, -inf]]), temperature).tolist() == [1]  # one token left is enough


def test_generation_restores_training_mode(model):
    model.train()
    generate(model, torch.tensor([[1]]), 2)
    assert model.training
    model.eval()
