"""The grader's agent inside a submission's sandbox: run the notebook's cells, then answer the grader's calls.

    python harness.py NOTEBOOK REQUEST_FD RESPONSE_FD CELL_TIMEOUT

It runs each code cell in one IPython shell, as a kernel would (a cell that raises does not stop the rest; one
that runs past CELL_TIMEOUT seconds is interrupted), reports what went wrong in which cell, then serves requests:
"call this function of the notebook on these arguments" (while the lib's reference for the exercise is made
unavailable), answering with the value, or the exception, as plain data.

Nothing here decides a grade. The grader compares the values in its own process, with its own reference and its
own cases, so whatever the submission does to this process (patching modules, builtins, torch or this file's
functions) can change only the values it answers with, never the verdict on them.
"""

import importlib
import json
import os
import signal
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from channel import receive, send  # noqa: E402

MAX_MESSAGE = 2000  # characters of an exception message sent back


class CellTimeout(KeyboardInterrupt):
    """Raised in a cell that runs past the time allowed (a KeyboardInterrupt, as Jupyter's interrupt is)."""


def _interrupt(signum, frame):
    raise CellTimeout("the cell ran past the time allowed")


def code_cells(path: str) -> list[str]:
    with open(path) as file:
        notebook = json.load(file)
    return ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for cell in notebook["cells"] if cell["cell_type"] == "code"]


def run_cells(shell, cells: list[str], cell_timeout: int, response_fd: int) -> list[dict]:
    """Run every cell; return what went wrong, cell by cell (numbered from 1 among the code cells)."""
    problems = []
    signal.signal(signal.SIGALRM, _interrupt)
    for number, source in enumerate(cells, start=1):
        send(response_fd, {"op": "cell", "number": number})
        signal.alarm(cell_timeout)
        try:
            result = shell.run_cell(source, store_history=False)
        except CellTimeout:  # the alarm came between IPython's own handlers
            result = None
        finally:
            signal.alarm(0)
        error = result.error_before_exec or result.error_in_exec if result is not None else CellTimeout()
        if error is None:
            continue
        kind = {CellTimeout: "timeout", SyntaxError: "syntax error", IndentationError: "syntax error",
                SystemExit: "exit"}.get(type(error), "raised")
        problems.append({"cell": number, "kind": kind, "message": f"{type(error).__name__}: {error}"[:MAX_MESSAGE]})
    return problems


def plain(value):
    """The value as data the grader can load without running code: tensors, numbers, strings, containers."""
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).clone()
    if value is None or type(value) in (bool, int, float, str, torch.dtype):
        return value
    if type(value) in (list, tuple):
        return type(value)(plain(item) for item in value)
    if type(value) is dict:
        return {plain(key): plain(item) for key, item in value.items()}
    if hasattr(value, "item") and getattr(value, "shape", None) == ():  # a numpy scalar
        return plain(value.item())
    return {"unsupported type": type(value).__name__}


def resolve(name: str):
    """'module:qualified.name' -> the object, e.g. 'minformers.llama:RMSNorm.forward'."""
    module, _, qualified = name.partition(":")
    value = importlib.import_module(module)
    for part in qualified.split(".") if qualified else []:
        value = getattr(value, part)
    return value


def call(shell, request: dict) -> dict:
    from minformers import checks  # imported after the cells, as the chapter imported them
    from minformers.support import measure

    function = shell.user_ns.get(request["function"])
    if not callable(function):
        return {"outcome": "missing"}
    blocked = [resolve(name) for name in request["blocked_functions"]]
    attributes = [(resolve(owner), attribute) for owner, attribute in request["blocked_attributes"]]
    args, kwargs = request["args"], request["kwargs"]
    signal.alarm(request["timeout"])
    try:
        with checks._unavailable(blocked, attributes):
            if request["op"] == "peak":
                value = measure.peak_tensor_bytes(lambda: function(*args, **kwargs))
            else:
                value = function(*args, **kwargs)
        return {"outcome": "value", "value": plain(value)}
    except CellTimeout:
        return {"outcome": "timeout"}
    except BaseException as error:  # noqa: BLE001 -- whatever the learner's code raised is reported, not obeyed
        return {"outcome": "raised", "type": type(error).__name__, "message": str(error)[:MAX_MESSAGE],
                "not attempted": isinstance(error, NotImplementedError),
                "calls reference": checks._called_reference(error)}
    finally:
        signal.alarm(0)


def main(notebook: str, request_fd: int, response_fd: int, cell_timeout: int) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    problems = run_cells(shell, code_cells(notebook), cell_timeout, response_fd)
    send(response_fd, {"op": "ready", "problems": problems})
    while True:
        request = receive(request_fd, trusted=True)
        if request["op"] == "stop":
            break
        try:
            answer = call(shell, request)
        except Exception as error:  # noqa: BLE001 -- a fault here is reported, so the grader can say what it was
            answer = {"outcome": "harness error", "message": f"{type(error).__name__}: {error}"[:MAX_MESSAGE]}
        send(response_fd, answer)
    os._exit(0)  # no exit handlers: nothing the submission registered runs after the last answer


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
