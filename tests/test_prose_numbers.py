"""Numbers in the chapters' prose come from the run (printed Markdown or glue), not from the author's keyboard: a
result typed by hand goes stale the first time the run changes.

The scan reads each chapter's prose, that is the Markdown outside code cells, fenced blocks, math and inline code,
and flags
- every percentage and every decimal number ("61.5%", "2.43");
- every integer followed by a unit ("600 steps", "2 threads", "98 s", "8 new tokens"), the units being steps,
  seconds, minutes, tokens, threads, layers and examples;
- every count or duration spelled out in words ("a few hundred steps", "one or two hundred steps", "one CPU
  thread", "half a minute", "a tenth"): see SPELLED.
A flagged number passes when
- its sentence cites a paper ({footcite}), so it is a quoted fact;
- it is written in digits and the chapter's own code holds the same literal (15% and 0.15 alike, 600 steps and
  600), so it is a setting the page runs with;
- or it is listed in ALLOWED below, with the reason it is not a result of the run.
Integers without a unit or a percent sign are not flagged: they are counts and sizes far more often than results.
"""

import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parent.parent / "book"

# Pages that share their runs out over worker processes give each one torch thread (parallel.map_in_workers,
# minformers.distributed), and several of them say so.
ONE_THREAD = "a setting: each worker process runs on one torch thread"

# (chapter, number as written) -> why it is not a result of this build's run
ALLOWED = {
    ("applications_rag", "8 new tokens"): "a setting: the default max_new_tokens of the recipe the page calls",
    ("bert", "15%"): "BERT's masking rate, a fact of the paper cited on the page",
    ("bert_albert", "a fifth"): "arithmetic: 30,000 x 768 = 23 M of BERT-base's 110 M, worked in the text",
    ("bert_albert", "a tenth"): "the claim's threshold (PLATEAU = 0.1 nats), a setting declared in code before the run",
    ("bert_albert", "125,000 steps"): "the paper's training length (Lan et al., 2020), a fact cited on the page",
    ("bert_albert", "155 tokens"): "arithmetic: H(E + 1)/(H - E) for the exercise's H = 768 and E = 128",
    ("bert_electra", "85%"): "arithmetic: the positions MLM does not mask, 100% - 15%",
    ("bert_electra", "a quarter"): "settings the code writes as / 4: the generator's width, the detection runs' rate",
    ("bert_electra", "a third"): "a setting: the rare-token run's steps, DETECTION.steps // 3",
    ("bert_electra", "a tenth"): "a setting: BERT's split keeps the true token at 10% of the predicted positions",
    ("bert_finetuning", "80%"): "a setting: data.movie_review_splits' shares, 80% training, 10% dev, 10% test",
    ("bert_finetuning", "a third"): "a setting: the probe-first recipe's rate, written lr / 3 in the page's code",
    ("claims", "95%"): "a setting of the decision rules (the interval's level), not a result",
    ("contributing", "70%"): "a rule of the style, not a result: the lesson share code_measures.py asks of pages",
    ("contributing", "5 s"): "a setting: the size of the build clock's unit of work (tools/build_clock.py)",
    ("contributing", "879 s"): "the reference machine's time for a past build, which defines a reference second",
    ("contributing", "one-thread"): ONE_THREAD,
    ("contributing", "512 tokens"): "BERT's length limit, the claim the table's row checks",
    ("distributed", "one thread"): ONE_THREAD,
    ("distributed", "two steps"): "a setting: the steps of zero_memory (steps=2 in the lib)",
    ("distributed", "two layers"): "a setting: the two nn.Linear layers the page's code builds and splits",
    ("glossary", "512 tokens"): "BERT's max_len, a fact of the model",
    ("gpt", "1.5"): "GPT-2 XL's size as usually quoted, 1.5 B",
    ("gpt", "2,000 steps"): "nanoGPT's CPU recipe, a fact of that repository",
    ("gpt", "two layer"): "an exercise's count of GPT-2's layer norms per block, a fact of the architecture",
    ("gpt_finetuning", "40 tokens"): "a setting: the context of review_pretraining (max_len 40)",
    ("gpt_finetuning", "one-thread"): ONE_THREAD,
    ("in_context", "1.4"): "arithmetic: the standard error sqrt(0.75 x 0.25 / 1000), worked in the text",
    ("in_context", "75%"): "arithmetic: the accuracy at which a standard error is worked out",
    ("instructors", "60 seconds"): "a setting: tools/grade.py's default --cell-timeout",
    ("instructors", "10 minutes"): "a setting: tools/grade.py's default --notebook-timeout",
    ("intro", "3.11"): "the Python version the course installs",
    ("intro", "5%"): "a chapter summary naming a setting the tokenization page sweeps",
    ("intro", "40%"): "a chapter summary naming a setting the masking page sweeps",
    ("intro", "100 steps"): "a chapter summary naming a setting the optimizers page runs with",
    ("modern_decoder", "4.3"): "the Student t quantile at 2 degrees of freedom, a table value",
    ("modern_decoder", "1.96"): "the normal quantile, a table value",
    ("modern_decoder", "one-thread"): ONE_THREAD,
    ("optimizers", "0.63"): "closed form: heavy ball's rate at its tuned setting, worked in the text",
    ("optimizers", "a quarter"): "arithmetic: ln 0.90 / ln 0.63, the closed-form rates worked in the text",
    ("posttraining_grpo", "20 steps"): "a setting: the recipe's eval_every",
    ("pretraining_masking", "four tokens"): "arithmetic: the 40% rate, read as four tokens in ten",
    ("pretraining_memorization", "33.2"): "arithmetic: log2 of the candidates, worked in the text",
    ("pretraining_objectives", "15%"): "BERT's masking rate, a fact of the paper",
    ("pretraining_objectives", "80%"): "BERT's share of [MASK] among the chosen tokens, a fact of the paper",
    ("pretraining_probes", "70%"): "a hypothetical accuracy in an exercise's question",
    ("pretraining_probes", "15%"): "the masking rate of the BERT recipe the page replays, a setting of the run",
    ("pretraining_transfer", "0.02"): "BERT's initialisation standard deviation, a fact of the model",
    ("scaling_laws", "one thread"): ONE_THREAD,
    ("tokenization", "one thread"): "a setting: the page runs both BPE trainers on one thread (RAYON_NUM_THREADS)",
    ("transformer_translation", "0.2%"): "arithmetic: 2,000 training numbers of the task's million",
    ("transformer_translation", "0.9"): "arithmetic: 1 - the label smoothing of 0.1 set on the page",
}

