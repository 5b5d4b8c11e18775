"""Checkpoints for the training loop (``minformers.train``) and the book's build cache.

A training checkpoint is one safetensors file holding the model, the optimizer's
moments, the RNG states and the run's history, with a sha256 of it all in its metadata:
a resumed run repeats the uninterrupted run's losses exactly, and a file cut short or
changed since is refused by name. A save goes to a partial file first and replaces the
checkpoint atomically, so a crash leaves the previous one whole (and the next save
deletes the partial file of a process that died). ``load_weights`` reads only the model
from one, say an earlier chapter's.

``checkpoint_path`` names a saved result by its settings and by the lib's source, so
the pages of one build train each shared model once, and ``cached_in_build`` does the
same for data that is slow to prepare.
"""

import glob
import hashlib
import json
import os
import pickle
import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

# the minformers package, whose source keys checkpoints and the book's cache
LIB = Path(__file__).resolve().parents[1]


def checkpoint_path(name: str, settings: dict, suffix: str = ".safetensors") -> Path:
    """Where a page saves a trained model (or any costly result, such as a trained
    vocabulary, with another ``suffix``) so that a later page of the same build can
    reuse it.

    The file name carries a hash of `settings` (everything that shapes the model:
    configs, data, seed) and of the lib's source, so a change to either means a fresh
    run. It lives in _build/checkpoints/ beside the lib (or in $MINFORMERS_CHECKPOINTS),
    which the book build empties first: every build trains each model once, and a page
    run alone trains what it needs.

    >>> checkpoint_path("tiny-bert", {"d_model": 128}).name.startswith("tiny-bert-")
    True
    """
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(lib_source_digest().encode())
    folder = os.environ.get(
        "MINFORMERS_CHECKPOINTS", LIB.parents[1] / "_build" / "checkpoints"
    )
    return Path(folder) / f"{name}-{digest.hexdigest()[:16]}{suffix}"


def cached_in_build(name: str, settings: dict, build: Callable[[], object]) -> object:
    """``build()``, or its result pickled at ``checkpoint_path(name, settings)`` by an
    earlier call of this build: for data that takes seconds to prepare (a tokenized
    corpus) and that many pages, and their worker processes, each need.

    >>> cached_in_build("doctest-squares", {"n": 3}, lambda: [i * i for i in range(3)])
    [0, 1, 4]
    """
    path = checkpoint_path(name, settings, suffix=".pickle")
    if path.exists():
        return pickle.loads(path.read_bytes())
    result = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(pickle.dumps(result))
    # atomic, so a page or worker running at the same time never reads half a file
    os.replace(partial, path)
    return result


def lib_source_digest() -> str:
    """sha256 of every source file of the lib, in a fixed order: it changes whenever any
    of them does."""
    digest = hashlib.sha256()
    for source in sorted(LIB.rglob("*.py")):
        digest.update(
            source.relative_to(LIB).as_posix().encode() + b"\0" + source.read_bytes()
        )
    return digest.hexdigest()


def load_weights(model: torch.nn.Module, path: str | Path) -> torch.nn.Module:
    """Load only the model weights of a checkpoint written by ``train`` (say, an earlier
    chapter's model)."""
    path = Path(path)
    _load_model(model, _read(path)[0], path)
    return model


def save_checkpoint(
    path: Path, model, optimizer, step: int, config: dict, history: dict
) -> None:
    """Model, optimizer moments, RNG states, and the run's step, TrainConfig (as a dict)
    and history in one safetensors file, replaced atomically."""
    tensors = {f"model.{name}": _copy(t) for name, t in _model_tensors(model).items()}
    # per parameter: AdamW's step, exp_avg and exp_avg_sq (another optimizer's own)
    for index, state in optimizer.state_dict()["state"].items():
        tensors.update(
            {
                f"optimizer.{index}.{key}": _copy(torch.as_tensor(v))
                for key, v in state.items()
            }
        )
    # dropout draws continue exactly where they stopped
    tensors["rng.torch"] = torch.get_rng_state()
    version, python_state, gauss = random.getstate()
    numpy_state = np.random.get_state()
    rng = {
        "python": [version, list(python_state), gauss],
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
    }
    meta = json.dumps({"step": step, "config": config, "history": history, "rng": rng})
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_partials(path)
    # the pid: two processes may save one path
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        save_file(
            tensors,
            partial,
            metadata={"minformers": meta, "sha256": _checksum(tensors, meta)},
        )
        # atomic: a crash mid-save leaves the previous checkpoint whole
        os.replace(partial, path)
    finally:
        # left only by a failed save (a full disk, an interrupt)
        partial.unlink(missing_ok=True)


