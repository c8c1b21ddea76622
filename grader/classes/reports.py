"""What class grading writes: ``grades.csv``, ``feedback/<learner>.md``, ``summary.md`` and
``summary.csv``, each replaced whole, in a fixed order (learners by folder name, builds and
tests as the manifest lists them).

- ``grades.csv``: ``learner``, one column per graded build, ``total``, ``max``, ``status``
  (``graded``, ``partial`` or ``error``), ``reason`` and ``walls`` (``bwrap``, ``off`` or
  ``container``: how the learners' code was walled in);
- ``feedback/<learner>.md``: per test, passed or not, and the hint; a failed visible check's
  message (its call, what came back, what was expected), and a failed hidden test's result in
  words, or its message too with ``FEEDBACK=full``; the known bug their failures match; never
  the hidden code, never the learner's own output;
- ``summary.md`` and ``summary.csv``: per test, how many of the learners who handed the build
  in failed it, most often wrong first (``summary.md`` leaves out a build nobody handed in);
  in ``summary.md`` also the feedback mode, what to reteach (`grader.classes.reteach`), identical
  submissions and, when there are any, the folders and files that need a look (learners
  nothing could be graded of, zips, what is in the submissions folder and is no learner's).

Learner names, paths and messages are the learners' text: each output escapes them for its format
(`grader.runtime.escape`), and feedback file names come from `grader.runtime.escape.file_names`.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import io
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.classes.cache import replace_file
from grader.classes.grades import BuildGrade, ClassReport, LearnerGrade, one_line
from grader.runtime.cleanup import remove_partials
from grader.runtime.escape import code, csv_cell, fenced, file_names, markdown
from grader.runtime.results import Outcome, SubmissionResult, TestResult

#: How much of a judge's message the feedback shows (lines, characters per line).
MESSAGE_LINES, MESSAGE_WIDTH = 16, 400
#: Room the outputs may need on disk: a feedback file and cached grades per learner (the
#: largest feedback, every message at its cut, is well under this), plus the class files.
BYTES_PER_LEARNER, BYTES_FIXED = 256 * 1024, 4 * 2**20


class OutputFolderError(Exception):
    """OUT cannot hold the outputs (not writable, not a folder, too little room): one line."""


def check_out(out: Path, learners: int) -> None:
    """Make sure `out` can take every output before any grading starts: each folder the
    outputs go to is created and a file written and removed in it; a pinned output name that
    is a folder, or too little free space for `learners`, is refused. Raises
    `OutputFolderError` saying what is wrong; changes nothing else, so a repeat is harmless."""
    folders = (out, out / "feedback", out / ".cache" / "grades")
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            replace_file(folder / ".rit-write-check", "")
            (folder / ".rit-write-check").unlink()
        except OSError as exc:
            raise OutputFolderError(
                f"OUT={out} cannot be written ({folder}: {exc.strerror or exc}): choose another"
                " OUT= or make it writable; nothing was graded."
            ) from None
    for name in ("grades.csv", "summary.md", "summary.csv"):
        if (out / name).is_dir():
            raise OutputFolderError(
                f"OUT={out}: {name} is a folder, so it cannot be replaced: move it away;"
                " nothing was graded."
            )
    stats = os.statvfs(out)
    free = stats.f_bavail * stats.f_frsize
    need = BYTES_FIXED + learners * BYTES_PER_LEARNER
    if free < need:
        raise OutputFolderError(
            f"OUT={out} has {free / 2**20:.1f} MiB free; the outputs of {learners} learner(s)"
            f" may need {need / 2**20:.1f} MiB: free some space or choose another OUT=;"
            " nothing was graded."
        )


def write_outputs(report: ClassReport, out: Path) -> None:
    """grades.csv, feedback/<learner>.md, summary.md and summary.csv, each replaced whole
    unless it is a regular file that already holds exactly that text (a re-run rewrites
    only what changed); feedback of learners no longer in the class is removed."""
    out.mkdir(parents=True, exist_ok=True)
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for folder in (out, feedback):
        remove_partials(folder)  # left by a batch that was killed while writing
    _write(out / "grades.csv", grades_csv(report))
    names = feedback_files(report)
    for learner in report.learners:
        _write(feedback / names[learner.learner], feedback_md(learner, full=report.full_feedback))
    keep = set(names.values())
    for stale in feedback.glob("*.md"):
        if stale.name not in keep:
            stale.unlink()
    rows = summary_rows(report)
    _write(out / "summary.csv", summary_csv(rows))
    _write(out / "summary.md", summary_md(report, rows))


def _write(path: Path, text: str) -> None:
    """`replace_file`, skipped when `path` is a regular file (never a link) holding `text`'s
    bytes already: comparing costs a read, replacing a write and a rename."""
    data = text.encode("utf-8", "backslashreplace")  # as replace_file writes it
    with contextlib.suppress(OSError):
        found = os.lstat(path)
        same = stat.S_ISREG(found.st_mode) and found.st_size == len(data)
        if same and path.read_bytes() == data:  # the size first: a forged file may be huge
            return
    replace_file(path, text)


def feedback_files(report: ClassReport) -> dict[str, str]:
    """Each learner's feedback file name in ``feedback/``: bounded, escaped, never shared."""
    stems = file_names(g.learner for g in report.learners)
    return {learner: f"{stem}.md" for learner, stem in stems.items()}


