"""Automatic checks for the exercises: compare a learner's function with the lib's
reference.

Each `check_*` function runs the learner's function on random and edge-case inputs and
compares the result with the reference. While the learner's code runs, the matching lib
reference (and any library function that would do the whole job) is made unavailable, so
a submission that only calls it fails with a message saying so. On failure the check
raises `CheckFailed` with a short message naming the case, the expected value and the
value received; it never shows the reference code. On success it prints one line.

    >>> everything_allowed = lambda t, window, global_positions: torch.ones(
    ...     t, t, dtype=torch.bool
    ... )
    >>> check_local_global_mask(everything_allowed)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_local_global_mask, case 'no global tokens: a band of width 1 ...': ...
    ...
"""

import contextlib
import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from minformers import (
    activations,
    attention,
    bert,
    bpe,
    cloze,
    denoising,
    distributed,
    finetuning,
    generation,
    gpt,
    gpt_classifier,
    in_context,
    llama,
    long_attention,
    masks,
    measure,
    memorization,
    objectives,
    optimizers,
    positions,
    scaling,
    similarity,
    word2vec,
)
from minformers.wordpiece import WordPieceTokenizer

_BLOCKED = "minformers-reference-blocked"
# The seed of every check's random cases. Learners see the cases drawn from 0; the
# grader draws its own seed, so the random cases it uses cannot be known, or answered
# from a table, in advance.
SEED = 0
# What is blocked while a learner's function runs, for a grader that runs the function
# in another process.
blocked_now: tuple[list[Callable], list[tuple[object, str]]] = ([], [])


class CheckFailed(AssertionError):
    """An exercise check failed; the message says which case and why.

    `kind` says how, for graders: "not attempted" (the stub is still there), "calls
    reference" (the learner's function used the library's solution), "raised" (it raised
    an exception) or "wrong" (a value differs).
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind

    def _render_traceback_(self) -> list[str]:
        # Jupyter shows this instead of a traceback: the learner needs the message, not
        # the checker's internals.
        return [f"CheckFailed: {self}"]


@dataclass
class Case:
    name: str  # shown to the learner, so it should say what the case is about
    args: tuple
    kwargs: dict = field(default_factory=dict)


@contextlib.contextmanager
def cases_from(seed: int):
    """Draw the checks' random cases from `seed` inside the block (a grader's own), then
    from the usual one again."""
    global SEED
    previous, SEED = SEED, seed
    try:
        yield
    finally:
        SEED = previous


def _refuse(*args, **kwargs):
    # Swapped in as the reference's code while a learner's function runs. It may only
    # use builtins, because it runs with the reference module's globals.
    raise LookupError("minformers-reference-blocked")


@contextlib.contextmanager
def _unavailable(functions: list[Callable], attributes: list[tuple[object, str]]):
    """Make Python `functions` raise (every alias of them too) and replace module
    `attributes` with `_refuse`."""
    global blocked_now
    saved_code = [(function, function.__code__) for function in functions]
    saved_attributes = [
        (owner, name, getattr(owner, name)) for owner, name in attributes
    ]
    blocked_now = (functions, attributes)
    try:
        for function, _ in saved_code:
            function.__code__ = _refuse.__code__
        for owner, name, _ in saved_attributes:
            setattr(owner, name, _refuse)
        yield
    finally:
        blocked_now = ([], [])
        for function, code in saved_code:
            function.__code__ = code
        for owner, name, value in saved_attributes:
            setattr(owner, name, value)


def _peak_tensor_bytes(learner: Callable, *args) -> int:
    """The peak tensor bytes of `learner(*args)`, measured where the learner runs (in a
    grader's sandbox, if any)."""
    measured_elsewhere = getattr(learner, "peak_tensor_bytes", None)
    if measured_elsewhere is not None:
        return measured_elsewhere(*args)
    return measure.peak_tensor_bytes(lambda: learner(*args))


def _called_reference(error: BaseException) -> bool:
    while error is not None:
        if isinstance(error, LookupError) and _BLOCKED in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        text = str(value.detach()).replace("\n", "\n    ")
        return f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}:\n    {text}"
    return repr(value)


def _mismatch(expected, received, atol: float) -> str | None:
    """Why `received` differs from `expected`, or None if it matches."""
    # several results, say (ids, attention_mask): compared one by one
    if isinstance(expected, tuple):
        if not isinstance(received, tuple) or len(received) != len(expected):
            return f"expected a tuple of {len(expected)} results, received {_describe(received)}"
        for position, (wanted, got) in enumerate(zip(expected, received, strict=True)):
            problem = _mismatch(wanted, got, atol)
            if problem:
                return f"result {position}: {problem}"
        return None
    # plain Python values (lists of ids, strings) compare exactly
    if not isinstance(expected, torch.Tensor):
        if type(received) is not type(expected):
            return f"expected a {type(expected).__name__}, received {type(received).__name__}"
        return None if received == expected else "values differ"
    if not isinstance(received, torch.Tensor):
        return f"expected a torch.Tensor, received {type(received).__name__}"
    if received.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, received shape {tuple(received.shape)}"
    if expected.dtype == torch.bool and received.dtype != torch.bool:
        return (
            f"expected dtype torch.bool (True = may attend), received {received.dtype}"
        )
    if expected.dtype == torch.bool:
        return None if torch.equal(expected, received) else "values differ"
    if torch.isnan(received).any() and not torch.isnan(expected).any():
        return "received NaN where the expected values are all finite"
    if not torch.allclose(received.double(), expected.double(), atol=atol, rtol=0):
        return f"values differ by up to {(received.double() - expected.double()).abs().max().item():.3g}"
    return None


def _call_learner(
    name: str, learner: Callable, case: Case, blocked_functions, blocked_attributes=()
):
    """Run the learner's function on one case with the references unavailable; turn
    failures into CheckFailed."""
    try:
        with _unavailable(blocked_functions, list(blocked_attributes)):
            return learner(*case.args, **case.kwargs)
    except NotImplementedError as error:
        raise CheckFailed(
            f"{name}: not attempted yet ({error})", "not attempted"
        ) from None
    except Exception as error:
        if _called_reference(error):
            raise CheckFailed(
                f"{name}: your function calls the library's own solution; write the "
                "computation yourself",
                "calls reference",
            ) from None
        message = f"{name}, case '{case.name}': raised {type(error).__name__}: {error}"
        raise CheckFailed(message, "raised") from None


