"""The course's bibliography (book/references.bib) links readers to the papers it can."""

import re
from pathlib import Path

BIB = Path(__file__).resolve().parent.parent / "book" / "references.bib"


def entries() -> dict[str, str]:
    text = BIB.read_text()
    starts = [(match.start(), match.group(1)) for match in re.finditer(r"^@\w+\{([^,]+),", text, re.M)]
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return {key: text[start:end] for (start, key), end in zip(starts, ends, strict=True)}


def test_every_arxiv_preprint_links_its_abstract_page():
    missing = []
    for key, entry in entries().items():
        for identifier in re.findall(r"arXiv:(\d{4}\.\d{4,5})", entry):
            if f"https://arxiv.org/abs/{identifier}" not in entry:
                missing.append(key)
    assert not missing, f"entries naming an arXiv preprint without its link: {missing}"
    assert any("arxiv.org/abs/" in entry for entry in entries().values())


# Entries with no link we could confirm from a stable source: an address is added only once it is checked.
UNLINKED = {"schuster2012japanese", "nair2010rectified", "maas2013rectifier", "hinton2012rmsprop",
            "harris1954distributional"}


def test_every_entry_links_the_work_or_is_known_to_have_no_checked_link():
    unlinked = {key for key, entry in entries().items() if not re.search(r"^\s*(url|doi)\s*=", entry, re.M)}
    assert unlinked <= UNLINKED, f"entries with no url or doi: {sorted(unlinked - UNLINKED)}"
    assert not UNLINKED - set(entries()), "UNLINKED names an entry that is gone"
