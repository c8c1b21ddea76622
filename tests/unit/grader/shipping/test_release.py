"""The learner copy (`make release`), built into a temporary folder and used as a learner would.

It is built from a git checkout's committed tree (a checkout of this working tree, made in a
temp folder) and refused outside one or while the exercises differ from the commit; it ships
nothing secret (and the scan finds secrets planted in every disguise), the instructor's grader
gives its stubs zero, its own `make check` passes once every build's answer cells are the
solutions' and says per build what is left otherwise, and `make reset BUILD=03` puts the stubs
back after keeping the learner's version. The copy's commands run with its own `workbook` and
`etl` packages first on the path (what its fresh ``.venv`` would install), on this venv's
interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.shipping import leakscan, release
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import load_manifest, repo_root

# Each test builds a whole learner copy, and two run its make check: seconds, not milliseconds.
pytestmark = pytest.mark.slow

ROOT = repo_root()
MANIFEST = load_manifest()
BUILDS = [e for e in MANIFEST.entries if e.solution and (ROOT / e.solution).exists()]


def git(where: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def checkout_of_this_tree(where: Path) -> Path:
    """A git checkout in `where` whose one commit is this working tree as it is now (every
    file git tracks or would track), so the release is built from what is here."""
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (where / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, where / name)
    git(where, "init", "-q")
    git(where, "add", "-A")
    git(where, "commit", "-q", "-m", "snapshot")
    return where


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return checkout_of_this_tree(tmp_path_factory.mktemp("checkout"))


@pytest.fixture(scope="module")
def learner_copy(tmp_path_factory: pytest.TempPathFactory, checkout: Path) -> Path:
    out = tmp_path_factory.mktemp("release") / "run-it-twice"
    release.build(out, checkout)
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
    """Put each solution's answer and test cells into the copy's exercise, cell for cell (a
    test the learner writes is a step too: no build is done without it)."""
    filled = []
    for entry in BUILDS:
        path = copy / entry.path
        exercise = read_notebook(path)
        solution = read_notebook(ROOT / str(entry.solution))
        for mine, theirs in zip(exercise["cells"], solution["cells"], strict=True):
            if {"answer", "test"} & set(cell_tags(mine)):
                mine["source"] = theirs["source"]
        path.write_text(json.dumps(exercise, indent=1, ensure_ascii=False) + "\n")
        filled.append(entry.number)
    return filled


# ─────────────────────────────────────────────────────────────────────── what ships


def test_the_copy_holds_what_a_learner_needs_and_no_secret(learner_copy: Path) -> None:
    assert leakscan.leaks(learner_copy) == []
    shipped = {p.relative_to(learner_copy).as_posix() for p in learner_copy.rglob("*")}
    assert not {"solutions", "grader", "builds/conftest.py", "builds/README.md", ".git"} & shipped
    assert not [p for p in shipped if p.endswith("mutants.toml") or "/seams" in p]
    assert not [p for p in shipped if "/hidden" in p], "a build's hidden/ folder shipped"
    for entry in MANIFEST.graded:
        folder = f"builds/build{entry.number}"
        assert {f"{folder}/build.toml", f"{folder}/visible/answer_checks.py"} <= shipped
    for entry in MANIFEST.entries:
        if (ROOT / entry.path).exists():
            assert entry.path in shipped
            if entry.kind != "concept":
                assert f"{release.PRISTINE}/{entry.path}" in shipped
    assert {"builds/__init__.py", "etl/data", "Makefile", "README.md"} <= shipped
    makefile = (learner_copy / "Makefile").read_text()
    for target in ("lab:", "check:", "progress:", "reset:"):
        assert f"\n{target}" in makefile
    assert "release:" not in makefile and "instructor only" not in makefile
    assert "SUBMISSIONS" not in makefile.split("\ncheck:")[1].splitlines()[0]
    phony = next(ln for ln in makefile.splitlines() if ln.startswith(".PHONY"))
    assert "release" not in phony
    assert "<!-- instructor -->" not in (learner_copy / "README.md").read_text()


def test_building_twice_gives_the_same_files(tmp_path: Path, checkout: Path) -> None:
    first, again = tmp_path / "first", tmp_path / "again"
    release.build(first, checkout)
    release.build(again, checkout)
    release.build(again, checkout)  # replaced whole, not merged

    def files(folder: Path) -> dict[Path, bytes]:
        return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    assert files(first) == files(again)


def test_it_builds_from_the_committed_tree_only(tmp_path: Path, checkout: Path) -> None:
    mine = tmp_path / "mine"
    shutil.copytree(checkout, mine)
    (mine / "README.md").write_text("# not committed yet\n")
    (mine / "workbook" / "scratch_notes.py").write_text("SECRET = 1\n")
    out = tmp_path / "copy"
    release.build(out, mine)
    assert (out / "README.md").read_text() != "# not committed yet\n"
    assert not (out / "workbook" / "scratch_notes.py").exists()


def test_it_refuses_outside_a_git_checkout(tmp_path: Path, checkout: Path) -> None:
    loose = tmp_path / "loose"
    shutil.copytree(checkout, loose, ignore=shutil.ignore_patterns(".git"))
    with pytest.raises(SystemExit, match="is not a git checkout with a commit"):
        release.build(tmp_path / "copy", loose)
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("change", ["answered", "untracked", "deleted"])
def test_it_refuses_when_the_exercises_are_not_the_committed_stubs(
    tmp_path: Path, checkout: Path, change: str
) -> None:
    mine = tmp_path / "mine"
    shutil.copytree(checkout, mine)
    entry = MANIFEST.entry("03")
    if change == "answered":  # the instructor solved the exercise to try it out
        shutil.copy(ROOT / str(entry.solution), mine / entry.path)
    elif change == "untracked":
        shutil.copy(mine / entry.path, mine / "exercises" / "03_copy.ipynb")
    else:
        (mine / entry.path).unlink()
    with pytest.raises(SystemExit, match="exercises/ differs from the committed stubs"):
        release.build(tmp_path / "copy", mine)


def test_the_graders_give_the_copys_stubs_zero_and_answers_points(
    learner_copy: Path, tmp_path: Path
) -> None:
    assert release.stub_grades(learner_copy) == []
    copy = copy_of(learner_copy, tmp_path)
    fill_with_solutions(copy)
    earned = release.stub_grades(copy)
    for entry in BUILDS:
        assert any(line.startswith(f"{entry.path}: ") for line in earned), earned
    assert not any(line.startswith(release.PRISTINE) for line in earned), earned


# ─────────────────────────────────────────────────────────── the learner's make check


def test_the_copys_check_passes_once_every_build_is_done(
    learner_copy: Path, tmp_path: Path
) -> None:
    copy = copy_of(learner_copy, tmp_path)
    assert fill_with_solutions(copy)
    done = in_copy(copy, "workbook.commands.learner_check")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-4000:]
    for entry in BUILDS:
        assert f"\n{entry.number}  done\n" in said
        assert f"✓ {entry.path} runs to the end" in said
    assert "make check passed: every build is done." in said


def test_on_the_stubs_the_copys_check_says_per_build_what_is_left(
    learner_copy: Path, tmp_path: Path
) -> None:
    copy = copy_of(learner_copy, tmp_path)
    stubs = in_copy(copy, "workbook.commands.learner_check")
    said = stubs.stdout + stubs.stderr
    assert stubs.returncode == 1, said[-4000:]
    assert "Read from the saved notebooks in exercises/" in said
    for entry in BUILDS:
        assert f"\n{entry.number}  not started\n" in said
    assert "failed" not in said.replace("make check failed", "")  # no wall of pytest failures
    # One build done, one begun: a line each, and what to do next in the one begun.
    fill_with_solutions(copy)
    entry = MANIFEST.entry("03")
    nb = read_notebook(copy / entry.path)
    for cell in nb["cells"]:
        if "answer" in cell_tags(cell):
            cell["source"] = cell_source(cell).replace("raise ParseError(", "raise ValueError(")
    (copy / entry.path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    one = in_copy(copy, "workbook.commands.learner_check", "--build", "03")
    said = one.stdout + one.stderr
    assert one.returncode == 1, said[-4000:]
    assert "\n03  failing: content_key_is_stable_and_distinguishes_rows\n" in said
    assert "expected: raises ParseError" in said
    assert f"✗ {entry.path}: the code cell under 'Step 2'" in said
    assert "\n05  " not in said  # BUILD=03 checks build 03 alone
    assert in_copy(copy, "workbook.commands.learner_check", "--build", "05").returncode == 0
    progress = in_copy(copy, "workbook", "progress")
    assert "Read from the saved notebooks" in progress.stdout
    assert "builds done" in progress.stdout


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
