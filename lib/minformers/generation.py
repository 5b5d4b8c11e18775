"""Text generation from a decoder, one token at a time: greedy, temperature, top-k and
top-p (nucleus) sampling, with a KV cache so each new token costs one token's forward
pass.

Works with any decoder whose ``forward(input_ids, cache=None)`` returns (B, T, V) logits
and whose ``config`` has ``max_len`` and ``n_layers``: ``minformers.gpt.GPT`` and
``minformers.llama.LlamaForCausalLM``.

    >>> from minformers.gpt import GPT, GPTConfig
    >>> _ = torch.manual_seed(0)
    >>> model = GPT(GPTConfig.tiny(vocab_size=20)).eval()
    >>> prompt = torch.tensor([[1, 2, 3]])
    >>> out = generate(model, prompt, max_new_tokens=5, temperature=0)  # greedy
    >>> uncached = generate(model, prompt, 5, temperature=0, use_cache=False)
    >>> out.shape, torch.equal(out, uncached)
    (torch.Size([1, 8]), True)
"""

import torch

from minformers.kv_cache import KVCache
from minformers.support.arguments import require_size


def filter_logits(
    logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Set to -inf every logit outside the top ``top_k``, and outside the smallest set
    of most likely tokens whose probabilities add up to at least ``top_p``.
    (B, V) -> (B, V); the most likely token always survives.

    >>> probabilities = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    >>> filter_logits(probabilities.log(), top_p=0.7).exp()
    tensor([[0.5000, 0.3000, 0.0000, 0.0000]])
    """
    if top_k is not None:
        require_size("top_k", top_k)
        # (B, 1): the k-th largest
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        # (B, V), in decreasing probability
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens before it already reach top_p; the first token
        # is never dropped.
        drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= top_p
        # back to vocabulary order
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Choose one token per row from (B, V) logits -> (B,). ``temperature=0`` is
    greedy (the argmax)."""
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    # A NaN or an all -inf row passes unnoticed at temperature 0 (argmax returns an
    # index anyway) and fails obscurely when sampling.
    has_nan = logits.isnan().any(dim=-1)  # (B,)
    if has_nan.any():
        raise ValueError(
            f"the logits of rows {has_nan.nonzero().flatten().tolist()} contain NaN, "
            "so no token can be chosen; check the model's forward pass (NaN weights "
            "often mean training diverged)"
        )
    all_masked = (logits == float("-inf")).all(dim=-1)  # (B,)
    if all_masked.any():
        raise ValueError(
            f"every logit of rows {all_masked.nonzero().flatten().tolist()} is -inf, "
            "so no token can be chosen; was every token masked out before next_token?"
        )
    if temperature == 0:
        return logits.argmax(dim=-1)
    probabilities = filter_logits(logits / temperature, top_k, top_p).softmax(dim=-1)
    return torch.multinomial(probabilities, num_samples=1, generator=generator).squeeze(
        -1
    )


@torch.no_grad()
def generate(
    model: torch.nn.Module,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    crop_prompt: bool = False,
) -> torch.Tensor:
    """Extend ``prompt`` (B, T) by ``max_new_tokens`` tokens; returns
    (B, T + max_new_tokens).

    With ``use_cache`` the prompt is read once and each new token costs one position;
    the whole text must then fit the model's context. Without it, every step re-reads
    the last ``max_len`` tokens, so generation can run past the context with a sliding
    window. A prompt longer than the context raises an error, unless ``crop_prompt``
    keeps only its last ``max_len`` tokens.
    """
    require_size("max_new_tokens", max_new_tokens, minimum=0)
    if (
        not isinstance(prompt, torch.Tensor)
        or prompt.dim() != 2
        or prompt.shape[1] == 0
    ):
        shape = getattr(prompt, "shape", prompt)
        raise ValueError(
            f"prompt must be a (B, T) tensor of token ids with T >= 1, got {shape}"
        )
    context = model.config.max_len
    if prompt.shape[1] > context:
        if not crop_prompt:
            raise ValueError(
                f"the prompt has {prompt.shape[1]} tokens, more than the model's "
                f"context of {context}; pass crop_prompt=True to keep only its last "
                "tokens"
            )
        prompt = prompt[:, -context:]
    if use_cache and prompt.shape[1] + max_new_tokens > context:
        raise ValueError(
            f"{prompt.shape[1]} prompt + {max_new_tokens} new tokens exceed the "
            f"context of {context}; generate fewer, or use use_cache=False to slide a "
            "window over the text"
        )
    was_training = model.training
    model.eval()
    tokens = prompt
    cache = KVCache(model.config.n_layers) if use_cache else None
    new_input = prompt
    try:
        for _ in range(max_new_tokens):
            if cache is None:
                logits = model(tokens[:, -context:])  # the whole window, every step
            else:
                # only the tokens the cache has not seen
                logits = model(new_input, cache=cache)
            # (B,)
            chosen = next_token(logits[:, -1], temperature, top_k, top_p, generator)
            new_input = chosen[:, None]  # (B, 1)
            tokens = torch.cat([tokens, new_input], dim=1)
    finally:
        model.train(was_training)
    return tokens
