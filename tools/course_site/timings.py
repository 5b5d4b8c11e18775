"""Each executed page's time, for tools/build_book.py's timing table and budgets: `_build/timings.json`,

    {"clock": {"factor": 1.31, "seconds": 7.2, ...},
     "pages": {"book/attention": {"seconds": 31.2, "reference_seconds": 23.8, "succeeded": true, "error": null,
                                  "method": "force", "source": "3f1c...", ...}, ...}}

This extension writes the seconds, with the clock and the reference seconds null; tools/build_book.py then fills
them in from the machine factor it measured (tools/build_clock.py): a page's reference seconds are its seconds
divided by that factor. After a plain `jupyter-book build` they stay null.
"""

import json
import os
from pathlib import Path

from myst_nb.sphinx_ import NbMetadataCollector

import build_clock
import page_clock

pages_with_code = 0  # read so far in this build


def time_the_machine(app, docname, source):
    """During a build by tools/build_book.py, time the build clock's workload before every PROBE_EVERY-th page that
    runs code (Sphinx reads a page just before myst-nb executes it, so the clock runs between pages): readings of
    the machine's speed while the pages run, which the build's factor counts (tools/build_clock.py)."""
    global pages_with_code
    path = os.environ.get(build_clock.PROBES)
    if not path or "{code-cell}" not in source[0]:
        return
    pages_with_code += 1
    if pages_with_code % build_clock.PROBE_EVERY == 0:
        build_clock.probe(path)


def write_timings(app, exception):
    if app.builder.name != "html":
        return
    pages = {}
    for docname in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, docname)
        if data is None:
            continue  # a page with no code cells is not executed
        pages[docname] = {
            "seconds": data.get("runtime"),
            "reference_seconds": None,  # filled in by tools/build_book.py
            "succeeded": data.get("succeeded"),
            "error": data.get("error"),
            "method": data.get("method"),  # "force", or "cache" in a --reuse build (the seconds are then recorded ones)
            "finished": data.get("mtime"),  # POSIX time the execution ended (benchmarks/bench_clock.py)
            "source": page_clock.source_digest(Path(app.srcdir) / f"{docname}.md"),  # which page took them
        }
    path = Path(app.outdir).parent / "timings.json"
    path.write_text(json.dumps({"clock": None, "pages": pages}, indent=2) + "\n")
