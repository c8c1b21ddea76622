"""The class-grading command: ``make check SUBMISSIONS=dir [OUT=grades]`` (through
`grader.proofs.soundness`) or ``python -m grader.classes.class_command``: refuse what cannot be
graded (with the reason and what to do), grade with `grader.classes.batch.grade_class`, and
print where the outputs went. Running it twice on the same class prints the same lines.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from grader.classes.grades import ClassReport, LearnerGrade
from grader.classes.reports import OutputFolderError
from grader.runtime.escape import shown
from grader.runtime.sandbox import (
    WALLS_MODES,
    WallsMode,
    refusal,
    walls_problem,
)
from workbook.shared.manifest import (
    UnknownBuild,
    repo_root,
)

__all__ = ["ClassReport", "LearnerGrade", "grade_and_report", "grade_class", "main"]
from grader.classes.batch import grade_class


def main(argv: Sequence[str] | None = None, *, stdout: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.classes.class_command", description=__doc__
    )
    parser.add_argument("submissions", type=Path, help="one folder per learner")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    parser.add_argument(
        "--walls",
        choices=WALLS_MODES,
        default="bwrap",
        help="bwrap (default; refuses where it cannot), off, or container (one per container)",
    )
    args = parser.parse_args(argv)
    return grade_and_report(
        args.submissions, args.out, workers=args.workers, stdout=stdout, walls=args.walls
    )


def grade_and_report(
    submissions: Path,
    out: Path,
    *,
    workers: int | None = None,
    stdout: Callable[[str], None] = print,
    walls: WallsMode = "bwrap",
    after: Callable[[ClassReport], list[str]] | None = None,
    builds: Sequence[str] | None = None,
    full_feedback: bool = False,
) -> int:
    """Grade the class, print where the outputs are; 0 once grading finished, 2 when the
    submissions folder is missing, the output folder is inside it, either holds the
    repository, or walls were asked for (the default) and cannot be raised here (one
    paragraph: what is missing, how to install it, how to grade without)."""
    problem = _cannot_grade(submissions, out, walls)
    if problem is not None:
        stdout(problem)
        return 2
    try:
        report = grade_class(
            submissions,
            out,
            workers=workers,
            walls=walls,
            builds=builds,
            full_feedback=full_feedback,
        )
    except (OutputFolderError, UnknownBuild) as exc:
        stdout(shown(str(exc)))
        return 2
    except OSError as exc:  # OUT failed while the outputs were written (it filled up)
        stdout(shown(f"OUT={out} could not be written: {exc}; run again once it can be."))
        return 2
    for line in _report_lines(report, out, walls):
        stdout(line)
    for line in after(report) if after is not None else []:  # e.g. the LMS exports
        stdout("  " + shown(line))
    return 0


def _cannot_grade(submissions: Path, out: Path, walls: WallsMode) -> str | None:
    """Why the class cannot be graded from `submissions` into `out` behind `walls`, in one
    paragraph; None when it can."""
    if walls == "bwrap" and (problem := walls_problem(sys.executable)) is not None:
        return refusal(problem)
    if not submissions.is_dir():
        return f"SUBMISSIONS={submissions}: no such folder (one subfolder per learner)."
    if not os.access(submissions, os.R_OK | os.X_OK):
        return f"SUBMISSIONS={submissions} cannot be read: give this user read access to it."
    sub, dest = submissions.resolve(), out.resolve()
    if sub == repo_root() or sub in repo_root().parents:
        return f"SUBMISSIONS={submissions} holds the repository: give the folder of the class."
    if dest == repo_root() or dest in repo_root().parents:
        return f"OUT={out} holds the repository: choose a folder of its own (default grades/)."
    if dest == sub or sub in dest.parents:
        return f"OUT={out} is inside SUBMISSIONS={submissions}: it would be graded as a learner."
    return None


def _report_lines(report: ClassReport, out: Path, walls: WallsMode) -> list[str]:
    """What a finished class grading prints: how long, behind which walls, what was graded,
    what needs a look, and where the outputs are."""
    learners = len(report.learners)
    per = report.seconds / learners if learners else 0.0
    lines = [
        f"Graded {learners} learner(s) in {report.seconds:.1f} s ({per:.2f} s per learner):"
        f" {report.graded} notebook(s) run, {report.from_cache} from the cache.",
        f"  {report.isolation.summary if report.isolation else 'walls: ' + walls}",
    ]
    if report.isolation is not None:
        iso = report.isolation
        for label, text in (
            ("processes", iso.pids_text),
            ("network", iso.network_text),
            ("files", iso.filesystem_text),
            ("user", iso.user_text),
        ):
            lines.append(f"  {label:<10} {text}")
    if report.skipped_builds:
        lines.append("  not graded (no hidden suite yet): " + ", ".join(report.skipped_builds))
    lines.append("  " + graded_line(report))
    looks = [g for g in report.learners if g.needs_a_look]
    if looks or report.not_graded or report.notes:
        lines.append(
            f"  {len(looks) + len(report.not_graded)} folder(s) or file(s) need a look:"
            " listed at the end of summary.md"
        )
        lines += ["  " + shown(note) for note in report.notes]
    lines.append(f"Wrote {out}/grades.csv, {out}/feedback/ ({learners} files), {out}/summary.md.")
    return lines


def graded_line(report: ClassReport) -> str:
    """What was graded, in words: "3 learners graded on build 03", then any partial or error."""
    numbers = [e.number for e in report.builds]
    on = ("build " if len(numbers) == 1 else "builds ") + ", ".join(numbers)
    statuses = collections.Counter(g.status for g in report.learners)
    graded = statuses["graded"]
    line = f"{graded} learner{'' if graded == 1 else 's'} graded on {on}"
    if statuses["partial"]:
        line += f"; {statuses['partial']} partial (a build missing or not run to the end)"
    if statuses["error"]:
        line += f"; {statuses['error']} with nothing graded (see summary.md)"
    return line


if __name__ == "__main__":
    sys.exit(main())
