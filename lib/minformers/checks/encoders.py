"""Checks for the encoder models: BERT's masking and inputs, pooling, RoBERTa's blocks,
ALBERT's embedding and ELECTRA's labels.

    >>> check_mean_pool(lambda hidden_states, attention_mask: hidden_states.mean(1))
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_mean_pool, case 'rows of lengths 5, 3 and 1': ...
    ...
"""

import math
from collections.abc import Callable

import torch

from minformers import bert, finetuning, objectives, similarity
from minformers.checks import (
    Case,
    CheckFailed,
    call_learner,
    run_check,
    seeded_generator,
    seeded_random,
)
from minformers.wordpiece import WordPieceTokenizer


def _share_within_bounds(
    name: str, what: str, count: int, total: int, p: float
) -> None:
    """Raise CheckFailed unless count/total lies in the two-sided 99.9% interval
    of Binomial(total, p)."""
    spread = 3.29 * math.sqrt(p * (1 - p) / total)
    if abs(count / total - p) > spread:
        raise CheckFailed(
            f"{name}, case '{what}': expected a share of {p:.3f} (within "
            f"+-{spread:.3f} by chance), received {count / total:.3f} ({count:,} of "
            f"{total:,})",
            "wrong",
        )


def check_mlm_masking(learner: Callable) -> None:
    """Exercise: `learner(input_ids, vocab_size, mask_id, special_ids, p, generator)`
    -> (masked, labels), BERT's 80/10/10 masking. The result is random, so it is checked
    by its statistics over 100k+ tokens, each of which must fall inside the 99.9%
    binomial interval around BERT's rate, and by rules that hold at every position."""
    name, vocab_size, mask_id, special_ids, p = (
        "check_mlm_masking",
        1000,
        4,
        [0, 1, 2, 3, 4],
        0.15,
    )
    draw = seeded_generator()
    input_ids = torch.randint(5, vocab_size, (500, 256), generator=draw)
    # [CLS], [SEP], padding
    input_ids[:, 0], input_ids[:, -1], input_ids[::3, 200:] = 2, 3, 0
    case = Case(
        "500 sequences of 256 tokens, p = 0.15",
        (input_ids.clone(), vocab_size, mask_id, special_ids, p, draw),
    )
    received = call_learner(name, learner, case, [objectives.mask_tokens])
    if not (
        isinstance(received, tuple)
        and len(received) == 2
        and all(isinstance(t, torch.Tensor) for t in received)
    ):
        raise CheckFailed(
            f"{name}: expected a pair of tensors (masked, labels), received "
            f"{type(received)}",
            "wrong",
        )
    masked, labels = received
    if masked.shape != input_ids.shape or labels.shape != input_ids.shape:
        raise CheckFailed(
            f"{name}: expected shapes {tuple(input_ids.shape)}, received "
            f"{tuple(masked.shape)} and {tuple(labels.shape)}",
            "wrong",
        )
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = labels != objectives.IGNORE_INDEX
    rules = [
        ("special tokens and padding are never chosen", not (chosen & special).any()),
        (
            "special tokens and padding stay unchanged",
            torch.equal(masked[special], input_ids[special]),
        ),
        (
            "labels hold the original id where chosen",
            torch.equal(labels[chosen], input_ids[chosen]),
        ),
        (
            "positions not chosen stay unchanged",
            torch.equal(masked[~chosen], input_ids[~chosen]),
        ),
        (
            "a random replacement is never a special token",
            not torch.isin(
                masked[chosen & (masked != mask_id)], torch.tensor(special_ids)
            ).any(),
        ),
    ]
    for rule, holds in rules:
        if not holds:
            raise CheckFailed(
                f"{name}, case '{rule}': this does not hold for your output", "wrong"
            )
    n_chosen, n_ordinary = chosen.sum().item(), (~special).sum().item()
    became_mask = (chosen & (masked == mask_id)).sum().item()
    kept = (chosen & (masked == input_ids)).sum().item()
    _share_within_bounds(
        name, "share of ordinary tokens chosen", n_chosen, n_ordinary, p
    )
    _share_within_bounds(
        name, "share of chosen tokens replaced by [MASK]", became_mask, n_chosen, 0.8
    )
    # A random replacement may draw the original id (1 in 995 here): it then
    # counts as kept.
    _share_within_bounds(
        name, "share of chosen tokens kept unchanged", kept, n_chosen, 0.1 + 0.1 / 995
    )
    print(f"ok: {name} passed 5 rules and 3 rates over {n_ordinary:,} tokens")