NUMBER = re.compile(r"(?<![\w.$/-])(\d[\d,]*\.\d+|\d+(?:\.\d+)?)(\s?%)?")
UNIT = r"(?:step|second|minute|token|thread|layer|example)s?"
# An integer is read with its unit, at most one word between ("8 new tokens"), or with "s" for seconds ("98 s").
COUNTED = re.compile(rf"(?<![\w.$/-])(\d{{1,3}}(?:,\d{{3}})+|\d+)(?:(?: [A-Za-z]+)? {UNIT}| s)\b")
WORD = r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
# Counts and durations in words ("a few hundred steps", "two CPU threads"): each allows one word before its unit.
SPELLED = [
    rf"(?:(?:a|the) few|a couple of|a dozen|one or {WORD}|{WORD})(?: (?:hundred|thousand|million))?(?: \w+)? {UNIT}",
    rf"(?:a|one) (?:hundred|thousand|million)(?: \w+)? {UNIT}",  # as in "over a thousand steps"
    # A lone "one" before a step, token, layer or example names the unit ("one token at a time"), so it is left out.
    r"(?:one|half)[ -](?:\w+ )?(?:minute|second|thread)s?|a minute",  # as in "one CPU thread", "half-minute"
    # A share is a result as a percentage would be; "of" tells it from an ordinal ("a third split").
    r"a (?:tenth|fifth|quarter|third)(?= of)",
]
# The lookbehind keeps "seven" in "thirty-seven" from being read as a count.
SPELLED_OUT = re.compile(rf"(?<![\w-])(?:{'|'.join(SPELLED)})\b", re.I)
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
    """(number as written, its sentence) for each number the module's docstring lists in the prose of a chapter's
    `text`, unless its sentence cites a paper or, written in digits, it is a literal of the chapter's code.

    "It ran 600 steps in 98 s, half a minute.\n\n```{code-cell} ipython3\nsteps = 600\n```\n"
    -> [("98 s", ...), ("half a minute", ...)], each with the sentence "It ran 600 steps in 98 s, half a minute."
    """
    literals, found = code_literals(text), []
    for paragraph in re.split(r"\n\s*\n", prose(text)):
        for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
            sentence = " ".join(sentence.split())
            if "{footcite" in sentence:
                continue
            for number, percent in NUMBER.findall(sentence):
                if not percent and "." not in number:
                    continue
                value = float(number.replace(",", ""))
                if {round(value, 9), round(value / 100, 9) if percent else None} & literals:
                    continue
                found.append((number + percent.strip(), sentence))
            for match in COUNTED.finditer(sentence):
                if float(match[1].replace(",", "")) not in literals:
                    found.append((match[0], sentence))
            found += [(match[0], sentence) for match in SPELLED_OUT.finditer(sentence)]
    return found


