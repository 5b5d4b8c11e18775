"""The notebook a reader downloads from the site (tools/course_site/readable_notebook.py): plain Markdown
in place of MyST, no solutions, each stream once per cell, no `needs_background`.

The unit tests rewrite small hand-written notebooks. The `book` test reads every downloaded notebook of the built site,
`_build/html` unless MINFORMERS_SITE names another built site (as tests/test_browser.py does).
"""

import copy
import doctest
import os
import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from docutils import nodes
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_site import readable_notebook as readable
from course_site.readable_notebook import Page, Work, merged_streams, plain_markdown, read_works, readable_notebook
from exercises import is_solution, solution_lines, split_markdown

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("MINFORMERS_SITE", ROOT / "_build" / "html")).resolve()

# MyST that Jupyter shows as raw text: a directive's fence, a role, a directive's option, a `(label)=` target.
RAW_MYST = re.compile(r"(`{3,}|:{3,})\{[\w-]+\}|\{[\w:-]+\}`|^[ \t]*:(class|label|pyobject|lines):|^\([^()\s]+\)=",
                      re.MULTILINE)

VASWANI = Work("Vaswani et al.", "2017", "Ashish Vaswani and others (2017). Attention Is All You Need.")
PAGE = Page(titles={"bert": "BERT, the encoder"}, works={"vaswani2017attention": VASWANI})


def markdown(text: str, page: Page = PAGE) -> str:
    return plain_markdown(text, copy.deepcopy(page))


def stream(name: str, text: str):
    return new_output("stream", name=name, text=text)


def test_docstring_examples_hold():
    result = doctest.testmod(readable)
    assert result.attempted > 0 and result.failed == 0


def test_an_exercise_becomes_a_bold_heading_over_its_body():
    text = "## Exercises\n\n```{exercise} Scaled scores\n:label: ex-scaling\n\nMeasure $q \\cdot k$.\n```"
    assert markdown(text) == "## Exercises\n\n**Exercise: Scaled scores**\n\nMeasure $q \\cdot k$."


def test_an_exercise_with_a_solution_says_where_the_solution_is():
    page = Page({}, {}, solved={"ex-scaling"})
    text = "```{exercise} Scaled scores\n:label: ex-scaling\nMeasure it.\n```"
    assert markdown(text, page) == f"**Exercise: Scaled scores**\n\nMeasure it.\n\n{readable.SOLUTION_NOTE}"


def test_an_admonition_becomes_a_blockquote_under_its_title():
    text = "```{admonition} Learning objectives\n:class: tip\nYou can:\n- write $\\sqrt{d_k}$;\n\nand more\n```"
    assert markdown(text) == "> **Learning objectives**\n>\n> You can:\n> - write $\\sqrt{d_k}$;\n>\n> and more"


def test_a_named_admonition_is_titled_by_its_kind():
    assert markdown(":::{note}\nMind the mask.\n:::") == "> **Note**\n>\n> Mind the mask."


def test_a_listing_becomes_the_code_the_page_shows():
    """A learner in Jupyter reads the algorithm the page is about, not a pointer to the site: the object's source
    (a method dedented, decorators kept), or the whole file, in a Python block under a line naming where it lives."""
    text = "Its code:\n\n```{literalinclude} ../lib/minformers/attention.py\n:pyobject: MultiHeadAttention.forward\n```"
    shown = markdown(text)
    assert shown.startswith("Its code:\n\n*From the course library, `MultiHeadAttention.forward`, from "
                            "`minformers/attention.py`:*\n\n```python\ndef forward(")
    assert shown.endswith("\n```") and RAW_MYST.search(shown) is None
    source = (ROOT / "lib" / "minformers" / "attention.py").read_text()
    body = shown.split("```python\n", 1)[1].removesuffix("\n```")
    assert all(("    " + line if line else line) in source for line in body.splitlines())
    whole = markdown("```{literalinclude} ../lib/minformers/masks.py\n```")
    assert whole.split("```python\n", 1)[1] == (ROOT / "lib" / "minformers" / "masks.py").read_text().rstrip() + "\n```"


def test_a_listing_of_a_missing_object_names_it():
    with pytest.raises(ValueError, match="no 'MultiHeadAttention.gone'"):
        markdown("```{literalinclude} ../lib/minformers/attention.py\n:pyobject: MultiHeadAttention.gone\n```")


