"""Run named shell steps in order, time each, stop at the first failure, and print a summary.

    python tools/steps.py "lint=ruff check ." "unit tests=pytest -m 'not book'"
"""

import subprocess
import sys
import time


def main(steps: list[str]) -> int:
    done = []
    for step in steps:
        name, command = step.split("=", 1)
        print(f"\n=== {name}: {command}", flush=True)
        started = time.perf_counter()
        code = subprocess.run(command, shell=True).returncode
        done.append((name, time.perf_counter() - started, code))
        if code != 0:
            break
    print("\n=== summary")
    for name, seconds, code in done:
        print(f"{name:<14} {seconds:>7.0f} s   {'ok' if code == 0 else f'FAILED (exit {code})'}")
    failed = [name for name, _, code in done if code != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