def run_check(
    name: str,
    learner: Callable,
    reference: Callable,
    cases: list[Case],
    blocked_functions: list[Callable],
    blocked_attributes: list[tuple[object, str]] = (),
    atol: float = 1e-5,
) -> None:
    """Compare `learner` with `reference` on every case; raise CheckFailed on the first
    difference."""
    for case in cases:
        expected = reference(*case.args, **case.kwargs)
        received = _call_learner(
            name, learner, case, blocked_functions, blocked_attributes
        )
        problem = _mismatch(expected, received, atol)
        if problem:
            raise CheckFailed(
                f"{name}, case '{case.name}': {problem}\n  expected "
                f"{_describe(expected)}\n  received {_describe(received)}",
                "wrong",
            )
    print(f"ok: {name} passed {len(cases)} cases")


def check_local_global_mask(
    learner: Callable[[int, int, list[int]], torch.Tensor],
) -> None:
    """Exercise: `learner(t, window, global_positions)` returns Longformer's local +
    global mask, (t, t)."""
    cases = [
        Case("one token, global", (1, 1, [0])),
        Case("no global tokens: a band of width 1 on each side", (6, 1, [])),
        Case("[CLS] global, window 1", (5, 1, [0])),
        Case("window 2, a global token in the middle", (8, 2, [3])),
        Case("first and last tokens global", (7, 1, [0, 6])),
        Case("window wider than the sequence", (4, 10, [2])),
    ]
    draw = random.Random(SEED)
    for _ in range(3):
        t = draw.randint(2, 24)
        cases.append(
            Case(
                f"random: t={t}",
                (t, draw.randint(1, 5), sorted(draw.sample(range(t), k=2))),
            )
        )
    run_check(
        "check_local_global_mask",
        learner,
        masks.local_global_mask,
        cases,
        blocked_functions=[masks.local_global_mask, masks.sliding_window_mask],
    )


