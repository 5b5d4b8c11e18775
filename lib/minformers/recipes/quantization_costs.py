"""What quantization costs a model, as the quantization page measures it: held-out loss
and weight error under weight schemes, the outlier channels of each layer's input, and
torch's int8 kernel in size, loss and speed (interleaved timings).

    >>> scheme_name(4, 32), scheme_name(8, None, absmax=True)
    ('4-bit, groups of 32', '8-bit absmax, per row')
"""

import copy
import io
import time
import warnings
from functools import partial

import torch
import torch.nn.functional as F

from minformers.quantization import absmax_int8, affine, with_quantized_weights


def scheme_name(bits: int, group_size: int | None, absmax: bool = False) -> str:
    """How the page's tables name a scheme; ``group_size`` None: one group a row."""
    where = "per row" if group_size is None else f"groups of {group_size}"
    return f"{bits}-bit{' absmax' if absmax else ''}, {where}"


def weight_schemes(bits=(8, 6, 4, 3, 2), group_sizes=(32, 128, None)) -> dict:
    """name -> quantize(weight): affine codes at each of ``bits`` over groups of the
    first group size, 4-bit over each of the others, and 8-bit absmax per row."""

    def grouped(bits, size):
        return lambda weight: affine(weight, bits, size or weight.shape[1])

    schemes = {scheme_name(8, None, absmax=True): partial(absmax_int8, per="channel")}
    schemes |= {
        scheme_name(b, group_sizes[0]): grouped(b, group_sizes[0]) for b in bits
    }
    schemes |= {scheme_name(4, size): grouped(4, size) for size in group_sizes[1:]}
    return schemes


@torch.no_grad()
def token_losses(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` at each position of ``ids`` (batch,
    length + 1), flattened: (batch * length,), for paired comparisons of two settings."""
    logits = model(ids[:, :-1])
    logits = getattr(logits, "logits", logits)  # an HF model's output
    return F.cross_entropy(
        logits.flatten(0, 1).float(), ids[:, 1:].flatten(), reduction="none"
    )


def held_out_loss(model: torch.nn.Module, ids: torch.Tensor) -> float:
    """Mean next-token cross-entropy of ``model`` on ``ids`` (batch, length + 1)."""
    return token_losses(model, ids).mean().item()


def weight_error(model: torch.nn.Module, quantized: torch.nn.Module) -> float:
    """The relative error of all linear weights together, ||W - Q|| / ||W||, of a
    ``quantized`` copy of ``model`` (``with_quantized_weights``)."""
    error = norm = 0.0
    for original, copied in zip(model.modules(), quantized.modules(), strict=True):
        if isinstance(original, torch.nn.Linear):
            error += (copied.weight - original.weight).square().sum().item()
            norm += original.weight.square().sum().item()
    return (error / norm) ** 0.5


def _counted(quantize, sizes: list, weight: torch.Tensor):
    """``quantize(weight)``, noting (bits stored, weights) in ``sizes``."""
    quantized = quantize(weight)
    sizes.append((quantized.bits_per_weight() * weight.numel(), weight.numel()))
    return quantized


def weight_costs(model, ids, schemes: dict) -> dict:
    """scheme -> (bits stored per weight, weight error, held-out loss change) of
    ``model`` on ``ids`` with every linear weight quantized by the scheme."""
    before = held_out_loss(model, ids)
    costs = {}
    for name, quantize in schemes.items():
        sizes = []
        quantized = with_quantized_weights(model, partial(_counted, quantize, sizes))
        bits = sum(b for b, _ in sizes) / sum(n for _, n in sizes)
        change = held_out_loss(quantized, ids) - before
        costs[name] = (bits, weight_error(model, quantized), change)
    return costs


def input_peaks(model: torch.nn.Module, ids: torch.Tensor) -> dict:
    """linear layer's name -> the largest magnitude of each channel of its input
    over ``ids`` (channels,)."""
    peaks = {}

    def record(name):
        def hook(module, inputs, output):
            peaks[name] = inputs[0].detach().abs().flatten(0, -2).amax(0)

        return hook

    handles = [
        module.register_forward_hook(record(name))
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
    ]
    try:
        held_out_loss(model, ids)
    finally:
        for handle in handles:
            handle.remove()
    return peaks


def int8_kernels(model: torch.nn.Module, spared=()) -> tuple:
    """Two copies of ``model`` on torch's dynamic int8 linear layers, with one weight
    scale per output channel: one with every linear layer converted, and one that keeps
    the layers named in ``spared`` in float32 and shares the first's other layers."""
    per_channel = torch.ao.quantization.per_channel_dynamic_qconfig
    linear = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    with warnings.catch_warnings():
        # torch.ao's notice of a successor, which this torch does not have
        warnings.simplefilter("ignore")
        converted = torch.ao.quantization.quantize_dynamic(
            copy.deepcopy(model), dict.fromkeys(linear, per_channel)
        )
    mixed = copy.deepcopy(model)
    for name in linear:
        if name not in spared:
            mixed.set_submodule(name, converted.get_submodule(name))
    return converted, mixed


@torch.no_grad()
def interleaved_seconds(models: dict, ids: torch.Tensor, repeats: int = 10) -> dict:
    """name -> the seconds of ``repeats`` forward passes of each model over ``ids``
    (batch, length), after one pass each to warm up. The models take turns within each
    repeat, so that a slow moment of the machine falls on all of them
    (``statistics.speedup_interval`` reads repeat i of two models as a pair)."""
    for model in models.values():
        model(ids)
    seconds = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            started = time.perf_counter()
            model(ids)
            seconds[name].append(time.perf_counter() - started)
    return seconds


def state_megabytes(model: torch.nn.Module) -> float:
    """The size of the saved state: an int8 layer saves its packed weight, which its
    parameters do not show."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.tell() / 1e6
