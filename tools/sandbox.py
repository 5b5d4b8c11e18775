"""Start a command in a sandbox: bubblewrap (Debian's `bubblewrap` package) plus resource limits.

Inside, the command sees only what it needs to run the course's Python: the system's /usr, the Python
installation, the virtual environment and the course library, all read-only, and a private, empty, writable
/tmp. It has no network, its own process, IPC and host-name namespaces, no capabilities, and runs as the
unprivileged user `nobody` when the grader runs as root. It cannot see the book's sources, other submissions or
the grader's output folder, because none of them is mounted. When the grader kills the sandbox, every process the
submission started dies with it (they live in the sandbox's own process namespace).
"""

import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
ROOT = Path(__file__).resolve().parent.parent


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or does not work on this machine."""


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 << 30  # address space: torch alone reserves about 0.7 GB
    cpu_seconds: int = 900
    processes: int = 64
    file_bytes: int = 64 << 20  # the largest file a submission may write in its /tmp
    open_files: int = 256


def _ancestors(path: Path) -> list[Path]:
    return [parent for parent in reversed(path.parents) if parent != Path("/")]


def bwrap_arguments(readable: list[Path], extra_binds: dict[Path, str], environment: dict[str, str]) -> list[str]:
    """bwrap's options: each path in `readable` mounted read-only where it is, `extra_binds` {host: inside}, and
    `environment` added to the few variables the sandbox sets."""
    arguments = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                 "--die-with-parent", "--new-session",
                 "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev",
                 "--perms", "1777", "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv"]
    for link in ("bin", "lib", "lib64", "sbin"):  # Debian's merged /usr: /bin is a link to usr/bin, and so on
        if Path(f"/{link}").is_symlink():
            arguments += ["--symlink", os.readlink(f"/{link}"), f"/{link}"]
    made = set()
    mounts = [(path, str(path)) for path in readable] + [(host, inside) for host, inside in extra_binds.items()]
    for host, inside in mounts:
        for parent in _ancestors(Path(inside)):  # parents made world-readable so that `nobody` can pass
            if parent not in made and not str(parent).startswith("/usr"):
                arguments += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        arguments += ["--ro-bind", str(host), inside]
    variables = {"HOME": "/tmp", "MPLCONFIGDIR": "/tmp", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1",
                 "PYTHONDONTWRITEBYTECODE": "1", "PATH": f"{Path(sys.executable).absolute().parent}:/usr/bin:/bin",
                 "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **environment}
    for name, value in variables.items():
        arguments += ["--setenv", name, value]
    return arguments


def python_paths() -> list[Path]:
    """What the course's Python needs: its installation, the virtual environment and the editable course library."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix), ROOT / "lib"}
    return sorted(path for path in paths if not str(path).startswith("/usr"))


def check_available() -> None:
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "the grader runs each submission in a sandbox made by bubblewrap, which is not installed: "
            "run `sudo apt-get install bubblewrap` (Debian, Ubuntu) or `sudo dnf install bubblewrap` (Fedora)")
    probe = subprocess.run(["bwrap", *bwrap_arguments([], {}, {}), "--", "/usr/bin/true"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        raise SandboxUnavailable(f"bubblewrap is installed but cannot make a sandbox here: {probe.stderr.strip()}")


def _apply_limits(limits: Limits) -> None:
    """Run in the child before bwrap starts: the limits are inherited by everything the submission starts."""
    os.setsid()  # its own process group, so the grader can kill all of it at once
    processes = limits.processes
    if os.geteuid() != 0:  # the limit counts all of this user's processes, so leave room for the ones running
        processes += len([p for p in Path("/proc").iterdir() if p.name.isdigit()])
    for kind, value in ((resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_FSIZE, limits.file_bytes),
                        (resource.RLIMIT_NOFILE, limits.open_files), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(kind, (value, value))
    # At the soft limit the kernel sends SIGXCPU, which says why; at the hard one, 10 s later, SIGKILL.
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 10))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def start(command: list[str], limits: Limits, extra_binds: dict[Path, str], pass_fds: tuple[int, ...],
          environment: dict[str, str] | None = None):
    """Start `command` in a sandbox; returns the Popen. A root grader's sandboxes run as `nobody` (setpriv), since
    RLIMIT_NPROC does not bind root."""
    if os.geteuid() == 0:  # setpriv needs root's capabilities to change user; becoming `nobody` drops them all
        options, inside = [], ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                               "--inh-caps=-all", "--bounding-set=-all", *command]
    else:
        options, inside = ["--cap-drop", "ALL"], command
    full = ["bwrap", *options, *bwrap_arguments(python_paths(), extra_binds, environment or {}), "--", *inside]
    shown = None if os.environ.get("GRADE_DEBUG") else subprocess.DEVNULL  # GRADE_DEBUG=1: the sandbox's output
    return subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=shown, stderr=shown,
                            pass_fds=pass_fds, preexec_fn=lambda: _apply_limits(limits), close_fds=True)


def kill(process: subprocess.Popen) -> None:
    """Kill the sandbox and everything in it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def ended_by(returncode: int | None, limits: Limits) -> str | None:
    """Which limit a sandbox's exit status points to, if any."""
    if returncode is None or returncode == 0:
        return None
    signal_number = -returncode if returncode < 0 else returncode - 128  # bwrap reports its child's as 128 + n
    return {signal.SIGXCPU: f"cpu limit: the notebook used more than {limits.cpu_seconds} s of processor time",
            signal.SIGXFSZ: f"file limit: the notebook wrote a file larger than {limits.file_bytes >> 20} MB",
            signal.SIGKILL: "killed: the notebook was stopped from outside (memory or time)"}.get(signal_number)
