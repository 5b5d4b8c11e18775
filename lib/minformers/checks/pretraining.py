"""Checks for the pretraining part: equal-compute budgets, weight movement, masking
shares, cloze ranks, memorisation's exposure and word2vec's loss. (It holds the checks
of six chapters, the most of any part.)

    >>> check_exposure(lambda true_score, candidate_scores: 0.0)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_exposure, case 'ranked first of 8: log2 8 = 3 bits': ...
    ...
"""

from collections.abc import Callable

import torch

from minformers import memorization, word2vec
from minformers.checks import (
    Case,
    run_check,
    seeded_generator,
    seeded_random,
)
from minformers.recipes import bert_pretraining, cloze, objective_comparison, transfer


def check_equal_compute_steps(learner: Callable[[dict, float], dict]) -> None:
    """Exercise: `learner(flops_per_step, budget)` returns {name: steps}, each the
    budget divided by that run's FLOPs per step, rounded to the nearest whole step, as
    an int, as objective_comparison.equal_compute_steps."""

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
    draw = seeded_random()
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


def check_relative_distance(learner: Callable) -> None:
    """Exercise: `learner(initial, final)` is ||theta - theta_0|| / ||theta_0|| as a
    float, the norms over all the entries of `initial`'s tensors together, `final` read
    at `initial`'s names only, as transfer.relative_distance. Compared to 1e-6."""

    def as_tensor(initial, final):
        return torch.tensor(float(learner(initial, final)), dtype=torch.float64)

    def reference(initial, final):
        return torch.tensor(
            transfer.relative_distance(initial, final), dtype=torch.float64
        )

    draw = seeded_generator()
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


def check_true_token_share(
    learner: Callable[[float, tuple[float, float, float], int], float],
) -> None:
    """Exercise: `learner(p, split, n_ordinary)` is the expected share of the ordinary
    tokens that the model must predict while its input shows the true token there:
    chosen with probability p, then kept (split[2]) or replaced by a random one of the
    n_ordinary ordinary ids that happens to be the original (split[1] / n_ordinary), as
    bert_pretraining.masking_shares(...)["shown the true token"]. Compared to 1e-12."""

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
    draw = seeded_random()
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


def check_candidate_ranks(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(logits, candidate_ids, answer_ids)` returns the (N,) ranks of
    the answers among their candidates by logit, 1 = the model's first choice, a
    candidate tied with the answer counted as ahead of it; candidate_ids is (K,), shared
    by every probe, or (N, K), as cloze.candidate_ranks."""

    def as_ranks(logits, candidate_ids, answer_ids):
        return torch.as_tensor(learner(logits, candidate_ids, answer_ids)).long()

    draw = seeded_generator()
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
    scores = torch.randn(999, generator=seeded_generator()) * 4 - 45
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


def check_sgns_loss(
    learner: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(center, context, negatives)` returns the skip-gram
    negative-sampling loss, the batch mean of -log σ(u_o·v_c) - Σ_k log σ(-u_k·v_c), for
    center (B, C), context (B, C), negatives (B, K, C), as word2vec.sgns_loss."""
    draw = seeded_generator()
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
