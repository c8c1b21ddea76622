"""The learner copy (`make release`), built into a temporary folder and used as a learner would.

It ships nothing secret (and the scan finds secrets planted in every disguise), its own
`make check` passes once every build's answer cells are the solutions' and fails on the
untouched stubs with a summary a learner can read, and `make reset BUILD=03` puts the stubs
back after keeping the learner's version. The copy's commands run with its own `workbook` and
`etl` packages first on the path (what its fresh ``.venv`` would install), on this venv's
interpreter.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import release
from workbook.export import cell_source, cell_tags, read_notebook
from workbook.manifest import load_manifest, repo_root

# Each test builds a whole learner copy, and two run its make check: seconds, not milliseconds.
pytestmark = pytest.mark.slow

ROOT = repo_root()
MANIFEST = load_manifest()
BUILDS = [e for e in MANIFEST.entries if e.solution and (ROOT / e.solution).exists()]


@pytest.fixture(scope="module")
def learner_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "run-it-twice"
    release.build(out)
    return out


def copy_of(learner_copy: Path, where: Path) -> Path:
    target = where / "run-it-twice"
    shutil.copytree(learner_copy, target)
    return target


def in_copy(copy: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m ARGS`` in the copy, its packages first on the path."""
    env = dict(os.environ, PYTHONPATH=str(copy))
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def fill_with_solutions(copy: Path) -> list[str]:
    """Put each solution's answer cells into the copy's exercise, cell for cell."""
    filled = []
    for entry in BUILDS:
        path = copy / entry.path
        exercise = read_notebook(path)
        solution = read_notebook(ROOT / str(entry.solution))
        for mine, theirs in zip(exercise["cells"], solution["cells"], strict=True):
            if "answer" in cell_tags(mine):
                mine["source"] = theirs["source"]
        path.write_text(json.dumps(exercise, indent=1, ensure_ascii=False) + "\n")
        filled.append(entry.number)
    return filled


# ─────────────────────────────────────────────────────────────────────── what ships


def test_the_copy_holds_what_a_learner_needs_and_no_secret(learner_copy: Path) -> None:
    assert release.leaks(learner_copy) == []
    shipped = {p.relative_to(learner_copy).as_posix() for p in learner_copy.rglob("*")}
    assert not {"solutions", "tests/hidden", ".git"} & shipped
    assert not [p for p in shipped if p.endswith("mutants.toml") or "/seams" in p]
    for entry in MANIFEST.entries:
        if (ROOT / entry.path).exists():
            assert entry.path in shipped
            if entry.kind != "concept":
                assert f"{release.PRISTINE}/{entry.path}" in shipped
    assert {"tests/visible", "workbook/buildchecks", "etl/data", "Makefile", "README.md"} <= shipped
    makefile = (learner_copy / "Makefile").read_text()
    for target in ("lab:", "check:", "progress:", "reset:"):
        assert f"\n{target}" in makefile
    assert "release:" not in makefile and "instructor only" not in makefile
    assert "SUBMISSIONS" not in makefile.split("\ncheck:")[1].splitlines()[0]
    phony = next(ln for ln in makefile.splitlines() if ln.startswith(".PHONY"))
    assert "release" not in phony
    assert "<!-- instructor -->" not in (learner_copy / "README.md").read_text()


def test_building_twice_gives_the_same_files(tmp_path: Path) -> None:
    first, again = tmp_path / "first", tmp_path / "again"
    release.build(first)
    release.build(again)
    release.build(again)  # replaced whole, not merged

    def files(folder: Path) -> dict[Path, bytes]:
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    assert files(first) == files(again)


def _definition(source: str, name: str) -> str:
    """`name`'s definition in `source`, re-printed from its syntax tree: no comments, no
    docstring layout, another formatting (what a learner-facing copy might look like)."""
    for node in ast.walk(ast.parse(source)):
        kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        if isinstance(node, kinds) and node.name == name:
            return ast.unparse(node)
    raise LookupError(name)


def _solution_source(number: str) -> str:
    entry = MANIFEST.entry(number)
    cells = read_notebook(ROOT / str(entry.solution))["cells"]
    return "\n\n".join(cell_source(c) for c in cells if "answer" in cell_tags(c))