def test_a_shorter_code_fence_inside_a_directive_stays_code():
    text = "````{admonition} Try it\n```python\nprint(1)\n```\n````"
    assert markdown(text) == "> **Try it**\n>\n> ```python\n> print(1)\n> ```"


def test_a_plain_code_fence_and_math_are_left_alone():
    text = "```python\nx = {1: 2}\n```\n\n$$\n\\frac{1}{2}\n$$"
    assert markdown(text) == text


def test_citations_read_as_author_and_year_and_unknown_keys_as_themselves():
    assert markdown("attention {footcite:p}`vaswani2017attention`") == "attention (Vaswani et al., 2017)"
    assert markdown("{footcite:t}`vaswani2017attention` show") == "Vaswani et al. (2017) show"
    assert markdown("{footcite:p}`vaswani2017attention,devlin2019bert`") == "(Vaswani et al., 2017; devlin2019bert)"
    assert markdown("{cite}`devlin2019bert`") == "(devlin2019bert)"


def test_the_bibliography_lists_the_works_the_notebook_cites_in_order():
    cells = ["{footcite:p}`devlin2019bert` and {footcite:t}`vaswani2017attention`, again {footcite:p}`devlin2019bert`",
             "## References\n\n```{footbibliography}\n```"]
    reader = readable_notebook(new_notebook(cells=[new_markdown_cell(cell) for cell in cells]), works=PAGE.works)
    assert reader.cells[1].source == f"## References\n\n- `devlin2019bert`\n- {VASWANI.entry}"


def test_page_and_glossary_roles_read_as_their_text():
    assert markdown("see {doc}`bert`, {doc}`the page <bert>` and {doc}`gpt`") == (
        "see BERT, the encoder, the page and gpt")
    assert markdown("a {term}`mask <attention mask>` is a {term}`causal mask`") == "a mask is a causal mask"
    assert markdown("{glue:text}`loss` and {math}`x^2`") == "loss and $x^2$"


def test_glued_values_read_as_the_site_shows_them():
    glued = Page(titles={}, works={}, glued={"gap": "0.03125", "lora": "'not shown at this scale'"})
    assert markdown("gap {glue:text}`gap:.1%`, {glue}`gap`; {glue:text}`lora`", glued) == (
        "gap 3.1%, 0.03125; not shown at this scale")
    numpy = Page(titles={}, works={}, glued={"x": "np.float64(0.25)", "shape": "torch.Size([2, 3])"})
    assert markdown("{glue:text}`x:.0%` and {glue:text}`shape`", numpy) == "25% and torch.Size([2, 3])"


def test_references_to_exercises_and_sections_read_as_their_titles():
    cells = ["(nsp-section)=\n## NSP on a trained body\n\nText.",
             "```{exercise} Scaled scores\n:class: hard\n:label: ex-scaling\nMeasure it.\n```",
             "({ref}`nsp-section`; {numref}`exercise %s <ex-scaling>`; {numref}`ex-scaling`; {numref}`fig-1`)"]
    reader = readable_notebook(new_notebook(cells=[new_markdown_cell(cell) for cell in cells]))
    assert reader.cells[0].source == "## NSP on a trained body\n\nText."
    assert reader.cells[2].source == ('(NSP on a trained body; exercise "Scaled scores"; Exercise "Scaled scores"; '
                                      "fig-1)")


def exercise_notebook() -> nbformat.NotebookNode:
    """An exercise with a gated, stubbed solution and a check, then a written exercise with a solution block."""
    stub = "def my_f(x): raise NotImplementedError('double')"
    solution = new_code_cell("def my_f(x):\n    return 2 * x", execution_count=3,
                             metadata={"tags": ["solution"], "stub": stub})
    return new_notebook(cells=[
        new_markdown_cell("```{exercise} Double it\n:label: ex-double\nWrite `my_f`.\n```\n\n"
                          "```{solution-start} ex-double\n:class: dropdown\n```\n\nMultiply by two, a secret."),
        solution,
        new_code_cell("helper = my_f(1)", execution_count=4, outputs=[stream("stdout", "2\n")]),
        new_markdown_cell("```{solution-end}\n```"),
        new_code_cell("checks.check_double(my_f)", execution_count=5, outputs=[stream("stdout", "ok: 12 cases\n")]),
        new_markdown_cell("```{exercise} Why two?\n:label: ex-why\nSay why.\n```\n\n"
                          "```{solution} ex-why\n:class: dropdown\nBecause a secret reason.\n```"),
    ])


