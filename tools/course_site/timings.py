"""Each executed page's time, for tools/build_book.py's timing table and budgets: `_build/timings.json`,

    {"book/attention": {"seconds": 31.2, "succeeded": true, "error": null, "method": "force"}, ...}
"""

import json
from pathlib import Path

from myst_nb.sphinx_ import NbMetadataCollector


def write_timings(app, exception):
    if app.builder.name != "html":
        return
    timings = {}
    for docname in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, docname)
        if data is None:
            continue  # a page with no code cells is not executed
        timings[docname] = {
            "seconds": data.get("runtime"),
            "succeeded": data.get("succeeded"),
            "error": data.get("error"),
            "method": data.get("method"),  # "force", or "cache" in a --reuse build (the seconds are then recorded ones)
        }
    path = Path(app.outdir).parent / "timings.json"
    path.write_text(json.dumps(timings, indent=2) + "\n")
