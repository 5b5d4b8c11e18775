"""A submitted notebook running in its sandbox (tools/sandbox.py), answering the grader's calls of its functions
over a channel (tools/channel.py, tools/harness.py); the grader's checks call `RemoteFunction`s and never run the
learner's code themselves."""

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat

from channel import ChannelClosed, ChannelTimeout, MessageTooLarge, receive, send
from minformers import checks
from minformers.support import checkpoints, data
from sandbox import Limits, ended_by, kill, start

HARNESS = Path(__file__).resolve().parent


MAX_ANSWER_BYTES = 64 << 20


class Stopped(BaseException):  # noqa: N818 -- not an Exception, so that a check's `except Exception` lets it through
    """The learner's function could not be called at all: {status, message} for every exercise it stops."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def course_caches() -> tuple[dict[Path, str], dict[str, str]]:
    """The course's data cache and the book's checkpoints, read-only in the sandbox: the chapters load their data
    and trained models from them, as when the book is built, instead of downloading (the sandbox has no network)
    or training again. `make book` fills both."""
    data_cache = data.cache_dir()
    checkpoint_folder = checkpoints.checkpoint_path("any", {}).parent
    binds = {path: str(path) for path in (data_cache, checkpoint_folder) if path.is_dir()}
    return binds, {"MINFORMERS_CACHE": str(data_cache)}


class Session:
    """One submitted notebook running in its sandbox, answering calls of its functions."""

    def __init__(self, notebook: nbformat.NotebookNode, limits: Limits, cell_timeout: int, notebook_timeout: int):
        self.limits, self.cell_timeout = limits, cell_timeout
        self.folder = Path(tempfile.mkdtemp(prefix="grade-"))
        self.folder.chmod(0o755)
        nbformat.write(notebook, self.folder / "submission.ipynb")
        (self.folder / "submission.ipynb").chmod(0o644)
        request_read, self.request = os.pipe()
        self.response, response_write = os.pipe()
        command = ["python", "/grader/harness.py", "/submission/submission.ipynb",
                   str(request_read), str(response_write), str(cell_timeout)]
        caches, environment = course_caches()
        self.process = start(command, limits, {HARNESS: "/grader", self.folder: "/submission", **caches},
                             (request_read, response_write), environment)
        os.close(request_read)
        os.close(response_write)
        self.problems = self._wait_ready(time.monotonic() + notebook_timeout, notebook_timeout)

    def _stopped(self, error: BaseException, what: str) -> Stopped:
        """Kill the sandbox and say why it stopped, as a status."""
        if isinstance(error, ChannelTimeout):
            kill(self.process)
            return Stopped("timeout", f"{what} ran past the time allowed")
        if isinstance(error, MessageTooLarge):
            kill(self.process)
            return Stopped("output limit", f"{what} answered with {error}")
        with contextlib.suppress(subprocess.TimeoutExpired):  # it closed the channel: let it finish exiting
            self.process.wait(timeout=5)
        kill(self.process)
        limit = ended_by(self.process.returncode, self.limits)
        if limit:
            return Stopped(limit.split(":")[0], f"{what}: {limit}")
        return Stopped("crashed", f"{what}: the notebook's process ended (exit status {self.process.returncode})")

    def _wait_ready(self, deadline: float, notebook_timeout: int) -> list[dict]:
        running = 0
        while True:
            try:
                message = receive(self.response, trusted=False, deadline=deadline, max_bytes=1 << 20)
            except (ChannelTimeout, ChannelClosed, MessageTooLarge) as error:
                stop = self._stopped(error, f"cell {running}")
                if stop.status == "timeout":
                    stop.message = f"the notebook ran past {notebook_timeout} s (cell {running} was running)"
                raise stop from None
            if not isinstance(message, dict):
                raise self._stopped(ChannelClosed(), "the notebook sent the grader something it did not ask for")
            if message.get("op") == "cell":
                running = message.get("number")
            elif message.get("op") == "ready":
                return list(message.get("problems", []))

    def call(self, function: str, op: str, args: tuple, kwargs: dict):
        blocked_functions, blocked_attributes = checks.blocked_now
        request = {"op": op, "function": function, "args": args, "kwargs": kwargs, "timeout": self.cell_timeout,
                   "blocked_functions": [f"{f.__module__}:{f.__qualname__}" for f in blocked_functions],
                   "blocked_attributes": [(_name_of(owner), name) for owner, name in blocked_attributes]}
        try:
            send(self.request, request)
            answer = receive(self.response, trusted=False, deadline=time.monotonic() + self.cell_timeout + 30,
                             max_bytes=MAX_ANSWER_BYTES)
        except (ChannelTimeout, ChannelClosed, MessageTooLarge, BrokenPipeError) as error:
            raise self._stopped(error, f"{function}") from None
        except Exception as error:  # an answer that is not plain data: refused by weights_only loading
            raise Stopped("wrong", f"{function} returned something that is not data: {error}") from None
        return _outcome(function, answer, self)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            send(self.request, {"op": "stop"})
        kill(self.process)
        for fd in (self.request, self.response):
            with contextlib.suppress(OSError):
                os.close(fd)
        shutil.rmtree(self.folder, ignore_errors=True)


def _name_of(owner) -> str:
    if isinstance(owner, type):
        return f"{owner.__module__}:{owner.__qualname__}"
    return f"{owner.__name__}:"


def _outcome(function: str, answer, session: Session):
    """The value the learner's function returned, or its exception raised again here, for the check to judge."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if outcome == "value":
        value = answer["value"]
        if isinstance(value, dict) and list(value) == ["unsupported type"]:  # shown by its type name, as in-process
            return type(str(value["unsupported type"]), (), {})()
        return value
    if outcome == "missing":
        raise Stopped(*_missing(function, session.problems))
    if outcome == "timeout":
        raise Stopped("timeout", f"{function} ran longer than {session.cell_timeout} s")
    if outcome == "raised":
        if answer.get("not attempted"):
            raise NotImplementedError(answer.get("message", ""))
        if answer.get("calls reference"):
            raise LookupError(checks._BLOCKED)
        raise type(str(answer.get("type", "Exception")), (Exception,), {})(answer.get("message", ""))
    if outcome == "harness error":  # the grader's own agent failed: a bug to report, not the learner's fault
        raise Stopped("crashed", f"the grader could not call {function}: {answer.get('message')}")
    raise Stopped("crashed", f"the notebook's answer for {function} was not understood")


def _missing(function: str, problems: list[dict]) -> tuple[str, str]:
    """Why `function` is not defined, from what went wrong in the notebook's cells."""
    if any(problem["kind"] == "timeout" for problem in problems):
        first = next(problem for problem in problems if problem["kind"] == "timeout")
        return "timeout", f"{function} is not defined: cell {first['cell']} ran past the time allowed"
    said = "; ".join(f"cell {p['cell']}: {p['message']}" for p in problems if p["kind"] in ("syntax error", "exit"))
    return "missing", f"{function} is not defined" + (f" ({said})" if said else "")


class RemoteFunction:
    """Stands in for a learner's function in a check: each call runs the real one in the sandbox."""

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name

    def __call__(self, *args, **kwargs):
        return self.session.call(self.name, "call", args, kwargs)

    def peak_tensor_bytes(self, *args) -> int:
        return self.session.call(self.name, "peak", args, {})
