"""`make progress`: per build, how many visible checks pass, and the hint for what is next.

It reads the learner's build notebooks *as saved* through the export path (and says so: a
self-check cell checks what the kernel last ran, which may not be saved yet), runs the visible
checks, and changes nothing: running it twice on the same notebooks prints the same thing.
Whatever the learner's cells print is kept out of the report, and a build whose code never
returns is stopped after `BUILD_SECONDS` and reported as such instead of hanging the command.
A name the answer cells use but only an untagged cell defines is named, as the self-check does.

Each build's report is kept in `CACHE_DIR` under the content id of everything that can change it
(`report_key`: the build's code cells, the setup and answer cells of the earlier builds it may
load, the `workbook` and `etl` code, the manifest, the interpreter), so a repeat on unchanged
notebooks prints the same report without running a check; any edit, saved, runs them again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from workbook.checking import teststep
from workbook.checking.notebook_cells import untagged_helpers
from workbook.checks import CheckResult
from workbook.selfcheck import MARKS, checks_for, hints_for, next_fix
from workbook.shared import buildfolder
from workbook.shared.errors import WorkbookError
from workbook.shared.export import EXPORTED_TAGS, cell_source, cell_tags, load, read_notebook
from workbook.shared.manifest import Entry, Manifest, load_manifest, repo_root

#: Real seconds one build's loading and checks may take before it is reported as stuck.
BUILD_SECONDS = 20
BAR_WIDTH = 20
#: Where the reports are kept, in the repo root (git-ignored; `make clean` removes it).
CACHE_DIR = ".progress"
#: Bumped when what a cached report holds changes, so older files are never read as new.
CACHE_FORMAT = "2"
#: How recently changed a file must be for `_by_stat` to read it again whatever its stamp.
RACY_NS = 2_000_000_000


class TimeUp(BaseException):
    """Raised by the alarm; a BaseException so a learner's ``except Exception`` can't eat it."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Interrupt the block after `seconds` of real time (where SIGALRM exists: not Windows)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def ring(signum: int, frame: FrameType | None) -> None:
        raise TimeUp

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class BuildReport:
    entry: Entry
    results: tuple[CheckResult, ...] = ()
    problem: str = ""
    """Why the checks could not run at all, in a few words ("does not load", "never finished")."""
    detail: str = ""
    notes: tuple[str, ...] = ()
    """Names the answer cells use that only an untagged cell defines (`untagged_helpers`)."""
    total: int = 0
    """How many visible checks the build has (kept, so a cached report needs no checks)."""

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def done(self) -> bool:
        return not self.problem and self.passed == len(self.results)

    @property
    def started(self) -> bool:
        """Anything but untouched stubs: a check passes or fails, or the notebook is broken."""
        return bool(self.problem) or any(r.status != "not done" for r in self.results)

    @property
    def verdict(self) -> str:
        """``done``, ``not started`` or ``failing: <first failing check>`` (the learner's
        `make check` prints one per build)."""
        if self.done:
            return "done"
        if not self.started:
            return "not started"
        first = next((r.name for r in self.results if not r.passed), "")
        return f"failing: {self.problem or first}"


def tracked_builds(manifest: Manifest) -> list[Entry]:
    """Builds (and the quiz) whose notebook is on disk and that have visible checks, in order.

    The quiz's visible checks look only at the form of its answers, so "done" there means
    answered, not right: its marks come from the instructor's grader.
    """
    return [
        e
        for e in manifest.entries
        if e.kind in ("build", "quiz")
        if (manifest.root / e.path).exists() and buildfolder.has_answer_checks(e.number)
    ]


def build_report(manifest: Manifest, entry: Entry, *, cached: bool = True) -> BuildReport:
    """Load one build through the export path and run its visible checks, quietly and
    within `BUILD_SECONDS`: a notebook that does not load or never finishes is reported.
    With `cached`, a report kept under the same `report_key` is returned instead of
    re-running; a fresh report is kept (except "never finished": a busy machine can cause it).
    """
    key = report_key(manifest, entry) if cached else None
    if key is not None and (kept := _read_kept(manifest, entry, key)) is not None:
        return kept
    report = _checked(manifest, entry)
    if key is not None and report.problem != "never finished":
        _keep(manifest, entry, key, report)
    return report


