"""`make release`: the learner copy, built from the committed tree, and the proof that it is safe.

The copy holds the concept notebooks, the exercises (plus a pristine copy of each for
`make reset`), the visible tests, the packages, and a learner README and Makefile. It is built
from ``HEAD`` (`git archive`), never from the working tree, and refused outside a git checkout
or while ``exercises/`` differs from the committed stubs: an instructor's half-solved exercise
must never ship as the stubs (nor be "restored" by `make reset`). It never holds a solution, a
hidden probe or judge, a mutant, a reference seam or a quiz answer: `grader.shipping.leakscan.leaks`
proves it, and `stub_grades` proves that the instructor's grader gives the copy's exercises and
their pristine copies zero on every graded test. Building it twice into the same folder gives the
same files: the folder is replaced whole.

The manifest ships as it is, hidden tests included: their names, points and hints are the
grading's public contract (the feedback shows them too), and none holds code or an expected
value. `make progress` and the self-checks run the visible checks only.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from grader.exports.classroom import classroom_workflow, learner_requirements
from grader.shipping.leakscan import (
    SECRET_DIRS,
    answer_forms,
    leaks,
    secret_definitions,
    secret_values,
    secrets,
)
from workbook.commands.reset import PRISTINE
from workbook.shared import buildfolder
from workbook.shared.manifest import load_manifest, repo_root

if TYPE_CHECKING:
    from grader.runtime.runner import Runner

# The leak scan lives in `grader.shipping.leakscan`; its entry points stay importable from here.
__all__ = ["PRISTINE", "build", "committed", "leaks", "main", "secrets", "stub_grades"]

#: What ships, relative to the repo root. Folders ship whole, minus `IGNORED`; of ``builds``,
#: only what `workbook.shared.buildfolder.shipped` lists (never a ``hidden/`` folder).
SHIP = (
    "README.md",
    "LICENSE",
    "Makefile",
    "requirements.txt",
    "runtime.txt",
    "pyproject.toml",
    "workbook.toml",
    ".gitignore",
    "notebooks",
    "exercises",
    "etl",
    "workbook",
    "scripts/make_launches.py",
    "builds",
)
IGNORED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info", ".backups"
)
MAKEFILE_CUT = "# ---- instructor only:"
README_CUT = re.compile(r"<!-- instructor -->.*?<!-- /instructor -->\n?", re.DOTALL)


def build(out: Path, root: Path | None = None) -> list[Path]:
    """Write the learner copy of `root`'s committed tree into `out` (replacing it) and return
    the files written. Raises `SystemExit` with the reason where it refuses (`committed`)."""
    root = root or repo_root()
    _refuse_to_clobber(out, root)
    with tempfile.TemporaryDirectory(prefix="rit-release-") as scratch:
        tree = committed(root, Path(scratch))
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name in SHIP:
            src, dst = tree / name, out / name
            if not src.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if name == "builds":  # its visible half only (`workbook.shared.buildfolder.shipped`)
                for path in buildfolder.shipped(tree):
                    (out / path.relative_to(tree)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, out / path.relative_to(tree))
            elif src.is_dir():
                shutil.copytree(src, dst, ignore=IGNORED)
            else:
                shutil.copy2(src, dst)
    makefile = (out / "Makefile").read_text(encoding="utf-8")
    (out / "Makefile").write_text(learner_makefile(makefile))
    # The learner's install is the learner's: no browser driver, linter or type checker.
    requirements = (out / "requirements.txt").read_text(encoding="utf-8")
    (out / "requirements.txt").write_text(learner_requirements(requirements), encoding="utf-8")
    workflow = out / ".github" / "workflows" / "classroom.yml"
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(classroom_workflow(load_manifest(out / "workbook.toml")), encoding="utf-8")
    readme = (out / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(README_CUT.sub("", readme))
    for exercise in sorted((out / "exercises").glob("*.ipynb")):
        pristine = out / PRISTINE / "exercises" / exercise.name
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(exercise, pristine)
    return sorted(p for p in out.rglob("*") if p.is_file())


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)


def committed(root: Path, scratch: Path) -> Path:
    """`root`'s tree as committed at ``HEAD``, exported into `scratch`. Refuses (`SystemExit`,
    saying why and what to do) outside a git checkout, and when ``exercises/`` differs from
    ``HEAD`` in any way (changed, deleted or untracked files): those are the stubs shipped."""
    if _git(root, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0:
        raise SystemExit(
            f"refusing to release: {root} is not a git checkout with a commit. `make release`"
            " builds the learner copy from the committed tree."
        )
    status = _git(root, "status", "--porcelain", "--untracked-files=all", "--", "exercises")
    if status.stdout.strip():
        changed = "\n".join(f"  {line}" for line in status.stdout.decode().splitlines()[:10])
        raise SystemExit(
            "refusing to release: exercises/ differs from the committed stubs, and the copy ships"
            f" exactly those:\n{changed}\nCommit the stubs you mean to ship, or put them back"
            " (git restore exercises/, and delete any file there that git does not track)."
        )
    prefix = _git(root, "rev-parse", "--show-prefix").stdout.decode().strip()
    archive = _git(root, "archive", "--format=tar", f"HEAD:{prefix}" if prefix else "HEAD")
    if archive.returncode != 0:
        raise SystemExit(f"refusing to release: git archive failed: {archive.stderr.decode()}")
    tar = scratch / "head.tar"
    tar.write_bytes(archive.stdout)
    tree = scratch / "tree"
    with tarfile.open(tar) as opened:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            opened.extractall(tree, filter="data")
        else:  # our own HEAD's archive: no member escapes `tree`
            opened.extractall(tree)
    return tree


def learner_makefile(makefile: str) -> str:
    """The instructor's Makefile without its instructor-only part, and with `make check`
    described as what it is in the learner copy (no class grading there)."""
    text = makefile.split(MAKEFILE_CUT)[0].rstrip() + "\n"
    text = re.sub(r"^(\.PHONY:.*?) release\b", r"\1", text, flags=re.MULTILINE)
    return re.sub(
        r"^(check:[^#\n]*## ).*$",
        r"\1Check your own work, a line per build, then your notebooks run (BUILD=03: one"
        " build; passes once every build is done)",
        text,
        flags=re.MULTILINE,
    )


def _refuse_to_clobber(out: Path, root: Path) -> None:
    target, home = out.resolve(), root.resolve()
    if target == home or target in home.parents:
        raise SystemExit(f"refusing to replace {out}: it holds the repository")
    if home in target.parents:
        first = target.relative_to(home).parts[0]
        if first in {".git", *(p.split("/")[0] for p in (*SHIP, *SECRET_DIRS))}:
            raise SystemExit(f"refusing to replace {out}: it is part of the repository")


def stub_grades(release: Path, workers: int = 2) -> list[str]:
    """Grade the copy's exercises and their pristine copies with the instructor's grader (the
    hidden suites of this repository); a line for every test a stub earns a point on, and for
    every stub that cannot be graded. Empty means every stub earns zero everywhere."""
    from grader.runtime.pool import RunnerPool
    from grader.runtime.results import SubmissionResult

    manifest = load_manifest()
    jobs = [
        (entry.number, folder / entry.path)
        for entry in manifest.graded
        for folder in (release, release / PRISTINE)
        if (folder / entry.path).exists()
    ]

    def grade(runner: Runner, job: tuple[str, Path]) -> SubmissionResult:
        return runner.grade_notebook(job[0], job[1], entry=manifest.entry(job[0]))

    with RunnerPool(workers) as pool:
        results = pool.map(grade, jobs)
    problems = []
    for (_, path), result in zip(jobs, results, strict=True):
        shown = path.relative_to(release)
        if result.status == "error":
            problems.append(f"{shown}: cannot be graded: {result.reason}")
        problems.extend(
            f"{shown}: {test.name} earns {test.points} point(s) on the stubs"
            for test in result.tests
            if test.points
        )
    return problems


def _refused(title: str, problems: list[str]) -> int:
    print(title)
    for problem in problems:
        print(f"  {problem}")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.shipping.release")
    parser.add_argument("--out", type=Path, default=Path("release"))
    args = parser.parse_args(argv)
    files = build(args.out)
    print(f"Wrote the learner copy of the committed tree to {args.out}/ ({len(files)} files).")
    problems = leaks(args.out)
    if problems:
        return _refused(f"LEAK: {len(problems)} secret(s) in the release:", problems)
    counts = (len(secrets()), len(secret_definitions()), len(secret_values()), len(answer_forms()))
    print(
        "Checked for leaks: no solution, hidden test or answer in it"
        f" ({counts[0]} secret texts, {counts[1]} definitions, {counts[2]} answer values,"
        f" {counts[3]} forms of the quiz's answers)."
    )
    earned = stub_grades(args.out)
    if earned:
        return _refused(f"NOT STUBS: the copy's exercises earn points ({len(earned)}):", earned)
    graded = [e.number for e in load_manifest().graded]
    print(
        f"Graded the copy's exercises and {PRISTINE}/ copies with the hidden suites of builds"
        f" {', '.join(graded)}: zero on every test."
    )
    print(f"Hand it out: cd {args.out} && make lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