def test_solutions_are_removed_and_each_exercise_says_where_its_solution_is():
    reader = readable_notebook(exercise_notebook())
    sources = [cell.source for cell in reader.cells]
    assert sources == [
        f"**Exercise: Double it**\n\nWrite `my_f`.\n\n{readable.SOLUTION_NOTE}",
        "def my_f(x): raise NotImplementedError('double')",  # the stub, as in the student edition
        "checks.check_double(my_f)",
        f"**Exercise: Why two?**\n\nSay why.\n\n{readable.SOLUTION_NOTE}",
    ]
    stub, check = reader.cells[1], reader.cells[2]
    assert stub.outputs == [] and check.outputs == []  # the check's "ok" was the solution's
    assert "solution" not in stub.metadata.get("tags", []) and "stub" not in stub.metadata
    assert (stub.execution_count, check.execution_count) == (3, 5)  # still the executed notebook's counts
    assert not any(secret in "\n".join(sources) for secret in ("secret", "return 2 * x", "helper"))


def test_the_input_notebook_is_left_unchanged():
    notebook = exercise_notebook()
    before = copy.deepcopy(notebook)
    readable_notebook(notebook)
    assert notebook == before


def test_streams_merged_by_myst_nb_keep_only_the_merged_output():
    """myst-nb folds each stream's later outputs into its first and leaves them in the notebook: shown twice."""
    outputs = [stream("stdout", "a\nb\nc\n"), stream("stderr", "step 1\nstep 2\n"), new_output("execute_result",
               data={"text/plain": "42"}, execution_count=1), stream("stdout", "b\n"), stream("stderr", "step 2\n"),
               stream("stdout", "c")]
    merged = merged_streams(outputs)
    assert [(output.output_type, output.get("text")) for output in merged] == [
        ("stream", "a\nb\nc\n"), ("stream", "step 1\nstep 2\n"), ("execute_result", None)]


def test_streams_not_yet_merged_are_joined_in_the_order_they_came():
    outputs = [stream("stdout", "loss 1.0\n"), stream("stderr", "warning\n"), stream("stdout", "loss 0.5\n"),
               stream("stdout", "done\n")]
    assert [(output.name, output.text) for output in merged_streams(outputs)] == [
        ("stdout", "loss 1.0\nloss 0.5\ndone\n"), ("stderr", "warning\n")]


def test_figures_lose_needs_background_and_keep_their_other_metadata():
    figure = new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"},
                        metadata={"needs_background": "dark", "image/png": {"width": 640}})
    reader = readable_notebook(new_notebook(cells=[new_code_cell("plot()", execution_count=1, outputs=[figure])]))
    assert reader.cells[0].outputs[0].metadata == {"image/png": {"width": 640}}
    nbformat.validate(reader)


def test_bibliography_entries_are_read_as_plain_text(tmp_path):
    bib = tmp_path / "references.bib"
    bib.write_text("@inproceedings{vaswani2017attention,\n  author = {Vaswani, Ashish and Kaiser, {\\L}ukasz and "
                   "Polosukhin, Illia},\n  title = {Attention Is All You Need},\n  booktitle = {{NeurIPS}},\n"
                   "  year = {2017},\n  url = {https://arxiv.org/abs/1706.03762}\n}\n"
                   "@article{ba2016layer,\n  author = {Ba, Jimmy Lei and Kiros, Jamie Ryan},\n"
                   "  title = {Layer Normalization in {RNNs}},\n  journal = {arXiv},\n  year = {2016}\n}\n")
    works = read_works(bib)
    assert works["vaswani2017attention"] == Work(
        "Vaswani et al.", "2017", "Ashish Vaswani, Łukasz Kaiser and Illia Polosukhin (2017). "
        "[Attention Is All You Need](https://arxiv.org/abs/1706.03762). *NeurIPS*.")
    entry = "Jimmy Lei Ba and Jamie Ryan Kiros (2016). Layer Normalization in RNNs. *arXiv*."
    assert works["ba2016layer"] == Work("Ba and Kiros", "2016", entry)