def _checked(manifest: Manifest, entry: Entry) -> BuildReport:
    checks = checks_for(entry.number)
    path = manifest.root / entry.path
    total = len(checks.names) + len(entry.learner_tests)  # a test-writing step is a step
    # The learner's prints would scramble the report: keep them out of it.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            with time_limit(BUILD_SECONDS):
                module = load(path)
                checked = checks.run(module)
                tests = teststep.results(entry.number, teststep.saved_sources(path), checked)
                report = BuildReport(entry, (*checked, *tests), total=total)
        except WorkbookError as exc:
            report = BuildReport(entry, problem="does not load", detail=str(exc), total=total)
        except TimeUp:
            return BuildReport(
                entry,
                problem="never finished",
                detail=f"still running after {BUILD_SECONDS} s: does a loop in your answers"
                " never end?",
                total=total,
            )
    if report.done:
        return report
    return dataclasses.replace(report, notes=tuple(_untagged(path)))


# ───────────────────────────────────────────────── kept reports


_MEMO: dict[tuple[str, str], tuple[tuple[int, int, int], Any]] = {}
"""What `_by_stat` computed from a file, with the file's (inode, size, mtime) then."""


def _by_stat(path: Path, what: str, compute: Callable[[Path], Any]) -> Any:
    """``compute(path)``, computed again only once the file's inode, size or mtime change:
    one `make progress` reads each file once, not once per build. A file changed in the last
    `RACY_NS` is always read again: an edit that fast can leave size and mtime as they were
    (file times tick in milliseconds), as git's "racy" index entries show."""
    info = path.stat()
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
    memo = _MEMO.get((str(path), what))
    if memo is not None and memo[0] == stamp and time.time_ns() - info.st_mtime_ns > RACY_NS:
        return memo[1]
    value = compute(path)
    _MEMO[(str(path), what)] = (stamp, value)
    return value


def _cells_text(path: Path, tags: tuple[str, ...] | None) -> list[list[object]]:
    """Each code cell of `path` (only those tagged one of `tags`, unless None) as its tags and
    source: what a report can depend on, never outputs or metadata."""
    cells = _by_stat(path, "cells", lambda p: read_notebook(p)["cells"])
    return [
        [cell_tags(cell), cell_source(cell)]
        for cell in cells
        if cell.get("cell_type") == "code" and (tags is None or set(tags) & set(cell_tags(cell)))
    ]


def _code_files() -> list[list[str]]:
    """(path, content id) of every file of the `workbook` and `etl` packages (checks, the
    fixture data, the export path) and of the manifest and requirements."""
    root = repo_root()
    files = [root / "workbook.toml", root / "requirements.txt"]
    for package in ("workbook", "etl"):
        files.extend(f for f in sorted((root / package).rglob("*")) if "__pycache__" not in f.parts)
    return [
        [str(f.relative_to(root)), _by_stat(f, "sha256", _sha256)] for f in files if f.is_file()
    ]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def report_key(manifest: Manifest, entry: Entry) -> str | None:
    """The content id of everything `entry`'s report depends on, or None when a notebook
    cannot be read (the checks then say why, uncached). Earlier builds of the same folder
    count by their setup and answer cells: a later build's setup cell may load them."""
    path = manifest.root / entry.path
    earlier = [
        e
        for e in manifest.entries[: manifest.entries.index(entry)]
        if e.kind in ("build", "quiz") and (manifest.root / e.path).parent == path.parent
    ]
    try:
        parts = {
            "format": CACHE_FORMAT,
            "python": sys.version,
            "build": [entry.number, entry.path, _cells_text(path, None)],
            "earlier": [
                [e.number, _cells_text(manifest.root / e.path, EXPORTED_TAGS)]
                for e in earlier
                if (manifest.root / e.path).is_file()
            ],
            "code": _code_files(),
        }
    except (OSError, WorkbookError):
        return None
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(b"progress\x00" + text.encode("utf-8", "surrogatepass")).hexdigest()


def _kept_path(manifest: Manifest, entry: Entry, key: str) -> Path:
    return manifest.root / CACHE_DIR / f"{entry.number}-{key}.json"


