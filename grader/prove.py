"""`make check` in the instructor's repository: the proof that the workbook is sound.

Its parts run in order, timed, through the learner's runner (`workbook.verify.run_parts`): lint and
types, the unit tests, the concept notebooks against their stored outputs (nbval strict),
validity (every solution full marks, every stub zero, every mutant killed), and the browser
suite. With ``--submissions DIR`` (``make check SUBMISSIONS=dir [OUT=grades]``) it grades a
class instead (`grader.batch`) and exits 0 once grading finished, whatever the scores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

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
        Part("unit tests", (pytest("tests", "--ignore=tests/browser"),)),
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
            "browser (JupyterLab in Chromium)",
            (pytest("tests/browser", "-p", "no:randomly"),),
            None
            if chromium and has()
            else "Chromium is not installed (apt-get install chromium), so the browser test"
            " did not run",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.prove")
    parser.add_argument("--only", help="run only the part whose name starts with this word")
    parser.add_argument("--submissions", type=Path, help="grade a class: one folder per learner")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    args = parser.parse_args(argv)
    if args.submissions:
        from grader.batch import grade_and_report

        return grade_and_report(args.submissions, args.out)
    return run_parts(instructor_parts(), args.only)


if __name__ == "__main__":
    sys.exit(main())