def check_sinusoidal_positions(learner: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: `learner(length, d_model)` returns the (length, d_model) sinusoidal
    encodings."""
    cases = [
        Case("one position, two channels", (1, 2)),
        Case("3 positions, 4 channels", (3, 4)),
        Case("10 positions, 8 channels", (10, 8)),
        Case("a long sequence (slow frequencies matter)", (512, 64)),
    ]
    draw = random.Random(SEED)
    for _ in range(2):
        case = (draw.randint(1, 64), 2 * draw.randint(1, 16))
        cases.append(Case(f"random: {case[0]} positions, {case[1]} channels", case))
    run_check(
        "check_sinusoidal_positions",
        learner,
        positions.sinusoidal_positions,
        cases,
        blocked_functions=[positions.sinusoidal_positions],
        blocked_attributes=[(positions.SinusoidalPositions, "forward")],
        # float32 sin/cos of arguments up to 512, computed in a different order
        atol=1e-4,
    )


def check_merge_pair(
    learner: Callable[[list[int], tuple[int, int], int], list[int]],
) -> None:
    """Exercise: `learner(ids, pair, new_id)` replaces each non-overlapping occurrence
    of `pair`, left to right."""
    cases = [
        Case("the example in the text", ([1, 2, 3, 1, 2], (1, 2), 4)),
        Case("an empty sequence", ([], (1, 2), 4)),
        Case("a single id", ([1], (1, 2), 4)),
        Case("the pair never occurs", ([2, 1, 3], (1, 2), 4)),
        Case("the pair at the very end", ([3, 3, 1, 2], (1, 2), 9)),
        Case("overlapping occurrences: [7, 7, 7] with (7, 7)", ([7, 7, 7], (7, 7), 8)),
        Case("four in a row: [7, 7, 7, 7] with (7, 7)", ([7, 7, 7, 7], (7, 7), 8)),
    ]
    draw = random.Random(SEED)
    for length in (10, 50, 200):
        ids = [draw.randint(0, 3) for _ in range(length)]
        cases.append(
            Case(f"random: {length} ids from 0..3", (ids, (ids[0], ids[1]), 256))
        )
    run_check(
        "check_merge_pair",
        learner,
        bpe.merge_pair,
        cases,
        blocked_functions=[bpe.merge_pair],
    )


def _share_within_bounds(
    name: str, what: str, count: int, total: int, p: float
) -> None:
    """Raise CheckFailed unless count/total lies in the two-sided 99.9% interval of
    Binomial(total, p)."""
    spread = 3.29 * math.sqrt(p * (1 - p) / total)
    if abs(count / total - p) > spread:
        raise CheckFailed(
            f"{name}, case '{what}': expected a share of {p:.3f} (within "
            f"+-{spread:.3f} by chance), received {count / total:.3f} ({count:,} of "
            f"{total:,})",
            "wrong",
        )


def check_mlm_masking(learner: Callable) -> None:
    """Exercise: `learner(input_ids, vocab_size, mask_id, special_ids, p, generator)` ->
    (masked, labels), BERT's 80/10/10 masking. The result is random, so it is checked by
    its statistics over 100k+ tokens, each of which must fall inside the 99.9% binomial
    interval around BERT's rate, and by rules that hold at every position."""
    name, vocab_size, mask_id, special_ids, p = (
        "check_mlm_masking",
        1000,
        4,
        [0, 1, 2, 3, 4],
        0.15,
    )
    draw = torch.Generator().manual_seed(SEED)
    input_ids = torch.randint(5, vocab_size, (500, 256), generator=draw)
    # [CLS], [SEP], padding
    input_ids[:, 0], input_ids[:, -1], input_ids[::3, 200:] = 2, 3, 0
    case = Case(
        "500 sequences of 256 tokens, p = 0.15",
        (input_ids.clone(), vocab_size, mask_id, special_ids, p, draw),
    )
    received = _call_learner(name, learner, case, [objectives.mask_tokens])
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
    # A random replacement may draw the original id (1 in 995 here): it then counts as
    # kept.
    _share_within_bounds(
        name, "share of chosen tokens kept unchanged", kept, n_chosen, 0.1 + 0.1 / 995
    )
    print(f"ok: {name} passed 5 rules and 3 rates over {n_ordinary:,} tokens")


def check_encode_sentences(learner: Callable) -> None:
    """Exercise: `learner(tokenizer, texts, max_len)` returns (ids, attention_mask) as
    finetuning.encode_sentences."""
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
    draw = random.Random(SEED)
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


def check_language_model_loss(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(logits, input_ids)` is GPT's next-token cross-entropy, a mean
    over the B x (T - 1) predictions, as gpt.language_model_loss."""
    draw = torch.Generator().manual_seed(SEED)
    cases = [
        Case("a uniform guess", (torch.zeros(1, 4, 6), torch.tensor([[0, 1, 2, 3]]))),
        Case(
            "random logits, batch of 3",
            (
                torch.randn(3, 7, 11, generator=draw),
                torch.randint(0, 11, (3, 7), generator=draw),
            ),
        ),
        Case(
            "two tokens: one prediction",
            (torch.randn(2, 2, 5, generator=draw), torch.tensor([[1, 4], [0, 2]])),
        ),
        Case(
            "large logits (numerical stability)",
            (
                100 * torch.randn(2, 5, 9, generator=draw),
                torch.randint(0, 9, (2, 5), generator=draw),
            ),
        ),
    ]
    run_check(
        "check_language_model_loss",
        learner,
        gpt.language_model_loss,
        cases,
        blocked_functions=[gpt.language_model_loss],
    )


def check_text_lm_loss(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(lm_logits, input_ids, lengths)` is the next-token loss over
    each row's text pieces only (tokens 1 .. length-2: no padding, no extract token), a
    mean over those predictions, as gpt_classifier.text_lm_loss."""
    draw = torch.Generator().manual_seed(SEED)
    cases = [
        Case(
            "one row, no padding",
            (
                torch.randn(1, 5, 7, generator=draw),
                torch.tensor([[0, 3, 4, 5, 1]]),
                torch.tensor([5]),
            ),
        ),
        Case(
            "rows of lengths 6, 4 and 3 (padded)",
            (
                torch.randn(3, 6, 9, generator=draw),
                torch.randint(0, 9, (3, 6), generator=draw),
                torch.tensor([6, 4, 3]),
            ),
        ),
        Case(
            "a long row beside short ones",
            (
                torch.randn(4, 10, 5, generator=draw),
                torch.randint(0, 5, (4, 10), generator=draw),
                torch.tensor([3, 10, 5, 3]),
            ),
        ),
        Case(
            "large logits (numerical stability)",
            (
                100 * torch.randn(2, 4, 6, generator=draw),
                torch.randint(0, 6, (2, 4), generator=draw),
                torch.tensor([4, 3]),
            ),
        ),
    ]
    run_check(
        "check_text_lm_loss",
        learner,
        gpt_classifier.text_lm_loss,
        cases,
        blocked_functions=[gpt_classifier.text_lm_loss, gpt.language_model_loss],
    )


def _ideal_accuracy_reference(n_examples: int, n_keys: int, n_values: int) -> float:
    return in_context.KeyValueTask(n_keys=n_keys, n_values=n_values).ideal_accuracy(
        n_examples
    )


def check_ideal_accuracy(learner: Callable[[int, int, int], float]) -> None:
    """Exercise: `learner(n_examples, n_keys, n_values)` is the expected accuracy of a
    perfect reader of the prompt, as in_context.KeyValueTask.ideal_accuracy."""
    cases = [
        Case("no examples: chance", (0, 8, 8)),
        Case("every key shown", (8, 8, 8)),
        Case("half the keys, 4 values", (3, 6, 4)),
        Case("one key of ten, two values", (1, 10, 2)),
    ]
    draw = random.Random(SEED)
    for _ in range(2):  # powers of two, so that the exact comparison of floats is fair
        n_keys = draw.choice([2, 4, 8, 16])
        case = (draw.randint(0, n_keys), n_keys, draw.choice([2, 4, 8, 16, 32]))
        cases.append(Case(f"random: {case}", case))
    run_check(
        "check_ideal_accuracy",
        learner,
        _ideal_accuracy_reference,
        cases,
        blocked_functions=[in_context.KeyValueTask.ideal_accuracy],
    )


def _decoder_mask_reference(lengths: torch.Tensor, t: int) -> torch.Tensor:
    return masks.combine_masks(masks.padding_mask(lengths, t), masks.causal_mask(t))


def check_decoder_self_mask(
    learner: Callable[[torch.Tensor, int], torch.Tensor],
) -> None:
    """Exercise: `learner(lengths, t)` is the (B, 1, t, t) bool self-attention mask of a
    decoder over right-padded targets: query i may read key j iff j <= i and j is a real
    token of its row (True = may attend)."""
    cases = [
        Case("one row, no padding", (torch.tensor([4]), 4)),
        Case("rows of lengths 3, 1 and 5", (torch.tensor([3, 1, 5]), 5)),
        Case("every row padded", (torch.tensor([2, 2]), 6)),
    ]
    draw = random.Random(SEED)
    for _ in range(2):
        t = draw.randint(1, 9)
        lengths = [draw.randint(1, t) for _ in range(draw.randint(1, 4))]
        cases.append(
            Case(f"random: lengths {lengths}, t={t}", (torch.tensor(lengths), t))
        )
    run_check(
        "check_decoder_self_mask",
        learner,
        _decoder_mask_reference,
        cases,
        blocked_functions=[masks.combine_masks],
    )


def check_sentinel_corruption(learner: Callable) -> None:
    """Exercise: `learner(tokens, noise_mask, sentinels)` returns T5's (inputs, targets)
    lists, as denoising.sentinel_corruption."""
    draw = random.Random(SEED)
    tokens = [draw.randrange(100, 200) for _ in range(30)]
    scattered = [draw.random() < 0.3 for _ in range(30)]
    cases = [
        Case(
            "one span in the middle",
            ([5, 6, 7, 8], [False, True, True, False], [1, 2, 3]),
        ),
        Case(
            "noise at both ends",
            ([5, 6, 7, 8, 9], [True, False, False, True, True], [1, 2, 3]),
        ),
        Case(
            "adjacent noise tokens form one span",
            ([5, 6, 7], [False, True, True], [1, 2]),
        ),
        Case("30 tokens, scattered noise", (tokens, scattered, list(range(1, 31)))),
    ]
    run_check(
        "check_sentinel_corruption",
        learner,
        denoising.sentinel_corruption,
        cases,
        blocked_functions=[denoising.sentinel_corruption, denoising.span_corruption],
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
    draw = random.Random(SEED)
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


def _top_p_reference(logits: torch.Tensor, p: float) -> torch.Tensor:
    return generation.filter_logits(logits, top_p=p)


def check_top_p_filter(learner: Callable[[torch.Tensor, float], torch.Tensor]) -> None:
    """Exercise: `learner(logits, p)` keeps the smallest set of most likely tokens whose
    probabilities reach p (the top token always) and sets the other logits to -inf, as
    generation.filter_logits(logits, top_p=p)."""
    draw = torch.Generator().manual_seed(SEED)
    cases = [
        Case(
            "p = 1 keeps everything",
            (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 1.0),
        ),
        Case(
            "the top token alone reaches p",
            (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 0.4),
        ),
        Case(
            "two tokens needed", (torch.log(torch.tensor([[0.1, 0.4, 0.2, 0.3]])), 0.65)
        ),
        Case(
            "a tiny p still keeps the top token",
            (torch.log(torch.tensor([[0.5, 0.25, 0.25]])), 0.01),
        ),
        Case("a batch of random rows", (torch.randn(5, 30, generator=draw), 0.8)),
    ]
    run_check(
        "check_top_p_filter",
        learner,
        _top_p_reference,
        cases,
        blocked_functions=[generation.filter_logits],
    )


def _rms_norm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    norm = llama.RMSNorm(x.shape[-1], eps=eps)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


def check_rms_norm(
    learner: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor],
) -> None:
    """Exercise: `learner(x, weight, eps)` is RMSNorm over the last dim, as
    llama.RMSNorm with that weight."""
    draw = torch.Generator().manual_seed(SEED)
    cases = [
        Case(
            "one vector, unit weight", (torch.tensor([[3.0, 4.0]]), torch.ones(2), 1e-6)
        ),
        Case(
            "a batch of sequences",
            (torch.randn(2, 5, 8, generator=draw), torch.rand(8, generator=draw), 1e-6),
        ),
        Case("eps matters for a zero vector", (torch.zeros(1, 4), torch.ones(4), 1e-2)),
        Case(
            "large values",
            (
                1000 * torch.randn(3, 16, generator=draw),
                torch.randn(16, generator=draw),
                1e-5,
            ),
        ),
    ]
    run_check(
        "check_rms_norm",
        learner,
        _rms_norm_reference,
        cases,
        blocked_functions=[llama.RMSNorm.forward],
        blocked_attributes=[(torch.nn.functional, "rms_norm"), (torch, "rms_norm")],
    )


def check_mean_pool(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(hidden_states, attention_mask)` averages (B, T, C) over each
    row's real tokens -> (B, C)."""
    draw = torch.Generator().manual_seed(SEED)
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
    draw = random.Random(SEED)
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
    draw = torch.Generator().manual_seed(SEED)
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


def _compute_optimal_reference(
    E: float, A: float, alpha: float, B: float, beta: float, compute: float
):
    n, d = scaling.JointLaw(E=E, A=A, alpha=alpha, B=B, beta=beta).compute_optimal(
        compute
    )
    return torch.tensor([math.log10(n), math.log10(d)], dtype=torch.float64)


def check_compute_optimal(learner: Callable) -> None:
    """Exercise: `learner(E, A, alpha, B, beta, compute)` returns (N, D), the parameters
    and tokens that minimise L = E + A / N^alpha + B / D^beta under 6ND = compute, as
    scaling.JointLaw.compute_optimal. Compared in log10, to 1e-6 (N and D span many
    orders of magnitude)."""

    def in_log10(*args):
        n, d = learner(*args)
        return torch.tensor(
            [math.log10(float(n)), math.log10(float(d))], dtype=torch.float64
        )

    cases = [
        Case(
            "Hoffmann et al.'s fit at Chinchilla's budget, 5.76e23 FLOPs",
            (1.69, 406.4, 0.34, 410.7, 0.28, 5.76e23),
        ),
        Case(
            "equal exponents and scales: N* = D* = sqrt(C / 6)",
            (1.0, 100.0, 0.3, 100.0, 0.3, 6e12),
        ),
        Case(
            "data matter more (beta < alpha): D* grows faster",
            (2.0, 50.0, 0.5, 80.0, 0.2, 1e15),
        ),
        Case("a CPU-sized budget", (0.5, 3.0, 0.25, 40.0, 0.35, 1e11)),
    ]
    draw = random.Random(SEED)
    for _ in range(2):
        law = (
            draw.uniform(0.5, 3),
            draw.uniform(10, 500),
            draw.uniform(0.2, 0.5),
            draw.uniform(10, 500),
            draw.uniform(0.2, 0.5),
            10 ** draw.uniform(10, 24),
        )
        cases.append(Case(f"random law and budget {law[-1]:.3g} FLOPs", law))
    run_check(
        "check_compute_optimal",
        in_log10,
        _compute_optimal_reference,
        cases,
        blocked_functions=[scaling.JointLaw.compute_optimal],
        atol=1e-6,
    )


# Pretraining: static word embeddings (word2vec).


def check_sgns_loss(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(center, context, negatives)` returns the skip-gram
    negative-sampling loss, the batch mean of -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c), for
    center (B, C), context (B, C), negatives (B, K, C), as word2vec.sgns_loss."""
    draw = torch.Generator().manual_seed(SEED)
    big = torch.full((1, 4), 10.0)  # scores of ±400: log σ must not underflow to -inf
    cases = [
        Case(
            "one pair, two negatives, by hand",
            (
                torch.tensor([[1.0, 0.0]]),
                torch.tensor([[2.0, 1.0]]),
                torch.tensor([[[-1.0, 3.0], [0.5, 0.0]]]),
            ),
        ),
        Case(
            "all vectors zero: (1 + K) log 2",
            (torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 5, 4)),
        ),
        Case(
            "one negative per pair",
            (
                torch.randn(4, 3, generator=draw),
                torch.randn(4, 3, generator=draw),
                torch.randn(4, 1, 3, generator=draw),
            ),
        ),
        Case(
            "a batch of 8 pairs with 5 negatives each",
            (
                torch.randn(8, 6, generator=draw),
                torch.randn(8, 6, generator=draw),
                torch.randn(8, 5, 6, generator=draw),
            ),
        ),
        Case(
            "large scores: a wrong context scored -400, a negative +400",
            (big, -big, big[:, None, :]),
        ),
    ]
    run_check(
        "check_sgns_loss",
        learner,
        word2vec.sgns_loss,
        cases,
        blocked_functions=[word2vec.sgns_loss],
        atol=1e-4,
    )


# Pretraining: memorisation of planted canaries.


def check_exposure(learner: Callable[[float, torch.Tensor], float]) -> None:
    """Exercise: `learner(true_score, candidate_scores)` is the exposure of a secret in
    bits, log2 |R| - log2 rank, with |R| = N + 1 (the N candidates and the secret) and
    rank = 1 + the number of candidates scoring at least true_score (ties count against
    the secret), as memorization.exposure. Compared to 1e-6."""

    def as_tensor(true_score, candidate_scores):
        return torch.tensor(
            float(learner(true_score, candidate_scores)), dtype=torch.float64
        )

    def reference(true_score, candidate_scores):
        return torch.tensor(
            memorization.exposure(true_score, candidate_scores), dtype=torch.float64
        )

    # log-likelihoods of 10 digits
    scores = torch.randn(999, generator=torch.Generator().manual_seed(SEED)) * 4 - 45
    cases = [
        Case(
            "ranked first of 8: log2 8 = 3 bits",
            (-1.0, torch.tensor([-2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0])),
        ),
        Case("ranked last: 0 bits", (-9.0, torch.tensor([-2.0, -3.0, -4.0]))),
        Case(
            "rank 3 of 8, candidates unsorted",
            (-3.5, torch.tensor([-8.0, -1.0, -6.0, -2.0, -7.0, -4.0, -5.0])),
        ),
        Case(
            "a tie counts against the secret", (-2.0, torch.tensor([-1.0, -2.0, -3.0]))
        ),
        Case("one candidate, scored above the secret", (-40.0, torch.tensor([-30.0]))),
        Case("999 random candidates, secret at their mean", (-45.0, scores)),
        Case("999 random candidates, a memorised secret", (-12.0, scores)),
    ]
    run_check(
        "check_exposure",
        as_tensor,
        reference,
        cases,
        blocked_functions=[memorization.exposure],
        atol=1e-6,
    )


# Efficiency and systems: activation functions and optimizers.


def check_swish_derivative(
    learner: Callable[[torch.Tensor, float], torch.Tensor],
) -> None:
    """Exercise: `learner(x, beta)` returns d/dx of Swish, x σ(βx), in closed form (no
    autograd), as activations.swish_derivative."""
    draw = torch.Generator().manual_seed(SEED)
    grid = torch.linspace(-8, 8, 161, dtype=torch.float64)
    cases = [
        Case("β = 1 (SiLU) on a grid", (grid, 1.0)),
        Case("β = 2", (grid, 2.0)),
        Case("β = 0.5", (grid, 0.5)),
        Case(
            "x = 0, a 0-d tensor: the slope there is 1/2 for every β",
            (torch.tensor(0.0, dtype=torch.float64), 3.0),
        ),
        Case(
            "far from 0: -40 and 40",
            (torch.tensor([-40.0, 40.0], dtype=torch.float64), 1.0),
        ),
        Case(
            "random x of shape (3, 4), β = 1.7",
            (4 * torch.randn(3, 4, generator=draw, dtype=torch.float64), 1.7),
        ),
    ]
    run_check(
        "check_swish_derivative",
        learner,
        activations.swish_derivative,
        cases,
        blocked_functions=[activations.swish_derivative],
        blocked_attributes=[(torch.autograd, "grad"), (torch.Tensor, "backward")],
        atol=1e-9,
    )


def _adamw_step_reference(
    theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps, weight_decay
):
    param = theta.clone().requires_grad_(True)
    optimizer = optimizers.AdamW(
        [param], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay
    )
    param.grad = grad.clone()
    optimizer.state[param] = {
        "step": t - 1,
        "exp_avg": exp_avg.clone(),
        "exp_avg_sq": exp_avg_sq.clone(),
    }
    optimizer.step()
    state = optimizer.state[param]
    return param.detach(), state["exp_avg"], state["exp_avg_sq"]


def check_adamw_step(learner: Callable) -> None:
    """Exercise: `learner(theta, grad, exp_avg, exp_avg_sq, t, lr, betas, eps,
    weight_decay)` makes AdamW's update number t (from 1) and returns the new (theta,
    exp_avg, exp_avg_sq), as optimizers.AdamW and torch.optim.AdamW."""
    draw = torch.Generator().manual_seed(SEED)

    def tensors(*shape):
        return torch.randn(*shape, generator=draw, dtype=torch.float64)

    theta, grad, zeros = tensors(5), tensors(5), torch.zeros(5, dtype=torch.float64)
    moments = tensors(5) * 0.1, tensors(5).square() * 0.01
    usual = (1e-3, (0.9, 0.999), 1e-8)
    cases = [
        Case(
            "the first update (t = 1), no weight decay",
            (theta, grad, zeros, zeros, 1, *usual, 0.0),
        ),
        Case(
            "the first update with weight decay 0.01",
            (theta, grad, zeros, zeros, 1, *usual, 0.01),
        ),
        Case(
            "update t = 10 from earlier moments",
            (theta, grad, *moments, 10, *usual, 0.01),
        ),
        Case(
            "a zero gradient: only the decay and the old momentum act",
            (theta, zeros, *moments, 5, *usual, 0.1),
        ),
        Case(
            "lr 0.1 and weight decay 0.5: the decay uses θ before the step",
            (theta, grad, *moments, 3, 0.1, (0.9, 0.999), 1e-8, 0.5),
        ),
        Case(
            "eps = 0.001 and betas (0.5, 0.6): eps is added after the square root",
            (theta, grad * 1e-3, *moments, 2, 1e-2, (0.5, 0.6), 1e-3, 0.0),
        ),
        Case(
            "a (3, 4) matrix at t = 1000",
            (
                tensors(3, 4),
                tensors(3, 4),
                tensors(3, 4) * 0.1,
                tensors(3, 4).square() * 0.01,
                1000,
                *usual,
                0.01,
            ),
        ),
    ]
    run_check(
        "check_adamw_step",
        learner,
        _adamw_step_reference,
        cases,
        blocked_functions=[optimizers.Adam.update, optimizers.NAdam.update],
        blocked_attributes=[(torch.optim, "AdamW"), (torch.optim, "Adam")],
        atol=1e-10,
    )


# Efficiency and systems: long context and distributed training.


def _full_attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk_size: int
) -> torch.Tensor:
    return attention.scaled_dot_product_attention(q, k, v)


def check_chunked_attention(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int], torch.Tensor],
) -> None:
    """Exercise: `learner(q, k, v, chunk_size)` returns softmax(q k^T / sqrt(D)) v for q
    (..., T_q, D), k (..., T_k, D), v (..., T_k, D_v), reading the keys `chunk_size` at
    a time with a running maximum and sum (FlashAttention's online softmax), so that it
    never holds a (T_q, T_k) matrix: its peak memory must stay under half of one."""
    name = "check_chunked_attention"
    draw = torch.Generator().manual_seed(SEED)

    # scale: of q and k, so of the scores, not of the values
    def qkv(t_q, t_k, d, d_v, scale=1.0, batch=()):
        shapes = ((*batch, t_q, d), (*batch, t_k, d), (*batch, t_k, d_v))
        factors = (scale, scale, 1.0)
        return tuple(
            f * torch.randn(*shape, generator=draw)
            for f, shape in zip(factors, shapes, strict=True)
        )

    blocked = [
        attention.scaled_dot_product_attention,
        long_attention.sliding_window_attention,
        long_attention.local_global_attention,
    ]
    blocked_attributes = [(torch.nn.functional, "scaled_dot_product_attention")]
    length, score_matrix_bytes = 1024, 1024 * 1024 * 4
    memory_case = Case(
        f"memory: {length} queries and keys, chunk_size 64",
        (*qkv(length, length, 16, 16), 64),
    )
    peak = _call_learner(
        name,
        functools.partial(_peak_tensor_bytes, learner),
        memory_case,
        blocked,
        blocked_attributes,
    )
    if peak > score_matrix_bytes / 2:
        raise CheckFailed(
            f"{name}, case '{memory_case.name}': your function held {peak / 2**20:.1f} "
            f"MiB of tensors at its peak, and one {length} x {length} float32 score "
            f"matrix is {score_matrix_bytes / 2**20:.0f} MiB: keep only a running "
            "maximum, sum and output per query, and look at one chunk of keys at a "
            "time",
            "wrong",
        )
    cases = [
        Case("one query, one key", (*qkv(1, 1, 4, 4), 1)),
        Case("chunk_size divides T_k: 16 keys, chunks of 4", (*qkv(16, 16, 8, 8), 4)),
        Case("a shorter last chunk: 10 keys, chunks of 4", (*qkv(10, 10, 8, 8), 4)),
        Case("chunk_size larger than T_k", (*qkv(5, 7, 8, 8), 100)),
        Case("chunk_size 1", (*qkv(6, 9, 4, 4), 1)),
        Case("more keys than queries, value width 3", (*qkv(3, 20, 8, 3), 6)),
        Case(
            "large scores (hundreds): exp overflows without the running max",
            (*qkv(8, 24, 4, 4, scale=12.0), 5),
        ),
        Case("batch and heads: (2, 3, T, D)", (*qkv(12, 12, 8, 8, batch=(2, 3)), 5)),
    ]
    run_check(
        name,
        learner,
        _full_attention_reference,
        cases,
        blocked_functions=blocked,
        blocked_attributes=blocked_attributes,
        atol=1e-4,
    )


def _one_forward_one_backward_events() -> list[tuple[int, str, int, float, float]]:
    """A 1F1B schedule of 4 micro-batches on 2 stages, written out: after warm-up, each
    stage alternates one forward and one backward, so stage 0 holds at most 2
    micro-batches and stage 1 at most 1."""
    stage_0 = ["F0", "F1", None, "B0", "F2", "B1", "F3", "B2", None, "B3"]
    stage_1 = [None, "F0", "B0", "F1", "B1", "F2", "B2", "F3", "B3"]
    return [
        (stage, slot[0], int(slot[1]), float(time), float(time + 1))
        for stage, slots in enumerate((stage_0, stage_1))
        for time, slot in enumerate(slots)
        if slot
    ]


def check_peak_stashed_microbatches(learner: Callable[[list], list[int]]) -> None:
    """Exercise: `learner(events)` returns, for each pipeline stage in order, the
    largest number of micro-batches whose activations it holds at once (forward started,
    backward not yet run), from events (stage, "F" or "B", micro-batch, start, end)
    given in any order, as distributed.peak_stashed_microbatches."""
    one_f_one_b = _one_forward_one_backward_events()
    gpipe = distributed.simulate_gpipe(3, 5)
    cases = [
        Case("one stage, one micro-batch", (distributed.simulate_gpipe(1, 1),)),
        Case("GPipe, 2 stages, 4 micro-batches", (distributed.simulate_gpipe(2, 4),)),
        Case("1F1B, 2 stages, 4 micro-batches", (one_f_one_b,)),
        Case("1F1B with the events in reverse order", (one_f_one_b[::-1],)),
        Case(
            "GPipe, 3 stages, 5 micro-batches, events shuffled",
            (random.Random(SEED).sample(gpipe, len(gpipe)),),
        ),
        Case(
            "GPipe, 4 stages, 8 micro-batches, backward twice as long",
            (distributed.simulate_gpipe(4, 8, 1.0, 2.0),),
        ),
    ]
    run_check(
        "check_peak_stashed_microbatches",
        learner,
        distributed.peak_stashed_microbatches,
        cases,
        blocked_functions=[distributed.peak_stashed_microbatches],
    )


# Pretraining: objectives compared at equal compute.


def check_equal_compute_steps(learner: Callable[[dict, float], dict]) -> None:
    """Exercise: `learner(flops_per_step, budget)` returns {name: steps}, each the
    budget divided by that run's FLOPs per step, rounded to the nearest whole step, as
    an int, as objective_comparison.equal_compute_steps."""
    # here: it pulls in the BERT pretraining recipe, only needed now
    from minformers import objective_comparison

    # (name, steps) in the given order: the values' types are compared too
    def as_pairs(steps: dict) -> tuple:
        return steps if not isinstance(steps, dict) else tuple(steps.items())

    def reference(flops_per_step, budget):
        return as_pairs(
            objective_comparison.equal_compute_steps(flops_per_step, budget)
        )

    def learners(flops_per_step, budget):
        steps = learner(flops_per_step, budget)
        return as_pairs(
            {name: steps[name] for name in flops_per_step}
            if isinstance(steps, dict)
            else steps
        )

    page = {
        "causal LM": 2.438e9,
        "MLM": 1.427e9,
        "span corruption": 1.898e9,
        "RTD": 1.573e9,
    }
    cases = [
        Case(
            "two runs, the budget a multiple of both",
            ({"cheap": 1.0e9, "dear": 3.0e9}, 3.0e11),
        ),
        Case("this page's four objectives, 0.1 TFLOP", (page, 1e11)),
        Case(
            "rounded to the nearest step, up (1.67 -> 2) and down (3.33 -> 3)",
            ({"a": 6e9, "b": 3e9}, 1e10),
        ),
        Case("one run, integer FLOPs and budget", ({"only": 7}, 100)),
        Case(
            "a run the budget buys only 1.25 steps of",
            ({"big": 8e9, "small": 1e9}, 1e10),
        ),
    ]
    draw = random.Random(SEED)
    for _ in range(2):
        runs = {
            f"run {i}": 10 ** draw.uniform(8, 10) for i in range(draw.randint(2, 4))
        }
        cases.append(
            Case(f"random: {len(runs)} runs", (runs, 10 ** draw.uniform(10, 12)))
        )
    run_check(
        "check_equal_compute_steps",
        learners,
        reference,
        cases,
        blocked_functions=[objective_comparison.equal_compute_steps],
    )


# Pretraining: how much to mask.


def check_true_token_share(
    learner: Callable[[float, tuple[float, float, float], int], float],
) -> None:
    """Exercise: `learner(p, split, n_ordinary)` is the expected share of the ordinary
    tokens that the model must predict while its input shows the true token there:
    chosen with probability p, then kept (split[2]) or replaced by a random one of the
    n_ordinary ordinary ids that happens to be the original (split[1] / n_ordinary), as
    bert_pretraining.masking_shares(...)["shown the true token"]. Compared to 1e-12."""
    # here, not at the top: it loads the data module
    from minformers import bert_pretraining

    def as_tensor(p, split, n_ordinary):
        return torch.tensor(float(learner(p, split, n_ordinary)), dtype=torch.float64)

    def reference(p, split, n_ordinary):
        share = bert_pretraining.masking_shares(p, split, n_ordinary)[
            "shown the true token"
        ]
        return torch.tensor(share, dtype=torch.float64)

    cases = [
        Case(
            "BERT: 15%, (0.8, 0.1, 0.1), 2,995 ordinary ids",
            (0.15, (0.8, 0.1, 0.1), 2995),
        ),
        Case(
            "100% [MASK]: the true token is never shown", (0.15, (1.0, 0.0, 0.0), 2995)
        ),
        Case(
            "(0.8, 0.2, 0.0) with 2 ordinary ids: half the random draws are the "
            "original",
            (0.15, (0.8, 0.2, 0.0), 2),
        ),
        Case("keep every chosen token, 40%", (0.4, (0.0, 0.0, 1.0), 2995)),
        Case(
            "one ordinary id: a random draw is always the original",
            (0.25, (0.5, 0.3, 0.2), 1),
        ),
        Case("random tokens only, 10 ordinary ids", (0.3, (0.0, 1.0, 0.0), 10)),
        Case(
            "40%, BERT's split, bert-base-uncased's 30,517 ordinary ids",
            (0.4, (0.8, 0.1, 0.1), 30517),
        ),
    ]
    draw = random.Random(SEED)
    for _ in range(2):
        weights = [draw.random() for _ in range(3)]
        split = tuple(weight / sum(weights) for weight in weights)
        case = (draw.uniform(0.05, 0.5), split, draw.randint(1, 50000))
        cases.append(
            Case(
                f"random: p={case[0]:.3f}, split {tuple(round(x, 3) for x in split)}, "
                f"{case[2]} ids",
                case,
            )
        )
    run_check(
        "check_true_token_share",
        as_tensor,
        reference,
        cases,
        blocked_functions=[bert_pretraining.masking_shares],
        atol=1e-12,
    )


# Pretraining: what pretraining learns (cloze probes).


def check_candidate_ranks(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(logits, candidate_ids, answer_ids)` returns the (N,) ranks of
    the answers among their candidates by logit, 1 = the model's first choice, a
    candidate tied with the answer counted as ahead of it; candidate_ids is (K,), shared
    by every probe, or (N, K), as cloze.candidate_ranks."""

    def as_ranks(logits, candidate_ids, answer_ids):
        return torch.as_tensor(learner(logits, candidate_ids, answer_ids)).long()

    draw = torch.Generator().manual_seed(SEED)
    # (N, V), a model's logits at six masks
    vocab_logits = torch.randn(6, 3000, generator=draw)
    shared = torch.randperm(3000, generator=draw)[:20]  # (K,)
    answers = shared[torch.randint(20, (6,), generator=draw)]
    # (N, 2): agreement's right and wrong form
    pairs = torch.randint(5, 3000, (6, 1), generator=draw).repeat(1, 2)
    pairs[:, 1] = (pairs[:, 0] + 7) % 3000
    tied = torch.tensor([[1.0, 2.0, 2.0, 0.5], [3.0, 3.0, 3.0, 3.0]])
    cases = [
        Case(
            "shared candidates, no ties",
            (
                torch.tensor([[0.0, 3.0, 1.0, 2.0, 5.0]]),
                torch.tensor([1, 2, 3]),
                torch.tensor([2]),
            ),
        ),
        Case(
            "a candidate tied with the answer counts ahead of it",
            (tied, torch.tensor([0, 1, 2]), torch.tensor([2, 0])),
        ),
        Case(
            "all logits equal: the answer is ranked last",
            (tied[1:], torch.tensor([0, 1, 2, 3]), torch.tensor([1])),
        ),
        Case(
            "one candidate per probe: always first",
            (tied, torch.tensor([[3], [2]]), torch.tensor([3, 2])),
        ),
        Case(
            "per-probe pairs (N, 2), answer second in some rows",
            (
                vocab_logits,
                pairs,
                torch.where(torch.arange(6) % 2 == 0, pairs[:, 0], pairs[:, 1]),
            ),
        ),
        Case(
            "20 shared candidates out of 3,000 pieces, random logits",
            (vocab_logits, shared, answers),
        ),
    ]
    run_check(
        "check_candidate_ranks",
        as_ranks,
        lambda *args: cloze.candidate_ranks(*args).long(),
        cases,
        blocked_functions=[cloze.candidate_ranks, cloze.candidate_ranks_of],
    )


# Applications: retrieval-augmented generation.


def check_bm25_scores(learner: Callable[[list, list, float, float], list]) -> None:
    """Exercise: `learner(query, documents, k1, b)` returns the BM25 score of every
    document (lists of terms) for the query, with Lucene's idf ln(1 + (N - n + 0.5) / (n
    + 0.5)) and a repeated query term counted each time, as retrieval.BM25(documents,
    k1, b).scores(query). Compared to 1e-9."""
    # here, not at the top: it pulls in the BERT and fine-tuning modules
    from minformers import retrieval

    def as_tensor(query, documents, k1, b):
        return torch.as_tensor(learner(query, documents, k1, b), dtype=torch.float64)

    def reference(query, documents, k1, b):
        return retrieval.BM25(documents, k1=k1, b=b).scores(query)

    small = [
        ["the", "cat", "sat"],
        ["a", "dog", "sat", "on", "a", "cat", "mat"],
        ["dogs", "bark"],
    ]
    draw = random.Random(SEED)
    vocabulary = [f"w{index}" for index in range(30)]
    # Zipf-like: a few words in most documents, most words in few, as in text
    collection = [
        draw.choices(
            vocabulary,
            weights=[1 / (rank + 1) for rank in range(30)],
            k=draw.randint(1, 25),
        )
        for _ in range(40)
    ]
    cases = [
        Case(
            "one word in 2 of 3 documents, k1 = 1.5, b = 0.75",
            (["cat"], small, 1.5, 0.75),
        ),
        Case(
            "two words; the long document holds both",
            (["cat", "mat"], small, 1.5, 0.75),
        ),
        Case("a word twice in one document", (["a"], small, 1.5, 0.75)),
        Case("a repeated query word counts twice", (["cat", "cat"], small, 1.5, 0.75)),
        Case("a word no document holds scores 0", (["zebra"], small, 1.2, 0.75)),
        Case(
            "a word in every document still scores > 0",
            (["sat", "the"], [["sat"], ["sat", "the"]], 1.5, 0.75),
        ),
        Case("b = 0: no length discount", (["cat"], small, 1.5, 0.0)),
        Case("b = 1: full length discount", (["cat", "dog"], small, 1.2, 1.0)),
        Case(
            "k1 = 0: each word counts once, only idf", (["a", "cat"], small, 0.0, 0.75)
        ),
        Case(
            "40 random documents, 4-word query",
            (draw.sample(vocabulary, 4), collection, 0.9, 0.4),
        ),
    ]
    run_check(
        "check_bm25_scores",
        as_tensor,
        reference,
        cases,
        blocked_functions=[
            retrieval.BM25.__init__,
            retrieval.BM25.scores,
            retrieval.BM25.idf,
        ],
        atol=1e-9,
    )


# Pretraining: pretrain-then-fine-tune against scratch.


def check_relative_distance(learner: Callable) -> None:
    """Exercise: `learner(initial, final)` is ||theta - theta_0|| / ||theta_0|| as a
    float, the norms over all the entries of `initial`'s tensors together, `final` read
    at `initial`'s names only, as transfer.relative_distance. Compared to 1e-6."""
    # here, not at the top: only the transfer page needs it
    from minformers import transfer

    def as_tensor(initial, final):
        return torch.tensor(float(learner(initial, final)), dtype=torch.float64)

    def reference(initial, final):
        return torch.tensor(
            transfer.relative_distance(initial, final), dtype=torch.float64
        )

    draw = torch.Generator().manual_seed(SEED)
    weights = {
        "weight": torch.randn(30, 20, generator=draw) * 0.02,
        "bias": torch.full((30,), 0.5),
    }
    nudged = {
        name: tensor + 0.001 * torch.randn(tensor.shape, generator=draw)
        for name, tensor in weights.items()
    }
    cases = [
        Case(
            "one tensor, by hand: (3, 4) -> (3, 4.5) moves 0.5 of 5",
            ({"w": torch.tensor([3.0, 4.0])}, {"w": torch.tensor([3.0, 4.5])}),
        ),
        Case(
            "nothing moved: 0",
            ({"w": torch.tensor([1.0, -2.0])}, {"w": torch.tensor([1.0, -2.0])}),
        ),
        Case(
            "two tensors: one norm over both, not a mean of two ratios",
            (
                {"big": torch.full((100,), 1.0), "small": torch.tensor([1.0])},
                {"big": torch.full((100,), 1.0), "small": torch.tensor([2.0])},
            ),
        ),
        Case(
            "final holds an extra tensor, which does not count",
            (
                {"w": torch.tensor([[1.0, 2.0], [2.0, 4.0]])},
                {"w": torch.tensor([[1.0, 2.0], [2.0, 5.0]]), "head": torch.ones(5)},
            ),
        ),
        Case(
            "a matrix and a bias of different scales, nudged at random",
            (weights, nudged),
        ),
        Case(
            "moved by more than its own norm",
            ({"w": torch.tensor([0.1, 0.0])}, {"w": torch.tensor([-0.3, 0.4])}),
        ),
    ]
    run_check(
        "check_relative_distance",
        as_tensor,
        reference,
        cases,
        blocked_functions=[transfer.relative_distance, transfer.weight_movement],
        atol=1e-6,
    )


# Applications: BERT as a next-word predictor.


def check_next_token_targets(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(input_ids, attention_mask)` returns the (B, T) targets of a
    next-token loss read at every position: token t + 1 where tokens t and t + 1 are
    both real, -100 elsewhere (the last position, padding, and a left pad before the
    first real token), as next_word.next_token_targets."""
    # here, not at the top: it pulls in the objectives comparison
    from minformers import next_word

    def as_long(input_ids, attention_mask):
        return torch.as_tensor(learner(input_ids, attention_mask)).long()

    draw = torch.Generator().manual_seed(SEED)
    lengths = torch.randint(1, 13, (6,), generator=draw)
    # (6, 12), right-padded
    random_mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
    random_ids = torch.randint(5, 3000, (6, 12), generator=draw).masked_fill(
        random_mask == 0, 0
    )
    right = torch.tensor([[2, 40, 41, 42, 3], [2, 50, 3, 0, 0], [2, 3, 0, 0, 0]])
    left = torch.tensor([[0, 0, 2, 60, 3], [2, 61, 62, 63, 3]])
    cases = [
        Case(
            "one block, no padding",
            (torch.tensor([[2, 17, 18, 19, 3]]), torch.ones(1, 5, dtype=torch.long)),
        ),
        Case("right padding: rows of 5, 3 and 2 tokens", (right, (right != 0).long())),
        Case(
            "left padding: a pad before the first real token predicts nothing",
            (left, (left != 0).long()),
        ),
        Case("a bool attention mask", (right, right != 0)),
        Case(
            "one token: nothing to predict", (torch.tensor([[7]]), torch.tensor([[1]]))
        ),
        Case(
            "a row of padding only",
            (torch.zeros(2, 4, dtype=torch.long), torch.tensor([[0] * 4, [0] * 4])),
        ),
        Case("6 random blocks of up to 12 tokens", (random_ids, random_mask)),
    ]
    run_check(
        "check_next_token_targets",
        as_long,
        next_word.next_token_targets,
        cases,
        blocked_functions=[next_word.next_token_targets],
    )
