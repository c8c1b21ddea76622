"""Gradescope: the autograder bundle (``make autograder``) and what it runs per submission.

`build_bundle(out)` writes ``OUT/autograder.zip``: ``setup.sh`` and ``run_autograder`` at its
top, then the grader, the hidden suites and reference seams (``builds/*/hidden``), the manifest,
``etl``, ``workbook``, the exercises (the stubs, so an untouched one is known), the solutions
(the reference a learner's own tests must pass on: `grader.learner_tests.wheats`) and the learner's
requirements (`grader.exports.classroom.learner_requirements`). The same repository gives the same
bytes. The bundle is the instructor's: it holds what a learner must never read, which is why
the learner's code is walled in wherever the container allows it.

Gradescope unzips the bundle into ``/autograder/source``, runs ``setup.sh`` once while it builds the
image, then ``run_autograder`` once per submission in a fresh container. That runs ``python -m
grader.exports.gradescope run``: the submission (``$AUTOGRADER_ROOT/submission``, default
``/autograder``) is graded as a class of one by `grader.classes.batch.grade_class`, behind
bubblewrap's walls where the container lets them rise, else in ``WALLS=container`` mode (the
container is then the only wall), and ``results/results.json`` is written in Gradescope's format:
the total as ``score``, one test per graded test of the bundle's builds (visible ones ``visible``,
hidden ones ``after_published``, so a learner sees them only once grades are published), the
submission-wide ``output``, ``visibility``, ``stdout_visibility`` (hidden: the log is the
instructor's) and ``execution_time``. A failed hidden test's output is its result in words and its
hint; a bundle made with ``FEEDBACK=full`` adds its call, what came back and what was expected.
``make autograder BUILD=03`` makes a bundle that grades build 03 alone (``grading.json`` in the
bundle says which). A grading that fails still writes a valid results file, scored zero, saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grader.classes.cache import replace_file
from grader.classes.grades import ClassReport, one_line
from grader.classes.reports import FEEDBACK_MODES, shown_failure, shown_reason
from grader.classes.zips import write_zip
from grader.exports.classroom import learner_requirements
from grader.runtime.protocol import WallsMode
from grader.suites.loading import has_suite
from workbook.shared.manifest import UnknownBuild, load_manifest, pick_builds, repo_root

#: What the bundle holds besides its two scripts, relative to the repository.
BUNDLE = (
    "grader",
    "etl",
    "workbook",
    "builds",
    "exercises",
    "solutions",
    "workbook.toml",
    "pyproject.toml",
    "LICENSE",
)
#: Never bundled from those folders: caches, checkpoints, backups, anything hidden.
SKIPPED_PARTS = frozenset({"__pycache__", "node_modules"})
DEFAULT_ROOT = "/autograder"
#: The walls mode a container gives: one submission per disposable container. Used only where
#: bubblewrap cannot raise its walls inside the container (`walls_here`).
WALLS: WallsMode = "container"
#: How much of one test's message Gradescope shows.
OUTPUT_CHARS = 4000

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder's image: the grader's
# interpreter (3.11 or newer), bubblewrap, and the packages grading needs, in /autograder/venv.
set -euo pipefail
cd /autograder/source
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends bubblewrap ca-certificates
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    PYTHON=python3
    apt-get install -y --no-install-recommends python3-venv
else  # Ubuntu 22.04 ships 3.10
    PYTHON=python3.11
    apt-get install -y --no-install-recommends python3.11 python3.11-venv
fi
"$PYTHON" -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt
# Graders may drop to another user: the interpreter must stay readable to it.
chmod -R a+rX /autograder/venv
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this once per submission, in a fresh container: grade
# $AUTOGRADER_ROOT/submission (default /autograder) and write results/results.json.
# AUTOGRADER_PYTHON picks the interpreter (default: the one setup.sh made).
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
cd "$ROOT/source" || exit 1
# The bundle's own packages, for the grader and every interpreter it starts.
export PYTHONPATH="$ROOT/source${PYTHONPATH:+:$PYTHONPATH}"
export WALLS=container
exec "$PYTHON" -m grader.exports.gradescope run --root "$ROOT"
"""


def bundle_files(root: Path | None = None) -> dict[str, str | bytes]:
    """Name inside the bundle -> content: the two scripts, then `BUNDLE` (files only, no
    caches, nothing hidden, no links), the requirements cut to the learner's."""
    root = root or repo_root()
    files: dict[str, str | bytes] = {"setup.sh": SETUP, "run_autograder": RUN}
    for name in BUNDLE:
        path = root / name
        paths = [path] if path.is_file() else sorted(path.rglob("*")) if path.is_dir() else []
        for item in paths:
            relative = item.relative_to(root)
            odd = any(p.startswith(".") or p in SKIPPED_PARTS for p in relative.parts)
            if not odd and item.is_file() and not item.is_symlink() and item.suffix != ".pyc":
                files[relative.as_posix()] = item.read_bytes()
    requirements = (root / "requirements.txt").read_text(encoding="utf-8")
    files["requirements.txt"] = learner_requirements(requirements)
    return files


#: In the bundle: what `run` grades (``builds``: None for all) and how much feedback it gives.
SETTINGS = "grading.json"


def build_bundle(
    out: Path,
    root: Path | None = None,
    *,
    builds: Sequence[str] | None = None,
    feedback: str = "default",
) -> Path:
    """Write ``out/autograder.zip`` (replaced whole) and return its path; it grades `builds`
    alone (None: every graded build) with `feedback` (``default`` or ``full``)."""
    path = out / "autograder.zip"
    files = bundle_files(root)
    settings = {"builds": list(builds) if builds else None, "feedback": feedback}
    files[SETTINGS] = json.dumps(settings, sort_keys=True) + "\n"
    write_zip(path, files, executable=("setup.sh", "run_autograder"))
    return path


