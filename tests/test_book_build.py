"""The build driver fails the build on a failing cell and on a page over its time budget.

Each test builds a throwaway book with the course's real _config.yml, so these prove the settings work,
not just the driver's arithmetic.
"""

import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest
import yaml

from book_helpers import build, page, write_book
from minformers.support.checkpoints import lib_source_digest

pytestmark = pytest.mark.slow


def test_a_good_book_builds_and_reports_its_timings_in_seconds_and_reference_seconds(tmp_path):
    write_book(tmp_path, {"index": page("print(6 * 7)")})
    result = build(tmp_path, factor=None)  # the clock measured, as in a real build
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    timings = json.loads((tmp_path / "_build" / "timings.json").read_text())
    factor = timings["clock"]["factor"]
    # calibrated before and after the build, 3 repeats each; the factor is the median of the 6
    assert factor > 0 and len(timings["clock"]["repeats"]) == 6
    assert min(timings["clock"]["before"], timings["clock"]["after"]) <= factor
    record = timings["pages"]["index"]
    assert record["succeeded"] is True and record["seconds"] > 0
    assert record["reference_seconds"] == pytest.approx(record["seconds"] / factor)
    assert f"the build's machine factor is {factor:.2f}" in result.stdout
    assert "The site is at" in result.stdout
    assert (tmp_path / "_build" / "html" / "_sources" / "index.ipynb").exists()


def test_a_failing_cell_fails_the_build(tmp_path):
    write_book(tmp_path, {"index": page("print('fine')", "raise RuntimeError('deliberate failure')")})
    result = build(tmp_path)
    assert result.returncode != 0
    assert "deliberate failure" in result.stdout + result.stderr


def test_a_page_over_its_budget_in_reference_seconds_fails_the_build(tmp_path):
    """A factor of 0.05 says this machine is twenty times faster than the reference: a page of 4 s here (a 4 s
    sleep and a kernel's start) would take well over a minute there, over the 60 reference-seconds of an ordinary
    page but within the 150 of a page that trains a shared model. A page that only prints stays within 60."""
    nap = "import time\ntime.sleep(4)"
    shared = page(nap, front_matter="trains_shared_model: a test model\n")
    write_book(tmp_path, {"index": page("print('quick')"), "shared": shared, "slow": page(nap)})
    result = build(tmp_path, factor=0.05)
    assert result.returncode != 0
    assert re.search(r"slow: took \d+\.\d reference-seconds \(\d\.\d s\), over its budget of 60", result.stderr)
    assert "shared:" not in result.stderr and "index:" not in result.stderr
    assert re.search(r"\bshared\s+\d\.\d\s+\d+\.\d\s+150\s+ok", result.stdout)
    assert "OVER BUDGET" in result.stdout


def test_a_page_cannot_give_itself_a_bigger_budget(tmp_path):
    greedy = page("print('hi')", front_matter="mystnb:\n  execution_timeout: 900\n")
    write_book(tmp_path, {"index": greedy})
    result = build(tmp_path)
    assert result.returncode != 0
    assert "a page cannot set its own execution_timeout" in result.stderr


