"""`make check` in the instructor's repository: the proof that the workbook is sound.

Its parts run in order, timed, through the learner's runner (`workbook.verify.run_parts`): lint and
types, the unit tests, the concept notebooks against their stored outputs (nbval strict),
validity (every solution full marks, every stub zero, every mutant killed), and the browser
suite. With ``--submissions DIR`` (``make check SUBMISSIONS=dir [OUT=grades]``) it grades a
class instead (`grader.batch`) and exits 0 once grading finished, whatever the scores, or
refuses (one paragraph, non-zero) where no walls can be raised, unless ``--walls off`` or
``--walls container`` (``WALLS=off``) says to grade without them. As root it also grades a
small class as an ordinary user (`grader.ordinary`); otherwise that part says "skipped: not
root". With ``--build 03`` (``make check BUILD=03``) it runs that build's validity alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from grader.nobody import skip_reason as ordinary_user_skip
from grader.sandbox import WALLS_MODES
from workbook.verify import BIN, ROOT, Part, pytest, run_parts

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def instructor_parts() -> list[Part]:
    has = (ROOT / "tests").exists
    chromium = shutil.which(CHROMIUM) or shutil.which("chromium")
    return [
        Part(
            "lint",
            (
                (str(BIN / "ruff"), "check", "."),
                (str(BIN / "ruff"), "format", "--check", "."),
                (sys.executable, "-m", "mypy"),
            ),
        ),
        # Two processes, a file each at a time (module fixtures stay whole): most tests wait
        # on children, so one process used 0.7 of a core; measured 231 s -> 150 s.
        Part(
            "unit tests",
            (pytest("tests", "--ignore=tests/browser", "-n", "2", "--dist", "loadfile"),),
        ),
        Part("concept notebooks (nbval strict)", (pytest("--nbval", "notebooks"),)),
        Part(
            "validity (solutions, stubs, mutants)",
            (
                (sys.executable, "-m", "grader.validity"),
                # The solutions run top to bottom (outputs not compared: that is nbval lax).
                pytest("--nbval-lax", "solutions"),
            ),
            None if (ROOT / "solutions").exists() else "no build notebooks yet",
        ),
        Part(
            "ordinary user (a class graded as nobody, behind the walls)",
            ((sys.executable, "-m", "grader.ordinary"),),
            ordinary_user_skip(),
        ),
        Part(
            "browser (JupyterLab in Chromium)",
            (pytest("tests/browser", "-p", "no:randomly"),),
            None
            if chromium and has()
            else "Chromium is not installed (apt-get install chromium), so the browser test"
            " did not run",
        ),
    ]


def grade_class_as_handed_in(args: argparse.Namespace) -> int:
    """Stage the class from the layout its LMS gave (a plain folder is graded in place),
    grade it, then write the gradebook exports under OUT/lms/."""
    from grader.batch import grade_and_report
    from grader.grades import ClassReport
    from grader.layouts import LayoutError, stage
    from grader.lms import LmsError, scores_from_report, write_exports

    try:
        staged = stage(args.submissions, args.layout, into=args.out / ".staged")
    except LayoutError as exc:
        print(exc)
        return 2
    for note in staged.notes:
        print(f"  {note}")

    def exports(report: ClassReport) -> list[str]:
        try:
            done = write_exports(
                args.out,
                scores_from_report(report),
                staged=staged,
                roster=args.roster,
                assignment=args.assignment,
            )
        except LmsError as exc:
            return [str(exc)]
        return [f"Wrote {args.out}/lms/ ({len(done.files)} files)", *done.notes]

    return grade_and_report(staged.folder, args.out, walls=args.walls, after=exports)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.prove")
    parser.add_argument("--only", help="run only the part whose name starts with this word")
    parser.add_argument("--submissions", type=Path, help="grade a class: one folder per learner")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--build", action="append", help="only this build's validity (BUILD=03)")
    parser.add_argument(
        "--walls", choices=WALLS_MODES, default="bwrap", help="with --submissions (WALLS=off)"
    )
    parser.add_argument("--layout", default="auto", help="folders, canvas, moodle or git")
    parser.add_argument("--roster", type=Path, help="Canvas's gradebook export (ROSTER=)")
    parser.add_argument("--assignment", help="the gradebook column to fill (ASSIGNMENT=)")
    args = parser.parse_args(argv)
    if args.submissions:
        return grade_class_as_handed_in(args)
    if args.build:
        # `make check BUILD=03`: that build's validity alone (its solution, stub and mutants).
        builds = [number.zfill(2) for number in args.build]
        command = (sys.executable, "-m", "grader.validity", *(f"--build={b}" for b in builds))
        part = Part(f"validity of build {', '.join(builds)}", (command,))
        return run_parts([part], None)
    return run_parts(instructor_parts(), args.only)


if __name__ == "__main__":
    sys.exit(main())