def flagged() -> dict[tuple[str, str], str]:
    return {
        (path.stem, number): sentence
        for path in sorted(BOOK.glob("*.md"))
        for number, sentence in typed_numbers(path.read_text(encoding="utf-8"))
    }


def test_no_chapter_types_a_result_by_hand():
    unexplained = {key: sentence for key, sentence in flagged().items() if key not in ALLOWED}
    assert not unexplained, (
        "numbers typed in prose; print them from the run, or list them in ALLOWED with why:\n"
        + "\n".join(f"{page}: {number} in: {sentence[:150]}" for (page, number), sentence in unexplained.items())
    )


def test_every_allowance_is_still_needed():
    stale = set(ALLOWED) - set(flagged())
    assert not stale, f"these numbers no longer appear in the prose; remove them from ALLOWED: {sorted(stale)}"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The fine-tuned model reached 61.5% on dev.\n", ["61.5%"]),  # a typed result
        ("Its loss fell to 2.43 nats.\n", ["2.43"]),
        ("BERT masks 15% of tokens {footcite:p}`devlin2019bert`.\n", []),  # quoted with its citation
        ("We sample at temperature 0.7.\n\n```{code-cell} ipython3\nsample(model, temperature=0.7)\n```\n", []),
        ("Masking 25% of them.\n\n```{code-cell} ipython3\nrate = 0.25\n```\n", []),  # the page's own setting
        ("The math $p = 0.15$ and the code `lr=3e-4` and `steps=600`, with 12 heads.\n", []),  # no unit
        ("It ran 600 steps in 98 s on 2 threads.\n", ["600 steps", "98 s", "2 threads"]),  # integers with units
        ("It ran 600 steps.\n\n```{code-cell} ipython3\nrun(steps=600)\n```\n", []),  # the page's own setting
        (
            "Half a minute on one CPU thread, a few hundred steps.\n",
            ["Half a minute", "one CPU thread", "a few hundred steps"],
        ),
        ("One or two hundred steps, not over a thousand steps.\n", ["One or two hundred steps", "a thousand steps"]),
        ("It read a few million tokens, and about a tenth of them twice.\n", ["a few million tokens", "a tenth"]),
        (
            "Two threads.\n\n```{code-cell} ipython3\nthreads = 2\n```\n",
            ["Two threads"],
        ),  # words are never a code literal
        ("BERT trained for a million steps {footcite:p}`devlin2019bert`.\n", []),
        (
            "One token at a time, a third split, thirty-seven layers, the 1990s.\n",
            [],
        ),  # a unit, an ordinal, part of a number, a decade
        ("```{code-cell} ipython3\nprint(f'{accuracy:.1%} is 61.5%')\n```\n", []),  # inside code: printed by the run
    ],
)
def test_the_scan_flags_typed_results_and_nothing_else(text, expected):
    assert [number for number, _ in typed_numbers(text)] == expected


def test_exercises_are_named_by_numref_so_the_prose_and_the_site_agree():
    # The site numbers exercises across the whole book (sphinx-exercise), so an "exercise 2" typed in a chapter
    # names another chapter's exercise; {numref}`exercise %s <ex-label>` prints the number the site shows.
    typed = [
        f"{path.stem}: {match.group(0)}"
        for path in sorted(BOOK.glob("*.md"))
        for match in re.finditer(r"\bexercises? \d+", prose(path.read_text()), re.IGNORECASE)
    ]
    assert typed == []