def _read_kept(manifest: Manifest, entry: Entry, key: str) -> BuildReport | None:
    """The report kept under `key`, or None (none kept, or unreadable: it is re-run)."""
    try:
        data = json.loads(_kept_path(manifest, entry, key).read_text(encoding="utf-8"))
        return BuildReport(
            entry,
            tuple(CheckResult(**r) for r in data["results"]),
            data["problem"],
            data["detail"],
            tuple(data["notes"]),
            data["total"],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _keep(manifest: Manifest, entry: Entry, key: str, report: BuildReport) -> None:
    """Write `report` under `key`, atomically, and drop the build's older reports; where the
    folder cannot be written, nothing is kept (the next run checks again)."""
    target = _kept_path(manifest, entry, key)
    data = {
        "results": [dataclasses.asdict(r) for r in report.results],
        "problem": report.problem,
        "detail": report.detail,
        "notes": list(report.notes),
        "total": report.total,
    }
    try:
        target.parent.mkdir(exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False)
        os.replace(temp, target)  # a reader sees the old file or the whole new one
        for older in target.parent.glob(f"{entry.number}-*.json"):
            if older != target:
                older.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)  # gone already once replaced


def _untagged(path: Path) -> list[str]:
    try:
        cells = read_notebook(path)["cells"]
    except WorkbookError:
        return []
    tagged = [cell_source(c) for c in cells if {"setup", "answer"} & set(cell_tags(c))]
    return untagged_helpers(cells, tagged)


def bar(passed: int, total: int) -> str:
    filled = round(BAR_WIDTH * passed / total) if total else 0
    return "█" * filled + "░" * (BAR_WIDTH - filled)


def saved_note(reports: Sequence[BuildReport]) -> str:
    """The line saying what was read: the notebooks as saved, not what a kernel last ran."""
    folders = sorted({str(Path(r.entry.path).parent) for r in reports})
    return (
        f"Read from the saved notebooks in {', '.join(f + '/' for f in folders)} (save in"
        " JupyterLab to count your latest edits; the self-check cells check what the kernel ran)."
    )


def progress_text(reports: Sequence[BuildReport]) -> str:
    """The report `make progress` prints: what it read, a bar per build, then what is next."""
    lines = [saved_note(reports), ""]
    for report in reports:
        entry, total = report.entry, report.total or len(report.results)
        finished = "answered" if entry.kind == "quiz" else "done"
        status = report.problem or (finished if report.done else f"{report.passed} of {total}")
        lines.append(f"{entry.number}  {entry.title:<42} {bar(report.passed, total)} {status}")
    done = sum(r.done for r in reports)
    lines.append("")
    lines.append(f"{done} of {len(reports)} builds done.")
    todo = next((r for r in reports if not r.done), None)
    if todo is None:
        lines.append("Every build is done. Run `make check` to confirm.")
        return "\n".join(lines)
    lines.extend(next_steps(todo))
    return "\n".join(lines)


def next_steps(todo: BuildReport) -> list[str]:
    """What to do next in an unfinished build: its first failing check with its feedback and
    hint, or why it could not be checked; then any helper left in an untagged cell."""
    where = f"the saved {todo.entry.path}"
    if todo.problem:
        lines = [f"Next, in {where}: it {todo.problem}.", f"    {todo.detail}"]
    else:
        lines = []
        fix = next_fix(todo.results, hints_for(todo.entry.number))
        if fix is not None:  # the failing check whose failure explains the others comes first
            first = fix.check
            lines = [f"Next, in {where}: {MARKS[first.status]} {first.name} [{first.status}]"]
            lines.extend(f"    {text}" for text in first.message.splitlines())
            if fix.hint:
                lines.append(f"Hint: {fix.heading}{fix.hint}")
    return lines + [f"Note: {note}" for note in todo.notes]


def main(manifest: Manifest | None = None) -> int:
    """Print the report. Always exits 0: progress is information, not a verdict."""
    manifest = manifest or load_manifest()
    builds = tracked_builds(manifest)
    if not builds:
        print("No build notebook exists yet, so there is nothing to count.")
        print("Progress starts with build 03; until then, read the concept notebooks.")
        return 0
    print(progress_text([build_report(manifest, entry) for entry in builds]))
    sys.stdout.flush()
    return 0