def _notebook(*cells: tuple[str, str]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": text}
                | ({"outputs": [], "execution_count": None} if kind == "code" else {})
                for kind, text in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_the_scan_finds_secrets_in_every_disguise(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "workbook").mkdir(parents=True)
    (fake / "notebooks").mkdir()
    sink = _definition(_solution_source("03"), "IdempotentSink")
    judges = (ROOT / "tests/hidden/build03/judges.py").read_text()
    judge = next(
        ast.unparse(node)
        for node in ast.parse(judges).body
        if isinstance(node, ast.FunctionDef) and len(node.body) > 3
    )
    (fake / "workbook" / "helpers.py").write_text(f"{sink}\n\n\n{judge}\n")
    planted = {"IdempotentSink": "a copy of IdempotentSink"}
    cells = []
    if any(e.number == "07" for e in BUILDS):
        # A concept notebook may teach ideas, never hand over a build's seam, however shown.
        cells.append(("code", _definition(_solution_source("07"), "ingest_page")))
        planted["ingest_page"] = "a copy of ingest_page"
    if any(e.number == "08" for e in BUILDS):
        cells.append(("code", 'worked_example = {"q05": 360, "q07": 12, "q01": None}'))
        planted["quiz"] = '{"q05": 360}'
    line = next(
        ln.strip()
        for ln in _definition(_solution_source("03"), "with_retry").splitlines()
        if "retry_after" in ln and len(ln.strip()) >= release.MIN_SECRET_LINE
    )
    cells.append(("markdown", f"A hint, copied from somewhere:\n\n    {line}\n"))
    (fake / "notebooks" / "06_copy.ipynb").write_text(_notebook(*cells))
    problems = "\n".join(release.leaks(fake))
    for what, words in planted.items():
        assert words in problems, f"{what} not found in:\n{problems}"
    assert "judges.py" in problems
    assert line[:40] in problems or repr(line[:60])[1:-1][:40] in problems, problems


# ─────────────────────────────────────────────────────────── the learner's make check


def test_the_copys_check_passes_once_every_build_is_done(
    learner_copy: Path, tmp_path: Path
) -> None:
    copy = copy_of(learner_copy, tmp_path)
    assert fill_with_solutions(copy)
    done = in_copy(copy, "workbook.verify")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    assert "make check passed." in said
    assert "Every build is done." in said


def test_on_the_stubs_the_copys_check_fails_with_a_readable_summary(
    learner_copy: Path, tmp_path: Path
) -> None:
    copy = copy_of(learner_copy, tmp_path)
    stubs = in_copy(copy, "workbook.verify", "--only", "visible")
    said = stubs.stdout + stubs.stderr
    assert stubs.returncode == 1, said[-4000:]
    summary = said[said.index("━━ summary ━━") :]
    assert "visible tests (your builds)" in summary and "FAILED" in summary
    assert "make check failed: visible tests (your builds)." in summary
    # The learner sees which check failed, and why, in words.
    assert "test_fnv1a_vectors" in said and "not done yet: fnv1a_64" in said
    progress = in_copy(copy, "workbook", "progress")
    assert "0 of" in progress.stdout and "builds done" in progress.stdout


def test_make_reset_restores_the_stubs_and_keeps_the_learners_version(
    learner_copy: Path, tmp_path: Path
) -> None:
    copy = copy_of(learner_copy, tmp_path)
    entry = MANIFEST.entry("03")
    mine = copy / entry.path
    worked = mine.read_text().replace(
        "raise NotImplementedError", "raise NotImplementedError  # mine", 1
    )
    mine.write_text(worked)
    for _ in range(2):
        done = in_copy(copy, "workbook", "reset", "03")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "back to its stubs" in done.stdout
    assert mine.read_bytes() == (copy / release.PRISTINE / entry.path).read_bytes()
    backups = [p.read_text() for p in (mine.parent / ".backups").iterdir()]
    assert len(backups) == 2  # two resets in the same second keep two backups
    assert worked in backups  # the learner's own version, kept
    assert "Your version is kept in" in done.stdout
    refused = in_copy(copy, "workbook", "reset", "01")
    assert refused.returncode == 2 and "concept notebook" in refused.stdout
    asked = in_copy(copy, "workbook", "reset")
    assert asked.returncode == 2 and "BUILD=03" in asked.stdout