@pytest.mark.parametrize("repository", ["", "https://github.com/example-org/course"])
def test_launch_buttons_follow_the_repository_url(tmp_path, repository):
    """One setting, `repository.url`, turns the launch buttons on; empty, they are absent. Both builds pass."""
    write_book(tmp_path, {"index": page("print(6 * 7)")})
    config = yaml.safe_load((tmp_path / "_config.yml").read_text())
    assert config["repository"]["url"] == "", "the course ships with no repository URL, so no launch buttons"
    config["repository"]["url"] = repository
    config["launch_buttons"]["jupyterhub_url"] = "https://hub.example.edu"  # an institution's hub, for the test
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    result = build(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    html = (tmp_path / "_build" / "html" / "index.html").read_text()
    assert "_sources/index.ipynb" in html  # the executed notebook is offered either way
    links = [
        "https://mybinder.org/v2/gh/example-org/course/main?urlpath=lab/tree/index.md",
        # Colab opens .ipynb only: the page's executed notebook, on the branch the site is published to
        "https://colab.research.google.com/github/example-org/course/blob/gh-pages/_sources/index.ipynb",
        "https://hub.example.edu/hub/user-redirect/git-pull?repo=https%3A//github.com/example-org/course",
    ]
    notebook = nbformat.read(tmp_path / "_build" / "html" / "_sources" / "index.ipynb", as_version=4)
    nbformat.validate(notebook)
    install = notebook.cells[0]  # either way the first cell installs the course library (run: tests/test_launch.py)
    executed = next(cell for cell in notebook.cells[1:] if cell.cell_type == "code")
    assert executed.outputs and "42" in executed.outputs[0]["text"]
    wheel = next((tmp_path / "_build" / "html" / "course").glob("minformers-*.whl")).name  # the site serves it
    assert wheel in install.source
    if repository:
        for link in links:
            assert link in html, link
        # Colab has only the notebook: the cell fetches the files from the published site's branch
        assert "https://raw.githubusercontent.com/example-org/course/gh-pages/course/" in install.source
    else:
        assert "site = None" in install.source  # no address known: the files are looked for beside the notebook
        assert "launch-buttons" not in html and "mybinder" not in html and "colab" not in html


def test_every_exercise_and_solution_has_its_own_id(tmp_path):
    """sphinx-exercise gives every exercise's (and solution's) content one shared id; tools/course_site numbers
    them (chapter_page.py)."""
    exercises = "".join(f"""
```{{exercise}} Exercise {n}
:label: ex-{n}
Print {n}.
```

```{{solution-start}} ex-{n}
:class: dropdown
```

```{{code-cell}} ipython3
print({n})
```

```{{solution-end}}
```
""" for n in (1, 2))
    write_book(tmp_path, {"index": page("print(0)") + exercises})
    result = build(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ids = re.findall(r'\bid="([^"]+)"', (tmp_path / "_build" / "html" / "index.html").read_text())
    assert {"exercise-content-1", "exercise-content-2", "solution-content-1", "solution-content-2"} <= set(ids)
    assert len(ids) == len(set(ids)), sorted(name for name in set(ids) if ids.count(name) > 1)


def counting_page(counter: Path, code: str = "print('hello')") -> str:
    """A page that appends a line to `counter` each time it is executed, so a test can count its executions."""
    return page(f"with open({str(counter)!r}, 'a') as file:\n    file.write('run\\n')\n{code}")


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_make_book_executes_again_only_the_pages_whose_code_changed(tmp_path):
    book, counters = tmp_path / "book", {name: tmp_path / f"{name}.count" for name in ("index", "a", "b")}
    book.mkdir()
    write_book(book, {name: counting_page(counter) for name, counter in counters.items()})
    for _ in range(2):
        result = build(book, "--reuse")
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert {name: runs(counter) for name, counter in counters.items()} == {"index": 1, "a": 1, "b": 1}
    (book / "b.md").write_text(counting_page(counters["b"], "print('changed')"))
    (book / "a.md").write_text(counting_page(counters["a"]) + "\nProse changed, code not.\n")
    assert build(book, "--reuse").returncode == 0
    assert {name: runs(counter) for name, counter in counters.items()} == {"index": 1, "a": 1, "b": 2}
    assert "changed" in (book / "_build" / "html" / "b.html").read_text()
    assert "Prose changed" in (book / "_build" / "html" / "a.html").read_text()
    # The cache is named after the lib's source, so that any change to the lib executes every page again.
    assert [path.name for path in (book / "_build" / ".jupyter_cache").iterdir()] == [f"lib-{lib_source_digest()[:16]}"]
    # make test's build (no option) executes every page, whatever the cache holds.
    assert build(book).returncode == 0
    assert {name: runs(counter) for name, counter in counters.items()} == {"index": 2, "a": 2, "b": 3}


def test_make_page_executes_one_page_and_reports_it_against_its_budget(tmp_path):
    book, counters = tmp_path / "book", {name: tmp_path / f"{name}.count" for name in ("index", "a", "b")}
    book.mkdir()
    write_book(book, {name: counting_page(counter) for name, counter in counters.items()})
    result = build(book, "--page", "a.md")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert {name: runs(counter) for name, counter in counters.items()} == {"index": 0, "a": 1, "b": 0}
    table = result.stdout.split("Execution time per page")[1]
    assert re.search(r"\ba\s+\d+\.\d\s+\d+\.\d\s+60\s+ok", table) and "index" not in table
    page_html = book / "_build" / "page" / "_build" / "html" / "a.html"
    assert page_html.exists() and f"The site is at {page_html}" in result.stdout
    assert "hello" in page_html.read_text()
    assert not (book / "_build" / "html").exists()  # the full site, if any, is left alone


GLUING = "from myst_nb import glue\nglue('answer', 42, display=False)"


def test_a_page_run_alone_pastes_its_own_glue_and_fails_on_a_key_it_never_glued(tmp_path):
    """The other pages are not executed, so their {glue} roles have nothing to paste; only the page's own count."""
    pasting = page(GLUING) + "\nThe answer is {glue:text}`answer`.\n"
    write_book(tmp_path, {"index": pasting, "a": pasting, "b": page("print(1)") + "\nSee {glue:text}`nowhere`.\n"})
    result = build(tmp_path, "--page", "a", "--output", str(tmp_path / "elsewhere"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "The answer is" in (tmp_path / "elsewhere" / "_build" / "html" / "a.html").read_text()
    result = build(tmp_path, "--page", "b")
    assert result.returncode != 0 and "b: nothing was glued as 'nowhere'" in result.stderr


def test_a_full_build_fails_when_a_claim_differs_from_the_committed_one(tmp_path):
    recording = page("from minformers.support.claims import Page\npage = Page('index')\n"
                     "claim = page.claim('index-effect', statement='S', quantity='Q', rule='R', scale='big')\n"
                     "page.record(claim, 'shown', difference=0.1)")
    write_book(tmp_path, {"index": recording})
    (tmp_path / "book").mkdir(exist_ok=True)
    committed = tmp_path / "book" / "claims.json"
    committed.write_text(json.dumps({"claims": {"index-effect": {"page": "index", "statement": "S",
                                                                 "status": "contradicted"}}}))
    result = build(tmp_path)
    assert result.returncode != 0
    assert "index: claim index-effect is 'shown', committed as 'contradicted'" in result.stderr
    assert json.loads((tmp_path / "_build" / "claims" / "index-effect.json").read_text())["numbers"] == {
        "difference": 0.1}
    committed.write_text(json.dumps({"claims": {"index-effect": {"page": "index", "statement": "S",
                                                                 "status": "shown"}}}))
    result = build(tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_make_page_names_the_pages_when_given_an_unknown_one(tmp_path):
    write_book(tmp_path, {"index": page("print(1)"), "a": page("print(2)")})
    result = build(tmp_path, "--page", "nope")
    assert result.returncode != 0 and "no page 'nope'" in result.stderr


def test_pages_execute_in_the_order_of_the_table_of_contents(tmp_path):
    """A page that trains a model later pages load must run first: the build follows the table of contents, not
    the alphabet."""
    log = tmp_path / "order.log"
    names = ("index", "zeta", "alpha", "mid")
    book = tmp_path / "book"
    book.mkdir()
    write_book(book, {name: page(f"with open({str(log)!r}, 'a') as file:\n    file.write('{name}\\n')")
                      for name in names})
    result = build(book)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert log.read_text().split() == list(names)


def test_glued_values_reach_a_site_built_from_the_executed_notebook_with_execution_off(tmp_path):
    """The student site is built from the executed notebooks with execution off (tools/student.py), and myst-nb keeps
    the glued values beside them, not in them: with_glue puts them back, so the prose still pastes them."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from student import with_glue

    book = tmp_path / "book"
    book.mkdir()
    write_book(book, {"index": page(GLUING) + "\nThe answer is {glue:text}`answer`.\n"})
    assert build(book).returncode == 0
    executed = nbformat.read(book / "_build" / "jupyter_execute" / "index.ipynb", as_version=4)
    site = tmp_path / "site"
    site.mkdir()
    write_book(site, {"index": "placeholder"})
    (site / "index.md").unlink()
    nbformat.write(with_glue(executed, book / "_build" / "jupyter_execute" / "index.glue.json"), site / "index.ipynb")
    config = yaml.safe_load((site / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (site / "_config.yml").write_text(yaml.safe_dump(config))
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    result = subprocess.run([str(jupyter_book), "build", "--all", "-W", "-n", "--keep-going", str(site)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(r"The answer is <span[^>]*>42</span>", (site / "_build" / "html" / "index.html").read_text())