def resume(path: Path, model, optimizer, config: dict) -> tuple[int, dict]:
    """Load a run saved by ``save_checkpoint`` into ``model``, ``optimizer`` and the
    RNGs; return its step and history (as a dict). ``config`` must be the saved one."""
    tensors, meta = _read(path)
    now = json.loads(json.dumps(config))  # tuples -> lists, as they were saved
    differ = [
        f"{name} (checkpoint {meta['config'].get(name)}, now {now[name]})"
        for name in now
        if meta["config"].get(name) != now[name]
    ]
    if differ:
        raise ValueError(
            f"checkpoint {path} was written with a different TrainConfig: "
            f"{', '.join(differ)}; use the same config or a new checkpoint path"
        )
    _load_model(model, tensors, path)
    state: dict[int, dict] = {}
    for key, tensor in tensors.items():
        if key.startswith("optimizer."):
            _, index, name = key.split(".", 2)
            state.setdefault(int(index), {})[name] = tensor
    optimizer.load_state_dict(
        {"state": state, "param_groups": optimizer.state_dict()["param_groups"]}
    )
    torch.set_rng_state(tensors["rng.torch"])
    version, python_state, gauss = meta["rng"]["python"]
    random.setstate((version, tuple(python_state), gauss))
    name, keys, *rest = meta["rng"]["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), *rest))
    return meta["step"], meta["history"]


def _model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state_dict with each shared tensor once: a tied embedding is listed under
    both names, one storage."""
    tensors, seen = {}, set()
    for name, tensor in model.state_dict().items():
        key = (
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
        )
        if key not in seen:
            seen.add(key)
            tensors[name] = tensor
    return tensors


def _copy(tensor: torch.Tensor) -> torch.Tensor:
    # own storage: safetensors refuses shared ones
    return tensor.detach().to("cpu", copy=True).contiguous()


def _remove_stale_partials(path: Path) -> None:
    """Delete the partial files of saves to ``path`` whose process has died (killed
    mid-save, say); a partial that a running process is still writing stays."""
    for partial in path.parent.glob(f".{glob.escape(path.name)}.*.partial"):
        pid = partial.name.removeprefix(f".{path.name}.").removesuffix(".partial")
        if pid.isdigit() and not _is_running(int(pid)):
            partial.unlink(missing_ok=True)


def _is_running(pid: int) -> bool:
    try:
        # signal 0 sends nothing: it only asks whether the process exists
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        pass
    return True


def _checksum(tensors: dict[str, torch.Tensor], meta: str) -> str:
    """sha256 of the metadata and of every tensor's name, dtype, shape and bytes: one
    flipped bit changes it."""
    digest = hashlib.sha256(meta.encode())
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"\0{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0".encode())
        # raw bytes, whatever the dtype
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and metadata of a checkpoint written by ``save_checkpoint``; a file
    that is not one, or whose bytes have changed since, raises an error naming it."""
    if path.is_dir():  # safe_open would say only "No such device"
        raise ValueError(
            f"checkpoint {path} is a directory; pass the path of a .safetensors file "
            "written by train"
        )
    try:
        with safe_open(path, framework="pt") as file:
            tensors, metadata = (
                {key: file.get_tensor(key) for key in file.keys()},
                file.metadata() or {},
            )
    # empty, cut short (a full disk, a killed copy), or not safetensors at all
    except SafetensorError as error:
        raise ValueError(
            f"checkpoint {path} is not a complete safetensors file ({error}); delete "
            "it and train again"
        ) from None
    if "minformers" not in metadata:
        raise ValueError(
            f"checkpoint {path} has no minformers metadata, so train did not write it; "
            "read other safetensors files with safetensors.torch.load_file"
        )
    # Checkpoints saved before checksums were added have none, and load unchecked.
    if "sha256" in metadata and metadata["sha256"] != _checksum(
        tensors, metadata["minformers"]
    ):
        raise ValueError(
            f"checkpoint {path} is corrupt: its contents no longer match the sha256 "
            "saved with them; delete it and train again"
        )
    return tensors, json.loads(metadata["minformers"])


def _load_model(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], path: Path
) -> None:
    saved = {
        key.removeprefix("model."): t
        for key, t in tensors.items()
        if key.startswith("model.")
    }
    expected = {name: tuple(t.shape) for name, t in _model_tensors(model).items()}
    found = {name: tuple(t.shape) for name, t in saved.items()}
    if found != expected:
        differ = sorted(
            n for n in expected.keys() | found.keys() if expected.get(n) != found.get(n)
        )
        details = ", ".join(
            f"{n}: checkpoint {found.get(n)} vs model {expected.get(n)}"
            for n in differ[:5]
        )
        raise ValueError(
            f"checkpoint {path} does not fit this model ({len(differ)} tensors "
            f"differ): {details}"
        )
    # strict=False: a tied tensor's second name is filled by the first
    model.load_state_dict(saved, strict=False)
