"""Several small training runs at once, one process per core. On the course's 2-core
machines, two one-thread processes train two small models faster than one two-thread
process trains them in turn (``make bench`` measures it, benchmarks/bench_threads.py):
a small model's matmuls are too short to keep two threads busy.

    >>> import math
    >>> # the function must be importable by name: defined at top level
    >>> map_in_workers(math.factorial, [5, 3])
    [120, 6]
"""

import multiprocessing
from collections.abc import Callable, Mapping, Sequence

import torch

from minformers.support.arguments import require_size


def _one_thread() -> None:
    # two one-thread processes, not two processes fighting over each other's cores
    torch.set_num_threads(1)


def _indexed(item):
    function, index, argument = item
    return index, function(argument)


def map_in_workers(
    function: Callable,
    arguments: Sequence,
    workers: int = 2,
    cost: Callable | None = None,
    on_result: Callable | None = None,
) -> list:
    """``[function(a) for a in arguments]``, computed on ``workers`` processes of one
    torch thread each.

    ``cost(a)`` (optional) orders the work, costliest first, so that no worker is left
    alone with a long job at the end; ``on_result(done, a, result)`` is called as each
    one finishes, with the number finished so far (say, to print a line). ``function``
    and the arguments must pickle: the workers are fresh interpreters ("spawn"), which
    import ``function`` by name."""
    require_size("workers", workers)
    order = sorted(
        range(len(arguments)), key=lambda i: -cost(arguments[i]) if cost else 0
    )
    results = {}
    with multiprocessing.get_context("spawn").Pool(
        workers, initializer=_one_thread
    ) as pool:
        for index, result in pool.imap_unordered(
            _indexed, [(function, i, arguments[i]) for i in order]
        ):
            results[index] = result
            if on_result is not None:
                on_result(len(results), arguments[index], result)
    return [results[i] for i in range(len(arguments))]


def map_groups_in_workers(
    function: Callable, groups: Mapping, workers: int = 2
) -> dict[object, list]:
    """``{key: [function(a) for a in group] for key, group in groups.items()}``, every
    call in one pool of ``map_in_workers``: settings of a comparison, each a list of
    runs (one per seed, say), keep their names without slicing the results by hand.

    >>> import math
    >>> map_groups_in_workers(math.factorial, {"small": [2, 3], "large": [5]})
    {'small': [2, 6], 'large': [120]}
    """
    flat = [argument for group in groups.values() for argument in group]
    results = iter(map_in_workers(function, flat, workers))
    return {key: [next(results) for _ in group] for key, group in groups.items()}