def grades_csv(report: ClassReport) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    numbers = [e.number for e in report.builds]
    writer.writerow(["learner", *numbers, "total", "max", "status", "reason", "walls"])
    for learner in report.learners:
        scores = {b.entry.number: b.score for b in learner.builds}
        writer.writerow(
            [
                csv_cell(learner.learner),
                *(scores[n] for n in numbers),
                learner.total,
                learner.max,
                learner.status,
                csv_cell(learner.reason),
                report.walls,
            ]
        )
    return buffer.getvalue()


def _message(text: str) -> str:
    lines = text.splitlines() or [""]
    cut = [ln if len(ln) <= MESSAGE_WIDTH else ln[: MESSAGE_WIDTH - 1] + "…" for ln in lines]
    if len(cut) > MESSAGE_LINES:
        cut = [*cut[:MESSAGE_LINES], f"… ({len(cut) - MESSAGE_LINES} more lines)"]
    return "\n".join(cut)


#: A hidden test's result in words, for feedback that keeps the test itself hidden.
RESULT_WORDS: dict[Outcome, str] = {
    Outcome.PASSED: "passed",
    Outcome.WRONG: "it ran and gave a wrong result",
    Outcome.NOT_DONE: "not done yet (a stub, or a name your answer cells do not define)",
    Outcome.UNFINISHED: "it did not finish (it hung, crashed or ran out of time)",
    Outcome.NOT_LOADED: "your answer cells did not load, so it could not run",
    Outcome.VOID: "its report was tampered with, so nothing it said counts",
    Outcome.GRADER_FAULT: "the grader itself failed (not your work: your instructor will regrade)",
}
FEEDBACK_MODES = ("default", "full")


def shown_failure(test: TestResult, hint: str | None, *, full: bool) -> str:
    """What a learner is told of one failed test: a visible check's whole message (they can
    run it themselves), a hidden test's result in words unless `full` (then its message: the
    call, what came back, what was expected), and the hint."""
    text = _message(test.message) if test.visible or full else f"Result: {RESULT_WORDS[test.kind]}."
    return text + (f"\n\nHint: {hint}" if hint else "")


def shown_reason(result: SubmissionResult, text: str, *, full: bool) -> str:
    """`text` (a build's reason), unless it holds a hidden judge's verdict that the feedback
    keeps hidden (no reason is built from one today: this keeps it so)."""
    verdicts = [
        t.message.strip()
        for t in result.tests
        if not t.visible and t.kind is Outcome.WRONG and t.message.strip()
    ]
    if full or not any(v in text for v in verdicts):
        return text
    return f"{result.status}: some tests did not pass (their results are listed below)"


def feedback_md(learner: LearnerGrade, *, full: bool = False) -> str:
    """One learner's feedback; `full` (``FEEDBACK=full``) adds each hidden test's call, what came
    back and what was expected, which by default stay hidden (the assignment can be reused)."""
    out = [f"# Feedback for {markdown(learner.learner)}", ""]
    hidden = (
        "for a hidden test, what it called, what came back and what it expected"
        if full
        else "for a hidden test, its result and a hint (the test itself stays hidden)"
    )
    out.append(
        f"**{learner.total} of {learner.max} points.** Each build below lists its tests. For"
        " each one that did not pass: for a visible check (you can run it in your notebook),"
        f" what it called, what came back and what it expected; {hidden}."
    )
    for build in learner.builds:
        out += _build_md(build, full)
    if learner.reteach:
        out += ["", "## What to look at again", ""]
        out += [f"- {markdown(line)}" for line in learner.reteach]
    if learner.problem or learner.notes:
        out += ["", "## About your folder", ""]
        out += [f"- {markdown(one_line(n, 600))}" for n in [learner.problem, *learner.notes] if n]
    return "\n".join(out) + "\n"