def check_encode_sentences(learner: Callable) -> None:
    """Exercise: `learner(tokenizer, texts, max_len)` returns
    (ids, attention_mask) as finetuning.encode_sentences."""
    tokenizer = WordPieceTokenizer(
        [
            "[PAD]",
            "[UNK]",
            "[CLS]",
            "[SEP]",
            "[MASK]",
            "good",
            "bad",
            "film",
            "not",
            "##s",
            ",",
            ".",
        ]
    )
    cases = [
        Case("one short sentence", (tokenizer, ["good film."], 8)),
        Case(
            "two sentences of different lengths", (tokenizer, ["good film.", "bad"], 8)
        ),
        Case(
            "a sentence cut to max_len",
            (tokenizer, ["not good , not bad , good films ."], 6),
        ),
        Case("max_len 3 keeps one piece", (tokenizer, ["bad film", "good"], 3)),
        Case("an empty sentence", (tokenizer, ["", "films"], 5)),
        Case("an unknown word", (tokenizer, ["good popcorn"], 8)),
    ]
    draw = seeded_random()
    words = ["good", "bad", "film", "films", "not", ",", ".", "popcorn"]
    for _ in range(2):
        texts = [
            " ".join(draw.choices(words, k=draw.randint(0, 8)))
            for _ in range(draw.randint(1, 3))
        ]
        cases.append(Case(f"random: {texts}", (tokenizer, texts, draw.randint(3, 10))))
    run_check(
        "check_encode_sentences",
        learner,
        finetuning.encode_sentences,
        cases,
        blocked_functions=[finetuning.encode_sentences],
    )


