import os

# `make test` runs the tests on two worker processes, one per core: each (and each notebook kernel it starts) takes
# one torch thread rather than the book's two, or four threads would fight over the two cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("MINFORMERS_THREADS", "1")
