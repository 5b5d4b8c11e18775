"""Checks for efficiency and systems: chunked attention, activations, AdamW, pipeline
schedules and int8 weights.

    >>> def the_gate_alone(x, beta):  # forgets the product rule
    ...     return torch.sigmoid(beta * x)
    >>> check_swish_derivative(the_gate_alone)
    Traceback (most recent call last):
    minformers.checks.CheckFailed: check_swish_derivative, case 'β = 1 (SiLU) on a grid': ...
    ...
"""

import functools
from collections.abc import Callable

import torch

from minformers import (
    activations,
    attention,
    distributed,
    long_attention,
    optimizers,
    quantization,
    speculative,
)
from minformers.checks import (
    Case,
    CheckFailed,
    call_learner,
    peak_tensor_bytes,
    run_check,
    seeded_generator,
    seeded_random,
)


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
    draw = seeded_generator()

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
    peak = call_learner(
        name,
        functools.partial(peak_tensor_bytes, learner),
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


def check_swish_derivative(
    learner: Callable[[torch.Tensor, float], torch.Tensor],
) -> None:
    """Exercise: `learner(x, beta)` returns d/dx of Swish, x σ(βx), in closed form (no
    autograd), as activations.swish_derivative."""
    draw = seeded_generator()
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
    weight_decay)` makes AdamW's update number t (from 1) and returns the new
    (theta, exp_avg, exp_avg_sq), as optimizers.AdamW and torch.optim.AdamW."""
    draw = seeded_generator()

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
            (seeded_random().sample(gpipe, len(gpipe)),),
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


def _per_row_int8(weight: torch.Tensor) -> torch.Tensor:
    return quantization.absmax_int8(weight, "channel").dequantize()


def check_int8_rows(learner: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: `learner(weight)`, weight (rows, columns), is the weight as absmax int8
    codes with one scale per row read it back: each row divided by its largest
    magnitude over 127, rounded, and multiplied back."""
    draw = seeded_generator()
    outlier = torch.randn(3, 16, generator=draw) * 0.05
    outlier[1, 7] = -6.0  # one large weight: its row's scale, not the others'
    zero = torch.randn(2, 8, generator=draw)
    zero[0] = 0.0
    cases = [
        Case("one row", (torch.tensor([[0.5, -1.0, 0.25, 2.0]]),)),
        Case("a row with one large weight among small ones", (outlier,)),
        Case("a row of zeros", (zero,)),
        Case(
            "5 random rows of different sizes",
            (torch.randn(5, 32, generator=draw) * torch.arange(1, 6)[:, None],),
        ),
    ]
    run_check(
        "check_int8_rows",
        learner,
        _per_row_int8,
        cases,
        blocked_functions=[quantization.absmax_int8, quantization.affine],
    )


def check_residual(
    learner: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    """Exercise: `learner(p, q)`, the target's and the draft's distributions (..., V),
    is the distribution speculative sampling draws from after a rejected guess:
    max(0, p - q), normalised over the last dimension."""
    draw = seeded_generator()
    p, q = (
        torch.rand(4, 6, generator=draw).softmax(-1),
        torch.rand(4, 6, generator=draw).softmax(-1),
    )
    cases = [
        Case(
            "one position",
            (torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.6, 0.2])),
        ),
        Case(
            "a greedy draft, one-hot on a token the target likes less",
            (p[0], torch.eye(6)[2]),
        ),
        Case(
            "a draft with nothing left (all guesses kept): p itself",
            (p[1], torch.zeros(6)),
        ),
        Case("4 positions of 6 tokens", (p, q)),
    ]
    run_check(
        "check_residual",
        learner,
        speculative.residual,
        cases,
        blocked_functions=[speculative.residual],
    )
