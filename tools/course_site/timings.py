"""Each executed page's time, for tools/build_book.py's timing table and budgets: `_build/timings.json`,

    {"clock": {"factor": 1.31, "seconds": 7.2, ...},
     "pages": {"book/attention": {"seconds": 31.2, "reference_seconds": 23.8, "succeeded": true, "error": null,
                                  "method": "force"}, ...}}

The clock is the machine factor that build_book.py measured before the build (tools/build_clock.py) and passed in
MINFORMERS_BUILD_CLOCK; a page's reference seconds are its seconds divided by that factor. Without the variable (a
plain `jupyter-book build`) the clock is null and so are the reference seconds.
"""

import json
import os
from pathlib import Path

from myst_nb.sphinx_ import NbMetadataCollector


def write_timings(app, exception):
    if app.builder.name != "html":
        return
    clock = json.loads(os.environ.get("MINFORMERS_BUILD_CLOCK", "null"))
    pages = {}
    for docname in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, docname)
        if data is None:
            continue  # a page with no code cells is not executed
        seconds = data.get("runtime")
        pages[docname] = {
            "seconds": seconds,
            "reference_seconds": None if clock is None or seconds is None else seconds / clock["factor"],
            "succeeded": data.get("succeeded"),
            "error": data.get("error"),
            "method": data.get("method"),  # "force", or "cache" in a --reuse build (the seconds are then recorded ones)
            "finished": data.get("mtime"),  # POSIX time the execution ended (benchmarks/bench_clock.py)
        }
    path = Path(app.outdir).parent / "timings.json"
    path.write_text(json.dumps({"clock": clock, "pages": pages}, indent=2) + "\n")
