"""The downloaded notebook, readable in Jupyter: plain Markdown for MyST's directives and roles, no solutions, each
stream once per cell, and no `needs_background` tag (tools/course_site/notebooks.py offers it for download).
"""

import ast
import codecs
import functools
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import nbformat

from exercises import solution_lines, student_version

# myst-nb's executed notebook is the page's source: its Markdown is
# MyST (directives and roles that only Sphinx renders), its solutions sit in the open, and its outputs carry two
# traces of the build: myst-nb's merge of each cell's streams (`nb_merge_streams`) rewrites the cell's first stream
# output in place and leaves the later ones behind, so their text shows twice; and matplotlib-inline tags each of the
# course's figures (transparent, with mid-tone tick labels it judges light) `needs_background: dark`, so JupyterLab
# puts them on a dark panel, while the site shows them on its page colour.
#
# Solutions come out, as in the student edition (tools/exercises.py): the download menu is where a learner gets a
# chapter to work on, and a solution left in the notebook, even folded, runs with "Run all", defines the function the
# exercise asks for and makes its check pass. Each exercise says its solution is on the site, a click away.

DIRECTIVE = re.compile(r"^[ \t]*(?P<fence>`{3,}|:{3,})\{(?P<name>[\w-]+)\}[ \t]*(?P<argument>.*)$")
OPTION = re.compile(r"^[ \t]*:(?P<key>[\w-]+):[ \t]*(?P<value>.*)$")
ROLE = re.compile(r"\{(?P<name>[\w:-]+)\}`(?P<text>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=[ \t]*\n(?:\s*\n)*#+[ \t]+(?P<heading>.+)$", re.MULTILINE)
ADMONITIONS = {"attention", "caution", "danger", "error", "hint", "important", "note", "seealso", "tip", "warning"}
SOLUTION_NOTE = "*Solution: on this page of the course site, under the exercise.*"
BOOK = Path(__file__).resolve().parents[2] / "book"  # where a listing's relative path starts
SOLUTION_LINE = 40  # characters: a shorter line (`return x`) may be anyone's code


class Work(NamedTuple):
    """A bibliography entry, e.g. Work(authors="Vaswani et al.", year="2017", entry="Ashish Vaswani, ... (2017).")."""

    authors: str  # as a citation names them: "Maas", "Ba and Kiros", "Vaswani et al."
    year: str
    entry: str  # the reference-list line


@dataclass
class Page:
    """What a notebook's MyST roles refer to, gathered from the notebook (and the site) before it is rewritten."""

    titles: dict[str, str]  # {page name such as "bert": its title}, for {doc}
    works: dict[str, Work]  # {bibliography key: work}, for {footcite} and {footbibliography}
    cited: list[str] = field(default_factory=list)  # the keys the notebook cites, in order of first citation
    exercises: dict[str, str] = field(default_factory=dict)  # {exercise label: title}, for {numref}
    solved: set[str] = field(default_factory=set)  # the labels of exercises with a solution on the site
    sections: dict[str, str] = field(default_factory=dict)  # {target label: the heading under it}, for {ref}
    glued: dict[str, str] = field(default_factory=dict)  # {glue key: the value's text/plain}, for {glue}
    # the solutions' lines long enough to identify them, whitespace collapsed: a listing holding one stays a pointer
    solution_lines: set[str] = field(default_factory=set)