def _build_md(build: BuildGrade, full: bool) -> list[str]:
    """One build's section of the feedback: its score, where it was graded from, why it was
    not graded through, its tests, and what each failure said."""
    entry = build.entry
    out = ["", f"## {entry.number} · {entry.title}: {build.score} of {build.max_score}", ""]
    if build.status == "not submitted":
        out.append(
            f"Not submitted: no `{entry.number}_*.ipynb` in your folder"
            f" (the workbook's is `{entry.path}`)."
        )
        return out
    if build.found.shown:
        out.append(f"Graded from {code(build.found.shown)}.")
    if build.status != "graded":
        why = build.found.problem or shown_reason(build.result, build.result.reason, full=full)
        why = one_line(why, 600)
        out += ["", f"**{build.status}**: " + markdown(why)]
    out += ["", "| | test | points |", "|---|---|---|"]
    for test in build.result.tests:
        mark = "✓" if test.passed else "✗"
        seen = "" if test.visible else " (hidden)"
        out.append(f"| {mark} | `{test.name}`{seen} | {test.points} of {test.max_points} |")
    return out + _failures_md(build, full)


def _failures_md(build: BuildGrade, full: bool) -> list[str]:
    """What each failed test of `build` said, with its hint; when they all failed for the
    build's one reason (it did not load), the hints alone."""
    entry = build.entry
    failed = [t for t in build.result.tests if not t.passed]
    shared = build.result.status == "error" and all(
        t.message == build.result.reason for t in failed
    )
    out: list[str] = []
    if failed and not shared:
        hints = {t.name: t.hint for t in entry.every_test}
        for test in failed:
            out += ["", f"### ✗ `{test.name}` ({test.points} of {test.max_points})", ""]
            told = shown_failure(test, None, full=full)
            out.append(fenced(told) if test.visible or full else told)
            if hints.get(test.name):
                out += ["", f"Hint: {hints[test.name]}"]
    elif failed:
        out += ["", "Every test above failed for that one reason. Start with the hints:"]
        for spec in entry.every_test:
            out.append(f"- `{spec.name}`: {spec.hint}")
    return out


@dataclass(frozen=True)
class SummaryRow:
    """One test over the learners who handed its build in. A failure is *wrong* (the code ran
    and gave the wrong answer, hung or crashed: what to reteach), *not done* (a stub, a
    missing name) or *broken* (the build did not load, so nothing of it ran)."""

    build: str
    test: str
    points: int
    visible: bool
    submitted: int
    passed: int
    wrong: int
    not_done: int
    broken: int
    common: str
    common_count: int

    @property
    def failed(self) -> int:
        return self.submitted - self.passed


def summary_rows(report: ClassReport) -> list[SummaryRow]:
    """Per test: most often wrong first, then most often not done, then manifest order."""
    ranked: list[tuple[int, int, int, SummaryRow]] = []
    order = 0
    for entry in report.builds:
        handed_in = [
            b
            for learner in report.learners
            for b in learner.builds
            if b.entry.number == entry.number and b.status != "not submitted"
        ]
        for spec in entry.every_test:
            outcomes = [(b, b.result.test(spec.name)) for b in handed_in]
            failing = [(b, r) for b, r in outcomes if not r.passed]
            broken = [r for b, r in failing if b.result.status == "error"]
            not_done = [r for b, r in failing if b.result.status != "error" and _not_done(r)]
            wrong = [r for b, r in failing if b.result.status != "error" and not _not_done(r)]
            firsts = collections.Counter(_first_line(r) for r in wrong)
            common, count = min(firsts.items(), key=lambda kv: (-kv[1], kv[0]), default=("", 0))
            row = SummaryRow(
                build=entry.number,
                test=spec.name,
                points=spec.points,
                visible=spec.visible,
                submitted=len(outcomes),
                passed=len(outcomes) - len(failing),
                wrong=len(wrong),
                not_done=len(not_done),
                broken=len(broken),
                common=common,
                common_count=count,
            )
            ranked.append((-row.wrong, -row.not_done, order, row))
            order += 1
    return [row for *_, row in sorted(ranked, key=lambda t: t[:3])]


def _not_done(result: TestResult) -> bool:
    return result.kind is Outcome.NOT_DONE


def _first_line(result: TestResult) -> str:
    """The line that says most about a failure: what came back, as the message's ``got:``
    line says it, when the judge said; else the message's first line."""
    if result.got is not None:
        line = "got: " + (result.got.splitlines() or [""])[0]
    else:
        line = (result.message.splitlines() or [""])[0]
    return one_line(line, MESSAGE_WIDTH)


def summary_csv(rows: Sequence[SummaryRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "build",
            "test",
            "points",
            "visible",
            "submitted",
            "passed",
            "wrong",
            "not_done",
            "broken",
            "most_common_wrong",
        ]
    )
    for row in rows:
        writer.writerow(
            [
                row.build,
                row.test,
                row.points,
                "yes" if row.visible else "no",
                row.submitted,
                row.passed,
                row.wrong,
                row.not_done,
                row.broken,
                csv_cell(row.common),
            ]
        )
    return buffer.getvalue()


