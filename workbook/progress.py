"""`make progress`: per build, how many visible checks pass, and the hint for what is next.

It reads the learner's build notebooks *as saved* through the export path (and says so: a
self-check cell checks what the kernel last ran, which may not be saved yet), runs the visible
checks, and changes nothing: running it twice on the same notebooks prints the same thing.
Whatever the learner's cells print is kept out of the report, and a build whose code never
returns is stopped after `BUILD_SECONDS` and reported as such instead of hanging the command.
A name the answer cells use but only an untagged cell defines is named, as the self-check does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from workbook.checks import CheckResult
from workbook.errors import WorkbookError
from workbook.export import cell_source, cell_tags, load, read_notebook
from workbook.manifest import Entry, Manifest, load_manifest
from workbook.selfcheck import MARKS, checks_for, hints_for, untagged_helpers

#: Real seconds one build's loading and checks may take before it is reported as stuck.
BUILD_SECONDS = 20
BAR_WIDTH = 20


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
        if (manifest.root / e.path).exists()
        and importlib.util.find_spec(f"workbook.buildchecks.build{e.number}") is not None
    ]


def build_report(manifest: Manifest, entry: Entry) -> BuildReport:
    """Load one build through the export path and run its visible checks, quietly and
    within `BUILD_SECONDS`: a notebook that does not load or never finishes is reported."""
    checks = checks_for(entry.number)
    path = manifest.root / entry.path
    # The learner's prints would scramble the report: keep them out of it.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            with time_limit(BUILD_SECONDS):
                module = load(path)
                report = BuildReport(entry, tuple(checks.run(module)))
        except WorkbookError as exc:
            report = BuildReport(entry, problem="does not load", detail=str(exc))
        except TimeUp:
            return BuildReport(
                entry,
                problem="never finished",
                detail=f"still running after {BUILD_SECONDS} s: does a loop in your answers"
                " never end?",
            )
    if report.done:
        return report
    return dataclasses.replace(report, notes=tuple(_untagged(path)))


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
        entry, total = report.entry, len(checks_for(report.entry.number).names)
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
        first = next(r for r in todo.results if not r.passed)
        hint = hints_for(todo.entry.number).get(first.name, "")
        lines = [f"Next, in {where}: {MARKS[first.status]} {first.name} [{first.status}]"]
        lines.extend(f"    {text}" for text in first.message.splitlines())
        if hint:
            lines.append(f"Hint: {hint}")
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