def readable_notebook(notebook, titles: dict[str, str] | None = None, works: dict[str, Work] | None = None,
                      glued: dict[str, str] | None = None):
    """A copy of an executed chapter notebook for readers: plain Markdown, no solutions, each stream once per cell and
    no `needs_background`. `titles` names the site's pages, `works` the bibliography and `glued` the values the page
    glued into its prose (myst-nb keeps them beside the notebook, not in it); without them a reference reads as its
    name or key."""
    page = Page(titles or {}, works or {}, glued=glued or {})
    page.solution_lines = {line for line in solution_lines(notebook) if len(line) >= SOLUTION_LINE}
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            _gather(cell.source, page)
    counts = {cell.get("id"): cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code"}
    reader = student_version(notebook, keep_outputs=True)
    for cell in reader.cells:
        if cell.cell_type == "markdown":
            cell.source = plain_markdown(cell.source, page)
        elif cell.cell_type == "code":
            # A stub keeps the count of the solution it replaces and a check the count of its run, so the notebook
            # still reads as the executed one; their outputs, the solution's, are gone.
            cell.execution_count = counts.get(cell.get("id"), cell.execution_count)
            cell.outputs = merged_streams(cell.outputs)
            for output in cell.outputs:
                output.get("metadata", {}).pop("needs_background", None)
    return reader


def _gather(text: str, page: Page) -> None:
    """Record in `page` what one Markdown cell defines (exercises, solutions, targets) and cites."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        directive = DIRECTIVE.match(line)
        if directive and directive["name"] == "exercise":
            options = itertools.takewhile(OPTION.match, lines[index + 1 :])
            label = next((option.split(":", 2)[2].strip() for option in options if ":label:" in option), None)
            page.exercises[label] = directive["argument"].strip()
        elif directive and directive["name"] in ("solution", "solution-start"):
            page.solved.add(directive["argument"].strip())
    page.sections |= {match["label"]: match["heading"].strip() for match in TARGET.finditer(text)}
    for role in ROLE.finditer(text):
        if role["name"].split(":")[0] in ("footcite", "cite"):
            page.cited += [key for key in dict.fromkeys(_keys(role["text"])) if key not in page.cited]


def plain_markdown(text: str, page: Page) -> str:
    """MyST Markdown as plain Markdown: directives as Markdown blocks, roles as their text, `(label)=` targets gone.

    >>> plain_markdown("```{admonition} Aims\\n:class: tip\\nRead {doc}`bert`.\\n```", Page({"bert": "BERT"}, {}))
    '> **Aims**\\n>\\n> Read BERT.'
    """
    text = re.sub(r"^\([^()\s]+\)=[ \t]*(\n|$)", "", text, flags=re.MULTILINE)
    return ROLE.sub(lambda role: _role(role["name"], role["text"], page), _blocks(text, page))


def _blocks(text: str, page: Page) -> str:
    """Each directive in `text` rewritten by _directive; a directive closes on a fence of its own character at least
    as long as the one that opened it (MyST's rule), so a shorter code fence inside it stays in its body."""
    lines, out, index = text.splitlines(), [], 0
    while index < len(lines):
        directive = DIRECTIVE.match(lines[index])
        if directive is None:
            out.append(lines[index])
            index += 1
            continue
        fence, end = directive["fence"], index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body, options = lines[index + 1 : end], {}
        while body and OPTION.match(body[0]):
            option = OPTION.match(body.pop(0))
            options[option["key"]] = option["value"].strip()
        body_text = _blocks("\n".join(body), page).strip("\n")
        out.append(_directive(directive["name"], directive["argument"].strip(), options, body_text, page))
        index = end + 1
    return "\n".join(out)


def _closes(line: str, fence: str) -> bool:
    return set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence)


def _directive(name: str, argument: str, options: dict[str, str], body: str, page: Page) -> str:
    if name == "exercise":
        heading = f"**Exercise: {argument}**" if argument else "**Exercise**"
        solved = options.get("label") in page.solved
        return "\n\n".join(part for part in (heading, body, SOLUTION_NOTE if solved else "") if part)
    if name == "literalinclude":
        return _listing(argument, options.get("pyobject"), page.solution_lines)
    if name == "footbibliography":
        return "\n".join(f"- {_reference(key, page)}" for key in page.cited)
    title = argument or (name.capitalize() if name in ADMONITIONS else name)  # any other directive: a titled quote
    quoted = [f"> {line}" if line.strip() else ">" for line in body.splitlines()]
    return "\n".join([f"> **{title}**", *([">", *quoted] if quoted else [])])


def _listing(argument: str, shown: str | None, solution_lines: set[str] = frozenset()) -> str:
    """A `{literalinclude}` as the page shows it: the file's source, or the `:pyobject:`'s (a dotted name such as
    `MultiHeadAttention.forward`, decorators included), in a Python block under a line naming where it lives. A
    listing that holds a line of an exercise's solution stays a pointer to the site, as the solution does."""
    path = argument.split("lib/", 1)[-1]  # ../lib/minformers/attention.py -> minformers/attention.py
    source = (BOOK / argument).resolve().read_text()
    if shown is not None:
        source = _object_source(source, shown, path)
    where = f"`{path}`" if shown is None else f"`{shown}`, from `{path}`"
    collapsed = " ".join(source.split())
    if any(line in collapsed for line in solution_lines):
        return f"*The course site lists {where} here: it holds an exercise's answer, which this notebook leaves out.*"
    return f"*From the course library, {where}:*\n\n```python\n{source.rstrip()}\n```"


def _object_source(source: str, dotted: str, path: str) -> str:
    body, node = ast.parse(source).body, None
    for part in dotted.split("."):
        node = next((node for node in body if getattr(node, "name", None) == part), None)
        if node is None:
            raise ValueError(f"{path} has no {dotted!r} for a listing to show")
        body = getattr(node, "body", [])
    lines = source.splitlines()[node.lineno - 1 - len(node.decorator_list) : node.end_lineno]
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines)


def _keys(text: str) -> list[str]:
    return [key.strip() for key in text.split(",") if key.strip()]


def _reference(key: str, page: Page) -> str:
    work = page.works.get(key)
    return f"`{key}`" if work is None else work.entry


