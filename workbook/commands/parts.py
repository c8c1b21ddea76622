"""The parts of a `make check`, run and timed, then one summary (both copies use it).

A part is a list of commands (or a function of this process) that passes when each exits 0; a
pytest that collected nothing (exit code 5) counts as "no tests". Parts of one *lane* run in
order; lanes run at the same time, each part's output held back and printed whole when it ends,
so the terminal reads part by part while the cores stay busy (most parts wait on children).

A part with a `key` is a proof of exactly the inputs the key was computed from (`tree_key`): once
it passed, a run with the same key prints "cached" with when it passed, and runs nothing. A
failing part is never stored; ``--fresh`` (``make check FRESH=1``) runs everything.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from workbook.shared.manifest import repo_root

ROOT = repo_root()
#: Where a passed part's key is kept (git-ignored; `make clean` removes it).
CACHE = ROOT / ".check-cache"


@dataclass(frozen=True)
class Part:
    name: str
    commands: tuple[tuple[str, ...], ...] = ()
    skip_reason: str | None = None
    call: Callable[[], int] | None = None
    """Run in this process instead of `commands`: returns 0 when the part passes."""
    lane: int = 0
    """Parts of one lane run one after another; lanes run at once."""
    key: str | None = None
    """The content id of every input this part proves; None: it always runs."""


@dataclass
class Outcome:
    name: str
    status: str
    seconds: float


def pytest(*args: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-q", *args)


# ─────────────────────────────────────────────────────────────── keys of what a part proves


def environment() -> str:
    """The interpreter, every installed distribution and its version, and whether this runs
    as root (some parts prove more as root): a proof on another environment is another key."""
    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    return "\n".join([sys.version, f"root={os.geteuid() == 0}", *dists])


def tracked_files(root: Path = ROOT) -> list[str]:
    """Every file git tracks or would track (untracked but not ignored), sorted."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    return sorted(set(filter(None, listed.split("\0"))))


def tree_key(
    label: str,
    files: Iterable[str],
    *,
    root: Path = ROOT,
    extra: str = "",
) -> str:
    """The sha256 of `label`, `extra`, `environment()` and each file's path and bytes (a
    missing file counts by its absence): equal keys, equal inputs."""
    digest = hashlib.sha256(f"{label}\0{extra}\0{environment()}\0".encode())
    for name in files:
        path = root / name
        digest.update(name.encode() + b"\0")
        with contextlib.suppress(OSError):
            if path.is_file():
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.split("(")[0].strip().lower())


def cached(part: Part) -> str | None:
    """When `part` last passed with its current key, or None."""
    if part.key is None:
        return None
    try:
        stored = (CACHE / _slug(part.name)).read_text(encoding="utf-8").split()
    except OSError:
        return None
    return stored[1] if len(stored) == 2 and stored[0] == part.key else None


def remember(part: Part) -> None:
    """Keep `part`'s key as passed (nothing is lost if the folder cannot be written)."""
    if part.key is None:
        return
    with contextlib.suppress(OSError):
        CACHE.mkdir(exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        (CACHE / _slug(part.name)).write_text(f"{part.key} {stamp}\n", encoding="utf-8")


# ─────────────────────────────────────────────────────────────────────────── running them


def _run(part: Part, out: Callable[[str], None], stdout: int | None, fresh: bool) -> Outcome:
    """Run one part, its commands' output to `stdout` (None: this terminal); `fresh`: even if
    its key passed before (a pass is kept either way)."""
    if part.skip_reason:
        out(f"skipped: {part.skip_reason}\n")
        return Outcome(part.name, "skipped", 0.0)
    when = None if fresh else cached(part)
    if when is not None:
        out(f"cached: passed on these exact inputs at {when} (make check FRESH=1 runs it)\n")
        return Outcome(part.name, "cached", 0.0)
    start = time.perf_counter()
    status = "passed"
    if part.call is not None:
        code = part.call()
        status = "passed" if code == 0 else f"FAILED (exit {code})"
    for command in part.commands:
        code = subprocess.call(command, cwd=ROOT, stdout=stdout, stderr=stdout)
        if code == 5 and command[1:3] == ("-m", "pytest"):
            out("(no tests collected)\n")
            status = "no tests" if status == "passed" else status
        elif code != 0:
            status = f"FAILED (exit {code})"
    if status == "passed":
        remember(part)
    return Outcome(part.name, status, time.perf_counter() - start)


def _in_order(parts: list[Part], fresh: bool) -> list[Outcome]:
    outcomes = []
    for part in parts:
        print(f"\n━━ {part.name} ━━", flush=True)
        outcomes.append(_run(part, lambda text: print(text, end="", flush=True), None, fresh))
    return outcomes


def _in_lanes(parts: list[Part], fresh: bool) -> list[Outcome]:
    """Each lane in a thread; a part's output goes to a file, printed whole when it ends."""
    lock = threading.Lock()
    done: dict[str, Outcome] = {}
    lanes: dict[int, list[Part]] = {}
    for part in parts:
        lanes.setdefault(part.lane, []).append(part)
    names = "; ".join(" → ".join(p.name.split(" (")[0] for p in lane) for lane in lanes.values())
    print(f"{len(lanes)} lanes at once (each part's output shows when it ends): {names}")

    def lane(members: list[Part]) -> None:
        for part in members:
            with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as held:

                def out(text: str, held: IO[str] = held) -> None:
                    held.write(text)
                    held.flush()

                try:
                    outcome = _run(part, out, held.fileno(), fresh)
                except Exception as exc:  # the part's own machinery failed: said, not lost
                    outcome = Outcome(part.name, f"FAILED ({type(exc).__name__}: {exc})", 0.0)
                held.seek(0)
                with lock:
                    print(f"\n━━ {part.name} ━━\n{held.read()}", end="", flush=True)
                    done[part.name] = outcome

    threads = [threading.Thread(target=lane, args=(m,), daemon=True) for m in lanes.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [done[p.name] for p in parts]


def run_parts(
    parts: list[Part],
    only: str | None,
    *,
    passed: str = "make check passed.",
    fresh: bool = False,
) -> int:
    """Run each part (or only the one whose name starts with `only`; `fresh`: none from the
    cache), then print a summary with each part's time; 1 when any part failed."""
    chosen = [p for p in parts if not only or p.name.split()[0] == only]
    start = time.perf_counter()
    concurrent = len({p.lane for p in chosen}) > 1
    outcomes = _in_lanes(chosen, fresh) if concurrent else _in_order(chosen, fresh)
    wall = time.perf_counter() - start
    print("\n━━ summary ━━")
    for row in outcomes:
        print(f"  {row.name:<40} {row.status:<18} {row.seconds:6.1f} s")
    total = sum(row.seconds for row in outcomes)
    if concurrent:
        print(f"  {'total':<40} {'at once':<18} {wall:6.1f} s  ({total:.1f} s of parts)")
    else:
        print(f"  {'total':<40} {'':<18} {total:6.1f} s")
    failed = [row.name for row in outcomes if row.status.startswith("FAILED")]
    if failed:
        print(f"\nmake check failed: {', '.join(failed)}.")
        return 1
    print(f"\n{passed}")
    return 0
