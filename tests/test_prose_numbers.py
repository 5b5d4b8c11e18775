"""Numbers in the chapters' prose come from the run (printed Markdown or glue), not from the author's keyboard: a
result typed by hand goes stale the first time the run changes.

The scan reads each chapter's prose, that is the Markdown outside code cells, fenced blocks, math and inline code,
and flags every percentage and every decimal number. A flagged number passes when
- its sentence cites a paper ({footcite}), so it is a quoted fact;
- the chapter's own code holds the same literal (15% and 0.15 alike), so it is a setting the page runs with;
- or it is listed in ALLOWED below, with the reason it is not a result of the run.
Integers without a percent sign are not flagged: they are counts and sizes far more often than results.
"""

import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"

# (chapter, number as written) -> why it is not a result of this build's run
ALLOWED = {
    ("activations", "0.001"): "arithmetic: the step of activations._grid near 0",
    ("bert", "15%"): "BERT's masking rate, a fact of the paper cited on the page",
    ("bert_electra", "85%"): "arithmetic: the positions MLM does not mask, 100% - 15%",
    ("bert_electra", "79.9"): "the ELECTRA paper's GLUE score, quoted (cited in the same list item)",
    ("bert_electra", "75.1"): "the ELECTRA paper's GLUE score, quoted (cited in the same list item)",
    ("gpt", "1.5"): "GPT-2 XL's size as usually quoted, 1.5 B",
    ("in_context", "1.4"): "arithmetic: the standard error sqrt(0.75 x 0.25 / 1000), worked in the text",
    ("in_context", "75%"): "arithmetic: the accuracy at which a standard error is worked out",
    ("intro", "3.11"): "the Python version the course installs",
    ("intro", "5%"): "a chapter summary naming a setting the tokenization page sweeps",
    ("intro", "40%"): "a chapter summary naming a setting the masking page sweeps",
    ("modern_decoder", "4.3"): "the Student t quantile at 2 degrees of freedom, a table value",
    ("modern_decoder", "1.96"): "the normal quantile, a table value",
    ("optimizers", "0.63"): "closed form: heavy ball's rate at its tuned setting, worked in the text",
    ("pretraining_memorization", "33.2"): "arithmetic: log2 of the candidates, worked in the text",
    ("pretraining_objectives", "15%"): "BERT's masking rate, a fact of the paper",
    ("pretraining_objectives", "80%"): "BERT's share of [MASK] among the chosen tokens, a fact of the paper",
    ("pretraining_probes", "70%"): "a hypothetical accuracy in an exercise's question",
    ("pretraining_probes", "15%"): "the masking rate of the BERT recipe the page replays, a setting of the run",
    ("pretraining_transfer", "0.02"): "BERT's initialisation standard deviation, a fact of the model",
    ("transformer_translation", "0.2%"): "arithmetic: 2,000 training numbers of the task's million",
    ("transformer_translation", "0.9"): "arithmetic: 1 - the label smoothing of 0.1 set on the page",
}

NUMBER = re.compile(r"(?<![\w.$/-])(\d[\d,]*\.\d+|\d+(?:\.\d+)?)(\s?%)?")
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```\s*$", re.S | re.M)
LITERAL = re.compile(r"(?<![\w.])(\d[\d_]*\.?\d*(?:e-?\d+)?)")
NOT_PROSE = [  # removed before scanning, in this order
    re.compile(r"\A---\n.*?\n---\n", re.S),  # front matter
    re.compile(r"^(```+|~~~+).*?^\1\s*$", re.S | re.M),  # code cells and every other fenced block
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"\$[^$\n]+\$"),  # inline math
    re.compile(r"`[^`\n]+`"),  # inline code, and roles such as {doc}`...`
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"https?://\S+"),
]


def prose(text: str) -> str:
    for pattern in NOT_PROSE:
        text = pattern.sub("", text)
    return text


def code_literals(text: str) -> set[float]:
    literals = set()
    for literal in LITERAL.findall("\n".join(CODE_CELL.findall(text))):
        try:
            literals.add(round(float(literal.replace("_", "")), 9))
        except ValueError:
            pass
    return literals


def typed_numbers(text: str) -> list[tuple[str, str]]:
    """(number as written, its sentence) for each percentage or decimal in the prose of a chapter's `text` that
    is neither in a citing sentence nor a literal of the chapter's code."""
    literals, found = code_literals(text), []
    for paragraph in re.split(r"\n\s*\n", prose(text)):
        for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
            if "{footcite" in sentence:
                continue
            for number, percent in NUMBER.findall(sentence):
                if not percent and "." not in number:
                    continue
                value = float(number.replace(",", ""))
                if {round(value, 9), round(value / 100, 9) if percent else None} & literals:
                    continue
                found.append((number + percent.strip(), " ".join(sentence.split())))
    return found


def flagged() -> dict[tuple[str, str], str]:
    return {(path.stem, number): sentence for path in sorted(BOOK.glob("*.md"))
            for number, sentence in typed_numbers(path.read_text(encoding="utf-8"))}


def test_no_chapter_types_a_result_by_hand():
    unexplained = {key: sentence for key, sentence in flagged().items() if key not in ALLOWED}
    assert not unexplained, "numbers typed in prose; print them from the run, or list them in ALLOWED with why:\n" + \
        "\n".join(f"{page}: {number} in: {sentence[:150]}" for (page, number), sentence in unexplained.items())


def test_every_allowance_is_still_needed():
    stale = set(ALLOWED) - set(flagged())
    assert not stale, f"these numbers no longer appear in the prose; remove them from ALLOWED: {sorted(stale)}"


@pytest.mark.parametrize("text, expected", [
    ("The fine-tuned model reached 61.5% on dev.\n", ["61.5%"]),  # a typed result
    ("Its loss fell to 2.43 nats.\n", ["2.43"]),
    ("BERT masks 15% of tokens {footcite:p}`devlin2019bert`.\n", []),  # quoted with its citation
    ("We sample at temperature 0.7.\n\n```{code-cell} ipython3\nsample(model, temperature=0.7)\n```\n", []),
    ("Masking 25% of them.\n\n```{code-cell} ipython3\nrate = 0.25\n```\n", []),  # the page's own setting
    ("The math $p = 0.15$ and the code `lr=3e-4` and 12 layers.\n", []),
    ("```{code-cell} ipython3\nprint(f'{accuracy:.1%} is 61.5%')\n```\n", []),  # inside code: printed by the run
])
def test_the_scan_flags_typed_results_and_nothing_else(text, expected):
    assert [number for number, _ in typed_numbers(text)] == expected


def test_exercises_are_named_by_numref_so_the_prose_and_the_site_agree():
    # The site numbers exercises across the whole book (sphinx-exercise), so an "exercise 2" typed in a chapter
    # names another chapter's exercise; {numref}`exercise %s <ex-label>` prints the number the site shows.
    typed = [f"{path.stem}: {match.group(0)}" for path in sorted(BOOK.glob("*.md"))
             for match in re.finditer(r"\bexercises? \d+", prose(path.read_text()), re.IGNORECASE)]
    assert typed == []