def _role(name: str, text: str, page: Page) -> str:
    """One role's readable text: {doc}`bert` -> the page's title, {term}`mask <attention mask>` -> "mask",
    {footcite:p}`a,b` -> "(A et al., 2017; B, 2019)", {footcite:t}`a` -> "A et al. (2017)"."""
    titled = re.fullmatch(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", text, re.DOTALL)
    title, target = (titled["title"], titled["target"].strip()) if titled else (None, text.strip())
    kind, _, form = name.partition(":")
    if kind in ("footcite", "cite"):
        works = {key: page.works.get(key) for key in _keys(target)}
        if form == "t":
            return ", ".join(f"{work.authors} ({work.year})" if work else key for key, work in works.items())
        return "(" + "; ".join(f"{work.authors}, {work.year}" if work else key for key, work in works.items()) + ")"
    if kind == "numref" and target in page.exercises:
        named = f'"{page.exercises[target]}"'
        return title.replace("%s", named).replace("{number}", named) if title else f"Exercise {named}"
    if title:
        return title
    if kind == "doc":
        return page.titles.get(target.rstrip("/").split("/")[-1], target)
    if kind == "ref":
        return page.sections.get(target, target)
    if kind == "math":
        return f"${target}$"
    if kind == "glue":
        return _pasted(target, page)
    return target  # {term} and the rest: the text itself


def _pasted(text: str, page: Page) -> str:
    """A {glue} role's value as the site shows it: "gap:.1%" with gap glued as 0.0312 -> "3.1%"."""
    key, _, spec = text.partition(":")
    if key not in page.glued:
        return key
    text = page.glued[key]
    wrapped = re.fullmatch(r"(?:np|numpy)\.\w+\((?P<inner>.*)\)", text)  # a NumPy scalar: np.float64(0.5)
    try:
        value = ast.literal_eval(wrapped["inner"] if wrapped else text)
        return format(value, spec) if spec else str(value)
    except (ValueError, SyntaxError, TypeError):
        return text  # not a literal: as its text shows it


def merged_streams(outputs: list) -> list:
    """A cell's outputs with one stream output per stream name, where the first of that name was, holding its text once.

    myst-nb has already merged each name's text into its first output and left the later ones behind (they are the
    merged text's tail: dropped); in a notebook it has not merged, the later texts are appended. A cell whose own
    output repeats the text that follows it would look merged; no chapter prints that way.
    """
    merged, first, later = [], {}, {}
    for output in outputs:
        if output.output_type != "stream":
            merged.append(output)
        elif output.name in first:
            later[output.name].append(output.text)
        else:
            first[output.name], later[output.name] = output, []
            merged.append(output)
    for name, texts in later.items():
        tail = "".join(text.rstrip() + "\n" for text in texts if text.rstrip())  # how myst-nb appends them
        if not first[name].text.endswith(tail):
            first[name].text += "".join(texts)
    return merged


@functools.cache
def read_works(*bibfiles: Path) -> dict[str, Work]:
    """{key: Work} for each entry of the BibTeX files, read with pybtex (sphinxcontrib-bibtex's parser)."""
    import latexcodec  # noqa: F401  (pybtex's dependency; registers the "ulatex" codec: {\\L}ukasz -> {Ł}ukasz)
    from pybtex.database import parse_file

    def plain(text: str) -> str:
        return codecs.decode(text, "ulatex").replace("{", "").replace("}", "")

    works = {}
    for bibfile in bibfiles:
        for key, entry in parse_file(bibfile).entries.items():
            people = entry.persons.get("author", [])
            names = [plain(" ".join(person.first_names + person.middle_names + person.prelast_names
                                    + person.last_names)) for person in people]
            last = [plain(" ".join(person.prelast_names + person.last_names)) for person in people]
            authors = (last[0] if len(last) == 1 else " and ".join(last) if len(last) == 2
                       else f"{last[0]} et al." if last else key)
            year, title = entry.fields.get("year", "n.d."), plain(entry.fields.get("title", key))
            venue = plain(entry.fields.get("journal") or entry.fields.get("booktitle") or entry.fields.get(
                "institution") or "")
            linked = f"[{title}]({entry.fields['url']})" if "url" in entry.fields else title
            who = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names) or authors
            works[key] = Work(authors, year, f"{who} ({year}). {linked}." + (f" *{venue}*." if venue else ""))
    return works


def readable_download(app, pagename, templatename, context, doctree):
    """Rewrite the downloadable notebook with readable_notebook. Runs after sphinx-book-theme (501), which copies
    the notebook again when launch buttons are configured."""
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    if not target.exists():
        return
    titles = {docname.split("/")[-1]: title.astext() for docname, title in app.env.titles.items()}
    bibfiles = tuple(Path(app.srcdir) / name for name in getattr(app.config, "bibtex_bibfiles", None) or [])
    glue_file = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.glue.json"
    glued = json.loads(glue_file.read_text()) if glue_file.exists() else {}
    glued = {key: output["data"]["text/plain"] for key, output in glued.items() if "text/plain" in output["data"]}
    notebook = readable_notebook(nbformat.read(target, as_version=4), titles, read_works(*bibfiles), glued)
    nbformat.write(notebook, target)
