"""Class grading and the walls: it refuses without them unless told, says the mode in every
row and on the summary's first line, and never serves a grade made without walls to a
walled run (the walls are in the cache key)."""

from __future__ import annotations

import csv
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.classes.batch import grade_class
from grader.classes.class_command import grade_and_report
from grader.runtime import sandbox
from grader.runtime.sandbox import Limits
from workbook.shared.manifest import load_manifest

pytestmark = pytest.mark.slow
LIMITS = Limits(load_seconds=3.0)


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """bubblewrap hidden from this process (PATH without it), the verdict forgotten."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    sandbox.walls_problem.cache_clear()
    yield
    sandbox.walls_problem.cache_clear()


@pytest.fixture
def a_class(tmp_path: Path) -> Path:
    """One learner who handed in build 03 as the stubs left it (quick to grade)."""
    manifest = load_manifest()
    entry = manifest.entry("03")
    folder = tmp_path / "class" / "ada"
    folder.mkdir(parents=True)
    shutil.copy(manifest.root / entry.path, folder / Path(entry.path).name)
    return folder.parent


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "grades.csv").open(newline="", encoding="utf-8") as table:
        return list(csv.DictReader(table))


@pytest.mark.usefixtures("no_bwrap")
def test_without_walls_class_grading_refuses_in_one_paragraph(
    a_class: Path, tmp_path: Path
) -> None:
    said: list[str] = []
    code = grade_and_report(a_class, tmp_path / "out", stdout=said.append)
    assert code != 0
    assert len(said) == 1 and "\n" not in said[0]
    paragraph = said[0]
    assert "bubblewrap (bwrap) is not installed" in paragraph  # what is missing
    assert "apt-get install bubblewrap" in paragraph and "dnf install bubblewrap" in paragraph
    assert "pacman -S bubblewrap" in paragraph  # how to install it
    assert "WALLS=off" in paragraph and "--walls off" in paragraph  # how to grade anyway
    assert not (tmp_path / "out").exists()  # nothing was graded


@pytest.mark.usefixtures("no_bwrap")
def test_walls_off_grades_and_says_so_in_every_row(a_class: Path, tmp_path: Path) -> None:
    said: list[str] = []
    out = tmp_path / "out"
    assert grade_and_report(a_class, out, stdout=said.append, walls="off", workers=1) == 0
    assert [row["walls"] for row in rows(out)] == ["off"]
    assert list(rows(out)[0])[-1] == "walls"  # the last column
    assert (out / "summary.md").read_text().splitlines()[0] == "# Class summary (walls: off)"
    assert any(line.strip().startswith("walls: OFF") for line in said), said


@pytest.mark.skipif(
    sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
)
def test_a_walled_run_never_reuses_a_grade_made_without_walls(
    a_class: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    off = grade_class(a_class, out, workers=1, limits=LIMITS, walls="off")
    assert off.graded == 1 and off.from_cache == 0
    walled = grade_class(a_class, out, workers=1, limits=LIMITS, walls="bwrap")
    assert walled.graded == 1 and walled.from_cache == 0  # graded again, behind the walls
    assert [row["walls"] for row in rows(out)] == ["bwrap"]
    first = (out / "summary.md").read_text().splitlines()[0]
    assert first == "# Class summary (walls: bwrap)"
    again = grade_class(a_class, out, workers=1, limits=LIMITS, walls="bwrap")
    assert again.graded == 0 and again.from_cache == 1
    off_again = grade_class(a_class, out, workers=1, limits=LIMITS, walls="off")
    assert off_again.from_cache == 1  # each mode keeps its own grades
    assert sandbox.walls_identity("bwrap").startswith("bwrap ")  # the version is in the key
