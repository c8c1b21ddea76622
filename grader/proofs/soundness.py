"""`make check` in the instructor's repository: the proof that the workbook is sound.

Its parts (`workbook.commands.parts`): lint and types, the unit tests, the concept notebooks
against their stored outputs (nbval strict) and ARC's reading budgets
(`grader.proofs.notebook_stats`), validity (every solution full marks, every stub zero, every
mutant killed), as root a small class graded as an ordinary user (`grader.proofs.ordinary`;
otherwise "skipped: not root"), and the browser suite; in three lanes at once where the cores allow
(`LANE_CORES`). A part that passed on exactly the inputs it reads says "cached" (``FRESH=1`` runs
all). With
``--submissions DIR`` (``make check SUBMISSIONS=dir [OUT=grades]``) it grades a class instead
(`grader.classes.batch`) and exits 0 once grading finished, whatever the scores, or refuses (one
paragraph, non-zero) where no walls can be raised, unless ``--walls off`` or ``--walls
container`` (``WALLS=off``) says to grade without them. With ``--build 03`` (``make check
BUILD=03``) it runs that build's validity alone, or grades that build alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from grader.classes.reports import FEEDBACK_MODES
from grader.proofs.nobody import skip_reason as ordinary_user_skip
from grader.runtime.sandbox import WALLS_MODES
from grader.suites.loading import has_suite
from workbook.commands.learner_check import BIN, ROOT
from workbook.commands.parts import Part, pytest, run_parts, tracked_files, tree_key
from workbook.shared.manifest import UnknownBuild, load_manifest, pick_builds

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


#: What the validity part does not read: the concept notebooks and the other parts' tests.
NOT_VALIDITY = ("notebooks/", "tests/unit/", "tests/grading/", "tests/browser/", "scripts/")
#: What the concept notebooks' run reads: themselves, the code they import, the settings.
NBVAL = ("notebooks/", "etl/", "workbook/")


#: Cores needed to run the three lanes at once. Each lane keeps about two cores busy (measured
#: on 2 cores: unit tests 383 CPU-s in 200 s, browser 169 in 125 s, validity 99 in 54 s), so on
#: 2 cores they run one after another: at once, they took longer and timed-out probes failed.
LANE_CORES = 6


def instructor_parts(cores: int | None = None) -> list[Part]:
    """The parts, each keyed on what it proves (`workbook.commands.parts.tree_key`): with
    `LANE_CORES` cores or more, in three lanes at once (the unit tests, the browser suite, the rest
    in order); otherwise one after another."""
    cores = cores or os.cpu_count() or 1
    lanes = (0, 1, 2) if cores >= LANE_CORES else (0, 0, 0)
    has = (ROOT / "tests").exists
    chromium = shutil.which(CHROMIUM) or shutil.which("chromium")
    files = tracked_files()
    top = [f for f in files if "/" not in f]
    validity = [f for f in files if not f.startswith(NOT_VALIDITY)]
    nbval = [*top, *(f for f in files if f.startswith(NBVAL))]
    browser = f"chromium={chromium}:{_identity(chromium)}"
    return [
        Part(
            "lint",
            (
                (str(BIN / "ruff"), "check", "."),
                (str(BIN / "ruff"), "format", "--check", "."),
                (sys.executable, "-m", "mypy"),
            ),
            lane=lanes[2],
            key=tree_key("lint", files),
        ),
        # `-p no:nbval`: nbval imports nbformat, 1.3 s a process (rfc3987_syntax builds its
        # grammar), for no unit test.
        Part(
            "unit tests",
            (
                pytest(
                    "tests",
                    "--ignore=tests/browser",
                    "-n",
                    "2",
                    "--dist",
                    "loadfile",
                    "-p",
                    "no:nbval",
                ),
            ),
            lane=lanes[0],
            key=tree_key("unit tests", files, extra=_identity(shutil.which("bwrap"))),
        ),
        Part(
            "concept notebooks (nbval strict)",
            # The plugin times each notebook and holds ARC's reading budgets (it fails the run).
            (pytest("--nbval", "notebooks", "-p", "grader.proofs.notebook_stats"),),
            lane=lanes[2],
            key=tree_key("nbval", [*nbval, "grader/proofs/notebook_stats.py"]),
        ),
        Part(
            "validity (solutions, stubs, mutants)",
            ((sys.executable, "-m", "grader.proofs.suite_validity"),),
            None if (ROOT / "solutions").exists() else "no build notebooks yet",
            lane=lanes[2],
            key=tree_key("validity", validity, extra=_identity(shutil.which("bwrap"))),
        ),
        Part(
            "ordinary user (a class graded as nobody, behind the walls)",
            ((sys.executable, "-m", "grader.proofs.ordinary"),),
            ordinary_user_skip(),
            lane=lanes[2],
            key=tree_key("ordinary user", files, extra=_identity(shutil.which("bwrap"))),
        ),
        Part(
            "browser (JupyterLab in Chromium)",
            (pytest("tests/browser", "-p", "no:randomly"),),
            None
            if chromium and has()
            else "Chromium is not installed (apt-get install chromium), so the browser test"
            " did not run",
            lane=lanes[1],
            key=tree_key("browser", files, extra=browser),
        ),
    ]


def _identity(program: str | None) -> str:
    """A program's path, size and modification time: another build of it is another key."""
    if program is None:
        return "none"
    try:
        stat = os.stat(program)
    except OSError:
        return f"{program}:unreadable"
    return f"{os.path.realpath(program)}:{stat.st_size}:{stat.st_mtime_ns}"