def check_mean_pool(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(hidden_states, attention_mask)` averages (B, T, C) over each
    row's real tokens -> (B, C)."""
    draw = seeded_generator()
    hidden = torch.randn(3, 5, 4, generator=draw)
    cases = [
        Case("no padding", (hidden, torch.ones(3, 5, dtype=torch.long))),
        Case(
            "rows of lengths 5, 3 and 1",
            (hidden, torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])),
        ),
        Case(
            "a bool attention mask",
            (hidden, torch.tensor([[True] * 2 + [False] * 3] * 3)),
        ),
        Case("padding on the left", (hidden, torch.tensor([[0, 0, 1, 1, 1]] * 3))),
        Case(
            "a larger random batch",
            (
                torch.randn(8, 20, 16, generator=draw),
                torch.randint(0, 2, (8, 20), generator=draw),
            ),
        ),
    ]
    cases[-1].args[1][:, 0] = 1  # every row keeps at least one real token
    run_check(
        "check_mean_pool",
        learner,
        similarity.mean_pool,
        cases,
        blocked_functions=[similarity.mean_pool],
    )


def check_contiguous_blocks(learner: Callable) -> None:
    """Exercise: `learner(documents, length, cls_id, sep_id)` cuts each document's token
    stream into ``[CLS] ... [SEP]`` blocks of `length` tokens, never across documents,
    as objectives.contiguous_blocks."""
    draw = seeded_random()
    long_document = [
        [draw.randrange(10, 99) for _ in range(draw.randrange(1, 9))] for _ in range(12)
    ]
    cases = [
        Case("one short document", ([[[5, 6, 7]]], 8, 2, 3)),
        Case(
            "a stream that fills blocks exactly", ([[[5, 6], [7, 8, 9, 10]]], 5, 2, 3)
        ),
        Case(
            "a sentence split across two blocks",
            ([[[5, 6, 7], [8, 9, 10, 11]]], 6, 2, 3),
        ),
        Case("two documents never share a block", ([[[5, 6]], [[7, 8, 9]]], 6, 2, 3)),
        Case("a long document of random sentences", ([long_document], 16, 101, 102)),
    ]
    run_check(
        "check_contiguous_blocks",
        learner,
        objectives.contiguous_blocks,
        cases,
        blocked_functions=[objectives.contiguous_blocks],
    )


def _factorized_embedding_reference(
    vocab_size: int, d_model: int, embedding_size: int
) -> int:
    config = bert.BertConfig.tiny(
        vocab_size=vocab_size, d_model=d_model, n_heads=1, embedding_size=embedding_size
    )
    with torch.device("meta"):
        embeddings = bert.BertEmbeddings(config)
    return sum(
        p.numel()
        for module in (embeddings.token_embedding, embeddings.projection)
        for p in module.parameters()
    )


def check_factorized_embedding_parameters(
    learner: Callable[[int, int, int], int],
) -> None:
    """Exercise: `learner(vocab_size, d_model, embedding_size)` counts ALBERT's
    factorized token embedding: the V x E table and the E -> H projection with its bias,
    as bert.BertEmbeddings builds them."""
    cases = [
        Case("ALBERT-base", (30000, 768, 128)),
        Case("ALBERT-xxlarge", (30000, 4096, 128)),
        Case("a tiny model", (3000, 128, 32)),
        Case("E equal to H", (100, 64, 64)),
    ]
    draw = seeded_random()
    for _ in range(2):
        sizes = (
            draw.randint(100, 50000),
            64 * draw.randint(1, 32),
            draw.randint(8, 256),
        )
        cases.append(Case(f"random: V, H, E = {sizes}", sizes))
    run_check(
        "check_factorized_embedding_parameters",
        learner,
        _factorized_embedding_reference,
        cases,
        blocked_functions=[bert.count_parameters],
    )


def _replaced_tokens_reference(
    original_ids: torch.Tensor, mlm_labels: torch.Tensor, sampled: torch.Tensor
):
    corrupted = objectives.replace_tokens(original_ids, mlm_labels, sampled)
    return corrupted, objectives.replaced_token_labels(original_ids, corrupted)


def check_replaced_token_labels(learner: Callable) -> None:
    """Exercise: `learner(original_ids, mlm_labels, sampled)` puts the generator's
    samples (N,) at the labelled positions (row-major) and returns (corrupted_ids,
    labels): labels 1.0 where the corrupted token differs from the original, 0.0
    elsewhere, as objectives.replace_tokens and objectives.replaced_token_labels."""
    draw = seeded_generator()
    ids = torch.randint(5, 40, (4, 12), generator=draw)
    chosen = torch.rand(4, 12, generator=draw) < 0.3
    labels = torch.where(chosen, ids, torch.full_like(ids, objectives.IGNORE_INDEX))
    samples = torch.randint(5, 40, (int(chosen.sum()),), generator=draw)
    # one sample equals its original: it must be labelled original
    samples[0] = ids[chosen][0]
    cases = [
        Case(
            "one replaced token",
            (
                torch.tensor([[2, 7, 8, 3]]),
                torch.tensor([[-100, 7, -100, -100]]),
                torch.tensor([9]),
            ),
        ),
        Case(
            "the sample equals the original",
            (
                torch.tensor([[2, 7, 8, 3]]),
                torch.tensor([[-100, 7, 8, -100]]),
                torch.tensor([7, 5]),
            ),
        ),
        Case(
            "nothing masked",
            (
                torch.tensor([[2, 7, 3]]),
                torch.full((1, 3), -100),
                torch.zeros(0, dtype=torch.long),
            ),
        ),
        Case("a random batch", (ids, labels, samples)),
    ]
    run_check(
        "check_replaced_token_labels",
        learner,
        _replaced_tokens_reference,
        cases,
        blocked_functions=[objectives.replace_tokens, objectives.replaced_token_labels],
    )