def downloaded_notebooks() -> list[Path]:
    return sorted((SITE / "_sources").rglob("*.ipynb"))


def solutions(executed: Path) -> tuple[set[str], set[str]]:
    """A page's solutions in its executed notebook, which the build ran solutions and all: (the source of each
    solution code cell, each line of solution prose long enough to identify it). Both empty without the notebook."""
    if not executed.exists():
        return set(), set()
    code, state = set(), "outside"
    notebook = nbformat.read(executed, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            state = split_markdown(cell.source, state)[2]
        elif is_solution(cell) or (cell.cell_type == "code" and state == "gated"):
            code.add(cell.source.strip())
    return code, {line for line in solution_lines(notebook) if len(line) >= 40}


@pytest.mark.book
def test_every_downloaded_notebook_is_plain_markdown_without_solutions_with_clean_outputs():
    paths = downloaded_notebooks()
    if not paths:
        pytest.fail(f"no notebooks under {SITE / '_sources'}: run `make book` first (or set MINFORMERS_SITE)")
    problems = []
    for path in paths:
        name = path.relative_to(SITE / "_sources")
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code, prose = solutions(SITE.parent / "jupyter_execute" / name)
        text = " ".join(" ".join(cell.source.split()) for cell in notebook.cells if cell.cell_type == "markdown")
        problems += [f"{name}: raw MyST {match.group(0)!r}" for cell in notebook.cells if cell.cell_type == "markdown"
                     for match in RAW_MYST.finditer(cell.source)]
        problems += [f"{name}: solution prose {line[:50]!r}" for line in prose if line in text]
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            if is_solution(cell) or cell.source.strip() in code:
                problems.append(f"{name}: solution code {cell.source[:50]!r}")
            names = [output.name for output in cell.outputs if output.output_type == "stream"]
            if len(names) != len(set(names)):
                problems.append(f"{name}: streams {names} in cell {cell.get('id')}")
            problems += [f"{name}: needs_background in cell {cell.get('id')}" for output in cell.outputs
                         if "needs_background" in output.get("metadata", {})]
    assert not problems, f"{len(problems)} problems in {len(paths)} notebooks, such as {problems[:10]}"


def test_the_build_rewrites_the_notebook_in_the_download_menu(tmp_path):
    """readable_download, as Sphinx calls it for a page: the notebook under _sources/ is rewritten in place, with the
    site's page titles and the bibliography named in the config."""
    (tmp_path / "references.bib").write_text("@article{ba2016layer,\n  author = {Ba, Jimmy Lei},\n"
                                             "  title = {Layer Normalization},\n  year = {2016}\n}\n")
    target = tmp_path / "html" / "_sources" / "book" / "gpt.ipynb"
    target.parent.mkdir(parents=True)
    cells = [new_markdown_cell("As {doc}`bert` does {footcite:p}`ba2016layer`."), new_code_cell(
        "print(1)", execution_count=1, outputs=[stream("stdout", "1\n2\n"), stream("stdout", "2\n")])]
    nbformat.write(new_notebook(cells=cells), target)
    app = SimpleNamespace(outdir=str(tmp_path / "html"), srcdir=str(tmp_path),
                          config=SimpleNamespace(bibtex_bibfiles=["references.bib"]),
                          env=SimpleNamespace(titles={"book/bert": nodes.title(text="BERT, the encoder")}))
    readable.readable_download(app, "book/gpt", "page.html", {}, None)
    notebook = nbformat.read(target, as_version=4)
    assert notebook.cells[0].source == "As BERT, the encoder does (Ba, 2016)."
    assert [output.text for output in notebook.cells[1].outputs] == ["1\n2\n"]


def test_a_listing_that_holds_an_answer_stays_a_pointer():
    """The notebook leaves solutions out; a listed lib object with a solution's line in it would put one back."""
    answer = "return (positions >= prompt_lengths[:, None]) & (positions < lengths[:, None])"
    text = "```{literalinclude} ../lib/minformers/sft.py\n:pyobject: response_mask\n```"
    page = copy.deepcopy(PAGE)
    page.solution_lines = {answer}
    shown = plain_markdown(text, page)
    assert "```python" not in shown and "an exercise's answer" in shown
