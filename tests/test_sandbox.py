"""The grader's sandbox (tools/sandbox.py) keeps a submission from the network, the book and the limits' far side."""

import json
import os
from pathlib import Path

import pytest

from sandbox import Limits, check_available, ended_by, kill, start

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, os, socket, subprocess, sys
found = {"uid": os.getuid()}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    found["network"] = "reached"
except OSError as error:
    found["network"] = type(error).__name__
found["book visible"] = os.path.exists(sys.argv[2])
try:
    open(sys.argv[3], "a").close()
    found["lib writable"] = True
except OSError:
    found["lib writable"] = False
started = []
try:
    for _ in range(40):
        started.append(subprocess.Popen(["sleep", "30"]))
except OSError:
    pass
found["processes started"] = len(started)
try:
    with open("/tmp/big", "wb") as file:
        file.write(b"x" * (8 << 20))
    found["8 MB file"] = "written"
except OSError as error:
    found["8 MB file"] = type(error).__name__
os.write(int(sys.argv[1]), json.dumps(found).encode())
"""


@pytest.fixture(scope="module")
def probed():
    check_available()
    read, write = os.pipe()
    limits = Limits(processes=10, file_bytes=4 << 20)
    process = start(["python", "-c", PROBE, str(write), str(ROOT / "book"), str(ROOT / "lib" / "minformers" / "x.py")],
                    limits, {}, (write,))
    os.close(write)
    with os.fdopen(read) as answer:
        found = json.loads(answer.read())
    kill(process)
    return found


def test_no_network(probed):
    assert probed["network"] != "reached"


def test_the_book_is_not_there_and_the_lib_is_read_only(probed):
    assert not probed["book visible"] and not probed["lib writable"]


def test_limits_hold(probed):
    assert probed["processes started"] < 10
    assert probed["8 MB file"] != "written"  # SIGXFSZ is ignored by Python, so the write fails with an OSError


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root grader changes user")
def test_a_root_grader_runs_submissions_as_nobody(probed):
    assert probed["uid"] == 65534


def test_a_process_over_its_processor_time_is_stopped_and_said_so():
    limits = Limits(cpu_seconds=2)
    process = start(["python", "-c", "while True: pass"], limits, {}, ())
    try:
        process.wait(timeout=60)
    finally:
        kill(process)
    assert ended_by(process.returncode, limits).startswith("cpu limit")