def summary_md(report: ClassReport, rows: Sequence[SummaryRow]) -> str:
    learners = report.learners
    out = [f"# Class summary (walls: {report.walls})", ""]
    out.append(
        f"{len(learners)} learners; graded builds: {', '.join(e.number for e in report.builds)}."
    )
    if report.skipped_builds:
        out.append(
            f"Not graded (graded tests in the manifest but no hidden suite):"
            f" {', '.join(report.skipped_builds)}."
        )
    out.append(
        "Feedback: full (each hidden test's call, what came back and what was expected)."
        if report.full_feedback
        else "Feedback: default (a hidden test's name, points, result and hint; its call and"
        " expected value stay hidden; FEEDBACK=full shows them)."
    )
    out += [
        "",
        "## Builds",
        "",
        "| build | handed in | full marks | errors | mean score |",
        "|---|---|---|---|---|",
    ]
    for entry in report.builds:
        grades = [b for g in learners for b in g.builds if b.entry.number == entry.number]
        handed = [b for b in grades if b.status != "not submitted"]
        full = sum(b.score == b.max_score for b in handed)
        errors = sum(b.status == "error" for b in handed)
        mean = sum(b.score for b in handed) / len(handed) if handed else 0.0
        out.append(
            f"| {entry.number} | {len(handed)} of {len(grades)} | {full} | {errors} |"
            f" {mean:.1f} of {entry.max_points} |"
        )
    out += [
        "",
        "## Tests, most often wrong first",
        "",
        "Over the learners who handed the build in. *Wrong*: the code ran and gave a wrong"
        " answer, hung or crashed; that is what to reteach. *Not done*: still a stub."
        " *Broken*: the build did not load, so none of it ran.",
        "",
        "| build | test | wrong | not done | broken | passed | most common wrong result |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if not row.submitted:
            continue  # nobody handed the build in: the builds table says so
        seen = "" if row.visible else " (hidden)"
        common = markdown(f"{row.common_count}× {row.common}") if row.wrong else ""
        out.append(
            f"| {row.build} | `{row.test}`{seen} | {row.wrong} | {row.not_done} | {row.broken}"
            f" | {row.passed} of {row.submitted} | {common} |"
        )
    out += _reteach(report)
    groups = identical_groups(report)
    out += ["", "## Identical submissions", ""]
    if groups:
        out.append(
            "The same setup and answer cells, character for character (untouched stubs left out):"
        )
        out.append("")
        for number, names in groups:
            out.append(f"- {number}: {', '.join(markdown(n) for n in names)}")
    else:
        out.append("None (untouched stubs left out).")
    out += _needs_a_look(report)
    return "\n".join(out) + "\n"


def _reteach(report: ClassReport) -> list[str]:
    """The known bugs the class's failures match (`grader.classes.reteach`), most learners first."""
    out = ["", "## What to reteach", ""]
    if not report.reteach:
        return [*out, "No learner's failures match a known bug (mutants.toml)."]
    out += [
        "Each learner's failed tests, matched to the known bug (`mutants.toml`) whose failures"
        " overlap them most (Jaccard at least 0.5); ties name each bug.",
        "",
        "| build | known bug | learners |",
        "|---|---|---|",
    ]
    out += [f"| {b} | {markdown(words)} | {n} |" for b, words, n in report.reteach]
    return out


def _needs_a_look(report: ClassReport) -> list[str]:
    """Learners with nothing graded or something not read, entries of the submissions folder
    that are no learner's, and the batch's own notes; nothing at all when there are none."""
    files = feedback_files(report)
    lines = []
    for learner in report.learners:
        renamed = files[learner.learner] != f"{learner.learner}.md"
        if learner.needs_a_look or renamed:
            line = f"- {markdown(learner.learner)}"
            if renamed:
                line += f" (feedback: {code('feedback/' + files[learner.learner])})"
            if learner.reason:
                line += ": " + markdown(f"{learner.status}: {one_line(learner.reason, 600)}")
            lines.append(line)
    lines += [f"- {markdown(name)}: {markdown(why)}" for name, why in report.not_graded]
    lines += [f"- {markdown(note)}" for note in report.notes]
    if not lines:
        return []
    return ["", "## Folders and files that need a look", "", *lines]


def identical_groups(report: ClassReport) -> list[tuple[str, list[str]]]:
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for learner in report.learners:
        for build in learner.builds:
            number = build.entry.number
            if build.source_id and build.source_id != report.stub_ids.get(number):
                groups[(number, build.source_id)].append(learner.learner)
    return sorted(
        ((number, sorted(names)) for (number, _), names in groups.items() if len(names) > 1),
        key=lambda g: (g[0], g[1]),
    )
