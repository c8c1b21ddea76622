"""`make check` in the learner copy: the learner's own work, in parts, timed, one summary.

The parts run in order (visible tests, every notebook runs, progress); each prints its time.
A part whose tool reports "no tests" (pytest's exit code 5) counts as skipped, not failed; any
other non-zero exit fails the run. The instructor's `make check` (`grader.prove`) runs its
own parts through the same `run_parts`. Running it twice runs everything twice; it writes nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workbook.manifest import repo_root

ROOT = repo_root()
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Part:
    name: str
    commands: tuple[tuple[str, ...], ...]
    skip_reason: str | None = None


def pytest(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", *args)


def learner_parts() -> list[Part]:
    """The learner copy: your builds against the visible tests, every notebook runs, progress."""
    return [
        Part("visible tests (your builds)", (pytest("tests/visible"),)),
        Part(
            "notebooks run without errors (nbval lax)",
            (pytest("--nbval-lax", "notebooks", "exercises"),),
        ),
        Part("progress", ((sys.executable, "-m", "workbook", "progress"),)),
    ]


def run_parts(parts: list[Part], only: str | None) -> int:
    rows: list[tuple[str, str, float]] = []
    for part in parts:
        if only and part.name.split()[0] != only:
            continue
        print(f"\n━━ {part.name} ━━", flush=True)
        if part.skip_reason:
            print(f"skipped: {part.skip_reason}")
            rows.append((part.name, "skipped", 0.0))
            continue
        start = time.perf_counter()
        status = "passed"
        for command in part.commands:
            code = subprocess.call(command, cwd=ROOT)
            if code == 5 and command[1:3] == ("-m", "pytest"):
                print("(no tests collected)")
                status = "no tests" if status == "passed" else status
            elif code != 0:
                status = f"FAILED (exit {code})"
        rows.append((part.name, status, time.perf_counter() - start))
    print("\n━━ summary ━━")
    for name, status, seconds in rows:
        print(f"  {name:<40} {status:<18} {seconds:6.1f} s")
    total = sum(s for _, _, s in rows)
    failed = [name for name, status, _ in rows if status.startswith("FAILED")]
    print(f"  {'total':<40} {'':<18} {total:6.1f} s")
    if failed:
        print(f"\nmake check failed: {', '.join(failed)}.")
        return 1
    print("\nmake check passed.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbook.verify")
    parser.add_argument("--only", help="run only the part whose name starts with this word")
    parser.add_argument("--submissions", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.submissions:
        print("Class grading needs the hidden suites: run it in the instructor's repository.")
        return 2
    return run_parts(learner_parts(), args.only)


if __name__ == "__main__":
    sys.exit(main())