def settings(source: Path) -> tuple[list[str] | None, bool]:
    """The bundle's builds and whether its feedback is full (a bundle without the file: all
    builds, default feedback)."""
    try:
        data = json.loads((source / SETTINGS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, False
    return data.get("builds"), data.get("feedback") == "full"


# ---------------------------------------------------------------------------------------
# At run time, inside Gradescope's container.


def walls_here() -> WallsMode:
    """``bwrap`` when bubblewrap can raise its walls in this container (setup.sh installs it),
    else ``container``. The container is disposable, but without walls the learner's code
    shares it with the hidden tests and the results folder; walls keep those out of reach
    wherever the container's seccomp and AppArmor profiles allow new namespaces."""
    from grader.runtime import sandbox

    return "bwrap" if sandbox.walls_problem(sys.executable) is None else WALLS


def grade_submission(
    submission: Path,
    out: Path,
    walls: WallsMode = WALLS,
    builds: Sequence[str] | None = None,
) -> ClassReport:
    """Grade `submission` (one learner's files) as a class of one into `out`, on `builds`
    alone when given. No reteach: the known bugs' signatures would cost a minute a learner."""
    from grader.classes.batch import grade_class

    klass = out / "class"
    shutil.copytree(submission, klass / "submission", symlinks=True)
    return grade_class(klass, out / "grades", walls=walls, builds=builds, reteach=False)


def results(report: ClassReport, seconds: float, *, full: bool = False) -> dict[str, Any]:
    """Gradescope's ``results.json`` for the one learner of `report`; a hidden test's output
    is its result in words and its hint, unless `full` adds its call and expected value."""
    learner = report.learners[0]
    tests = []
    seen = seen_max = 0
    for build in learner.builds:
        hints = {t.name: t.hint for t in build.entry.every_test}
        for i, test in enumerate(build.result.tests, start=1):
            output = ""
            if not test.passed:
                output = shown_failure(test, hints.get(test.name), full=full)
            if test.visible:
                seen, seen_max = seen + test.points, seen_max + test.max_points
            tests.append(
                {
                    "name": f"{build.entry.number} {test.name}",
                    "number": f"{build.entry.number}.{i}",
                    "score": test.points,
                    "max_score": test.max_points,
                    "status": "passed" if test.passed else "failed",
                    "output": _cut(output),
                    "visibility": "visible" if test.visible else "after_published",
                }
            )
    hidden = sum(1 for t in tests if t["visibility"] != "visible")
    summary = [
        f"Visible checks: {seen} of {seen_max} points. The {hidden} hidden tests are shown"
        " once your instructor publishes the grades."
    ]
    reasons = [
        shown_reason(b.result, f"{b.entry.number}: {b.found.problem or b.result.reason}", full=full)
        for b in learner.builds
        if b.status != "graded"
    ]
    summary += [f"- {one_line(r, 300)}" for r in [learner.problem, *reasons, *learner.notes] if r]
    return {
        "score": learner.total,
        "execution_time": round(seconds),
        "output": "\n".join(summary),
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"max_score": learner.max, "status": learner.status},
    }


def _cut(text: str) -> str:
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


def failed(reason: str, seconds: float) -> dict[str, Any]:
    """The results of a grading that did not finish: zero, and why, for the learner too."""
    return {
        "score": 0,
        "execution_time": round(seconds),
        "output": f"The autograder itself failed ({reason}); this is not about your work."
        " Your instructor has the log and will regrade.",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }


def run(root: Path) -> int:
    """Grade ``root/submission`` and write ``root/results/results.json``; 0 once written."""
    start = time.perf_counter()
    (root / "results").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rit-gradescope-") as tmp:
        try:
            submission = root / "submission"
            if not submission.is_dir():
                submission.mkdir(parents=True)
            walls = walls_here()
            print(f"walls: {walls}")
            builds, full = settings(Path(__file__).resolve().parents[2])
            graded = grade_submission(submission, Path(tmp), walls, builds)
            data = results(graded, time.perf_counter() - start, full=full)
            data["extra_data"]["walls"] = walls
        except Exception as exc:  # the learner still gets a valid page that says what happened
            traceback.print_exc(file=sys.stdout)
            # The exception text may name the hidden suite: the learner gets its kind, the log all.
            data = failed(type(exc).__name__, time.perf_counter() - start)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    replace_file(root / "results" / "results.json", text)
    print(f"score {data['score']}; results in {root / 'results' / 'results.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.exports.gradescope", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    bundle = commands.add_parser("bundle", help="write OUT/autograder.zip")
    bundle.add_argument("--out", type=Path, default=Path("autograder"))
    bundle.add_argument("--build", action="append", help="only these builds (BUILD=03)")
    bundle.add_argument("--feedback", choices=FEEDBACK_MODES, default="default")
    grade = commands.add_parser("run", help="grade ROOT/submission (inside Gradescope)")
    grade.add_argument("--root", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "bundle":
        builds = None
        if args.build:
            valid = [e.number for e in load_manifest().graded if has_suite(e.number)]
            try:
                builds = pick_builds(args.build, valid)
            except UnknownBuild as exc:
                print(exc)
                return 2
        path = build_bundle(args.out, builds=builds, feedback=args.feedback)
        on = f"build {', '.join(builds)}" if builds else "every graded build"
        print(
            f"Wrote {path} ({path.stat().st_size // 1024} KiB; {on}, {args.feedback} feedback):"
            " upload it as the autograder."
        )
        return 0
    return run(args.root or Path(os.environ.get("AUTOGRADER_ROOT", DEFAULT_ROOT)))


if __name__ == "__main__":
    sys.exit(main())