def grade_class_as_handed_in(args: argparse.Namespace) -> int:
    """Stage the class from the layout its LMS gave (a plain folder is graded in place),
    grade it, then write the gradebook exports under OUT/lms/."""
    from grader.classes.class_command import grade_and_report
    from grader.classes.grades import ClassReport
    from grader.classes.layouts import LayoutError, stage
    from grader.exports.lms import LmsError, scores_from_report, write_exports

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

    return grade_and_report(
        staged.folder,
        args.out,
        walls=args.walls,
        after=exports,
        builds=args.build,
        full_feedback=args.feedback == "full",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.proofs.soundness")
    parser.add_argument("--only", help="run only the part whose name starts with this word")
    parser.add_argument("--fresh", action="store_true", help="run every part (FRESH=1)")
    parser.add_argument("--submissions", type=Path, help="grade a class: one folder per learner")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument(
        "--build",
        action="append",
        help="only these builds, e.g. '03' or '03 05' (BUILD=03): their validity, or their grades",
    )
    parser.add_argument(
        "--walls", choices=WALLS_MODES, default="bwrap", help="with --submissions (WALLS=off)"
    )
    parser.add_argument("--layout", default="auto", help="folders, canvas, moodle or git")
    parser.add_argument(
        "--feedback",
        choices=FEEDBACK_MODES,
        default="default",
        help="full: feedback adds each hidden test's call and expected value (FEEDBACK=full)",
    )
    parser.add_argument("--roster", type=Path, help="Canvas's gradebook export (ROSTER=)")
    parser.add_argument("--assignment", help="the gradebook column to fill (ASSIGNMENT=)")
    args = parser.parse_args(argv)
    if args.build:
        builds = ROOT / "builds"
        valid = [e.number for e in load_manifest().graded if has_suite(e.number, builds)]
        try:
            args.build = pick_builds(args.build, valid)
        except UnknownBuild as exc:
            print(exc)
            return 2
    if args.submissions:
        return grade_class_as_handed_in(args)
    if args.build:
        # `make check BUILD=03`: that build's validity alone (its solution, stub and mutants).
        builds = args.build
        command = (
            sys.executable,
            "-m",
            "grader.proofs.suite_validity",
            *(f"--build={b}" for b in builds),
        )
        part = Part(f"validity of build {', '.join(builds)}", (command,))
        return run_parts([part], None)
    return run_parts(instructor_parts(), args.only, fresh=args.fresh)


if __name__ == "__main__":
    sys.exit(main())
