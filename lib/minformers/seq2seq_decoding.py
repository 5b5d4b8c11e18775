"""Decoding an encoder-decoder one token at a time from BOS: greedy, and beam search
with a length penalty.

The source is encoded once; each step feeds the decoder only the newest token, with a KV
cache holding the earlier ones' keys and values (``use_cache=False`` recomputes the
whole prefix instead, for checking). A sequence ends at EOS; after it, only PAD follows.
Outputs start after BOS and are right-padded with PAD.

    >>> from minformers.encoder_decoder import EncoderDecoder, TransformerConfig
    >>> _ = torch.manual_seed(0)
    >>> config = TransformerConfig.tiny(source_vocab_size=10, target_vocab_size=10)
    >>> model = EncoderDecoder(config).eval()
    >>> source = torch.tensor([[4, 5, 6, 2]])
    >>> greedy = greedy_decode(model, source, max_len=6)
    >>> torch.equal(greedy, beam_search(model, source, beam_size=1, max_len=6))
    True
"""

import torch

from minformers.encoder_decoder import BOS, EOS, PAD, EncoderDecoder
from minformers.kv_cache import KVCache
from minformers.support.arguments import require_size


def _check(model: EncoderDecoder, max_len: int) -> None:
    require_size("max_len", max_len)
    # BOS plus max_len tokens must fit the positions
    if max_len + 1 > model.config.max_len:
        raise ValueError(
            "max_len must be at most the model's max_len - 1 = "
            f"{model.config.max_len - 1}, got {max_len}"
        )


def _next_logits(
    model: EncoderDecoder,
    tokens: torch.Tensor,
    memory,
    memory_mask,
    cache: KVCache | None,
):
    """Logits for the next token after ``tokens`` (B, t): (B, V)."""
    if cache is None:
        return model.decode(tokens, memory, memory_mask)[:, -1]
    return model.decode(tokens[:, -1:], memory, memory_mask, cache=cache)[:, -1]


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    source_ids: torch.Tensor,
    max_len: int,
    use_cache: bool = True,
) -> torch.Tensor:
    """The most likely token at each step, for every source at once:
    (B, S) -> (B, <= max_len)."""
    _check(model, max_len)
    memory, memory_mask = model.encode(source_ids)
    cache = KVCache(model.config.n_decoder_layers) if use_cache else None
    tokens = torch.full((len(source_ids), 1), BOS, device=source_ids.device)
    finished = torch.zeros(len(source_ids), dtype=torch.bool, device=source_ids.device)
    for _ in range(max_len):
        # (B,)
        choice = _next_logits(model, tokens, memory, memory_mask, cache).argmax(dim=-1)
        choice = choice.masked_fill(finished, PAD)  # a finished sequence only pads
        tokens = torch.cat([tokens, choice[:, None]], dim=1)
        finished |= choice == EOS
        if finished.all():
            break
    return tokens[:, 1:]


def length_penalty(length: torch.Tensor, alpha: float) -> torch.Tensor:
    """GNMT's ((5 + length) / 6) ** alpha (Wu et al., 2016): a beam's log-probability is
    divided by it, so longer outputs are not beaten merely for having more terms to sum.
    alpha = 0 ranks by raw log-probability."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(
    model: EncoderDecoder,
    source_ids: torch.Tensor,
    beam_size: int,
    max_len: int,
    alpha: float = 0.6,
) -> torch.Tensor:
    """Keep the ``beam_size`` most likely partial outputs per source; return the best
    finished one by log-probability / length_penalty(length, alpha):
    (B, S) -> (B, <= max_len).

    All B x K hypotheses advance together as one batch. A finished hypothesis stays in
    the beam with its score frozen (it can only add PAD, at no cost), so it competes
    with the unfinished ones until the end.
    """
    _check(model, max_len)
    K = require_size("beam_size", beam_size)
    B = len(source_ids)
    # (B K, S, C): each source K times
    memory, memory_mask = model.encode(source_ids.repeat_interleave(K, dim=0))
    cache = KVCache(model.config.n_decoder_layers)
    tokens = torch.full((B * K, 1), BOS, device=source_ids.device)
    scores = torch.zeros(B, K, device=source_ids.device)
    # at the start all K beams are the same: let only the first one expand
    scores[:, 1:] = float("-inf")
    finished = torch.zeros(B * K, dtype=torch.bool, device=source_ids.device)
    for _ in range(max_len):
        # (B K, V)
        log_probs = _next_logits(model, tokens, memory, memory_mask, cache).log_softmax(
            dim=-1
        )
        V = log_probs.shape[-1]
        log_probs[finished] = float("-inf")
        log_probs[finished, PAD] = 0.0  # finished: PAD, score unchanged
        # every beam's every continuation
        candidates = (scores.view(B * K, 1) + log_probs).view(B, K * V)
        scores, index = candidates.topk(K, dim=1)  # (B, K)
        # the beams they extend
        rows = (
            torch.arange(B, device=index.device)[:, None] * K + index // V
        ).flatten()
        choice = (index % V).flatten()  # (B K,)
        tokens = torch.cat([tokens[rows], choice[:, None]], dim=1)
        finished = finished[rows] | (choice == EOS)
        cache.reorder(rows)
        if finished.all():
            break
    outputs = tokens[:, 1:]  # (B K, t)
    lengths = (outputs != PAD).sum(dim=1).view(B, K)  # tokens up to and including EOS
    best = (scores / length_penalty(lengths.float(), alpha)).argmax(dim=1)  # (B,)
    return outputs.view(B, K, -1)[torch.arange(B), best]
