"""Measuring what code costs on this machine: wall time and the peak memory of the
tensors it allocates.

>>> seconds = median_time(lambda: torch.randn(256, 256) @ torch.randn(256, 256))
>>> peak_tensor_bytes(lambda: torch.zeros(1024, dtype=torch.float32))
4096
"""

import statistics
import time
import weakref
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only


def median_time(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of `fn()` in seconds, after `warmup` untimed calls (the first
    call pays one-off costs)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


class _TensorMemoryTracker(TorchDispatchMode):
    """Counts the bytes of every tensor storage created while active, and when
    each is freed.

    It sees each op's outputs through torch's dispatcher, so scratch buffers that a
    fused kernel allocates internally (and frees before returning) are invisible to it.
    """

    def __init__(self):
        super().__init__()
        self.live_bytes = 0
        self.peak_bytes = 0
        self._live_storages: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        tree_map_only(torch.Tensor, self._track, result)
        return result

    def _track(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self._live_storages:  # a view of a storage we already count
            return
        self._live_storages.add(key)
        self.live_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(storage, self._release, key, storage.nbytes())

    def _release(self, key: int, nbytes: int) -> None:
        self._live_storages.discard(key)
        self.live_bytes -= nbytes


def peak_tensor_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes held at once by tensors that `fn()` allocates
    (its inputs are not counted).

    Only tensors created through torch ops count (on any device), which is what an
    algorithm's memory cost is about; the Python interpreter and allocator overheads are
    left out.
    """
    with torch.no_grad(), _TensorMemoryTracker() as tracker:
        fn()
    return tracker.peak_bytes


def training_flops(model: torch.nn.Module, loss_for_batch: Callable, batch) -> int:
    """Floating-point operations of one training step's forward and backward pass, as
    torch's FlopCounterMode counts them: matrix multiplications and attention, 2 per
    multiply-add; element-wise work (activations, LayerNorm, softmax outside attention,
    the optimizer) is not counted. The model's gradients are cleared afterwards.

    >>> training_flops(
    ...     torch.nn.Linear(10, 20, bias=False),
    ...     lambda model, x: model(x).sum(),
    ...     torch.ones(4, 10),
    ... )
    3200

    That is 2 x 4 x 10 x 20 forward, and as many again for the weight's gradient; the
    input needs no gradient, so the backward pass here costs one forward, not the usual
    two.
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # imported here: only the pages that count FLOPs need it
    from torch.utils.flop_counter import FlopCounterMode

    # The counter does not see inside torch's fused CPU attention kernel; its math
    # backend runs the same attention as matmuls it does count (all of them: the causal
    # half that the fused kernel skips is counted too).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        output = loss_for_batch(model, batch)
        (output["loss"] if isinstance(output, dict) else output).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()
