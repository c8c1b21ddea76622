"""Grades out where they go: ``OUT/lms/`` from staged downloads and a real Canvas roster.

The roster is written here as Canvas exports its gradebook (a byte order mark, the identity
columns, an assignment column named with its id, a "Points Possible" row, computed columns);
the learners come from staging a Canvas or Moodle download built with `zipfile`.
"""

from __future__ import annotations

import csv
import io
import zipfile
from pathlib import Path

import pytest

from grader.classes.layouts import Staged, stage
from grader.exports.lms import LmsError, Score, canvas_name, write_exports
from tests.grading.fixtures.downloads import canvas_name as download_name
from tests.grading.fixtures.downloads import canvas_zip, moodle_folder, moodle_zip

NB = b"{}"
BUILD03 = "03_build_retry_and_sink.ipynb"
HEADER = [
    "Student",
    "ID",
    "SIS User ID",
    "SIS Login ID",
    "Section",
    "Run It Twice (4567)",
    "Quiz 1 (4568)",
    "Current Score",
]


def roster(path: Path, students: list[list[str]], points: str = "172") -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    writer.writerow(["    Points Possible", "", "", "", "", points, "10", "(read only)"])
    writer.writerows(students)
    path.write_text("\ufeff" + buffer.getvalue(), encoding="utf-8")
    return path


def read(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


@pytest.fixture
def canvas(tmp_path: Path) -> Staged:
    files = {
        download_name("smithjane", 101, 9001, BUILD03, late="LATE"): NB,
        download_name("doejohn", 102, 9002, BUILD03): NB,
        download_name("leeann", 555, 9003, BUILD03): NB,
        download_name("=cmd", 104, 9004, BUILD03): NB,
    }
    return stage(canvas_zip(tmp_path / "submissions.zip", files), into=tmp_path / "staged")


def scores(staged: Staged) -> list[Score]:
    points = {"smithjane": 172, "doejohn": 0, "leeann": 90, "=cmd": 5, "ghost": 1}
    names = [x.learner for x in staged.learners] + ["ghost"]
    return [Score(n, points[n], 172, "graded", f"# Feedback for {n}\n") for n in names]


def test_scores_csv_is_learner_and_score_with_formulas_neutralised(
    tmp_path: Path, canvas: Staged
) -> None:
    write_exports(tmp_path / "out", scores(canvas), staged=canvas)
    assert read(tmp_path / "out" / "lms" / "scores.csv") == [
        ["learner", "score"],
        ["'=cmd", "5"],
        ["doejohn", "0"],
        ["ghost", "1"],
        ["leeann", "90"],
        ["smithjane", "172"],
    ]


def test_the_canvas_import_copies_the_roster_and_matches_every_way(
    tmp_path: Path, canvas: Staged
) -> None:
    students = [
        ["Smith, Jane", "101", "S101", "jsmith", "Section A"],  # by the Canvas user id
        ["Doe, John", "999", "S102", "doejohn", "+Section B"],  # by the SIS login
        ["Lee, Ann", "103", "S103", "alee", "Section A"],  # by Canvas's name rule
        ["Nobody, Zed", "105", "S105", "zed", "Section A"],  # handed nothing in
        ["Student, Test", "106", "", "", "Section A"],
    ]
    students = [[*row, "", "", ""] for row in students]
    path = roster(tmp_path / "gradebook.csv", students)
    done = write_exports(tmp_path / "out", scores(canvas), staged=canvas, roster=path)
    table = read(tmp_path / "out" / "lms" / "canvas_import.csv")
    assert table[0] == [*HEADER[:5], "Run It Twice (4567)"]
    assert table[1] == ["    Points Possible", "", "", "", "", "172"]
    assert table[2:] == [
        ["Smith, Jane", "101", "S101", "jsmith", "Section A", "172"],
        ["Doe, John", "999", "S102", "doejohn", "'+Section B", "0"],
        ["Lee, Ann", "103", "S103", "alee", "Section A", "90"],
        ["Nobody, Zed", "105", "S105", "zed", "Section A", ""],
        ["Student, Test", "106", "", "", "Section A", ""],
    ]
    said = "\n".join(done.notes)
    assert "roster row 'Nobody, Zed': no learner matched" in said
    assert "learner 'ghost': not in the roster" in said
    assert "learner '=cmd': not in the roster" in said
    assert (tmp_path / "out" / "lms" / "notes.txt").read_text() == said + "\n"


def test_a_name_two_roster_rows_share_matches_neither(tmp_path: Path, canvas: Staged) -> None:
    students = [
        ["Lee, Ann", "201", "", "", ""],
        ["Lee, Ann", "202", "", "", ""],
    ]
    path = roster(tmp_path / "gradebook.csv", students)
    done = write_exports(tmp_path / "out", scores(canvas), staged=canvas, roster=path)
    table = read(tmp_path / "out" / "lms" / "canvas_import.csv")
    assert [row[-1] for row in table[2:]] == ["", ""]
    assert any(n.startswith("learner 'leeann': not in the roster") for n in done.notes)


def test_a_new_assignment_column_and_a_points_mismatch_are_said(
    tmp_path: Path, canvas: Staged
) -> None:
    path = roster(tmp_path / "gradebook.csv", [["Smith, Jane", "101", "", "", ""]], points="100")
    done = write_exports(
        tmp_path / "a", scores(canvas), staged=canvas, roster=path, assignment="Run It Twice"
    )
    assert any("worth 100 points in Canvas" in n for n in done.notes)
    done = write_exports(
        tmp_path / "b", scores(canvas), staged=canvas, roster=path, assignment="Week 3"
    )
    table = read(tmp_path / "b" / "lms" / "canvas_import.csv")
    assert table[0][-1] == "Week 3" and table[1][-1] == "172" and table[2][-1] == "172"
    assert any('ASSIGNMENT="Week 3": no such column' in n for n in done.notes)


def test_a_roster_that_is_not_canvas_is_refused(tmp_path: Path, canvas: Staged) -> None:
    (tmp_path / "people.csv").write_text("name,email\nJane,j@x\n")
    with pytest.raises(LmsError, match="not a Canvas gradebook export"):
        write_exports(tmp_path / "out", scores(canvas), roster=tmp_path / "people.csv")


def test_canvas_feedback_is_named_as_its_download(tmp_path: Path, canvas: Staged) -> None:
    done = write_exports(tmp_path / "out", scores(canvas), staged=canvas)
    lms = tmp_path / "out" / "lms"
    with zipfile.ZipFile(lms / "feedback.zip") as archive:
        names = sorted(archive.namelist())
        assert archive.read("smithjane_LATE_101_9001_feedback.md") == b"# Feedback for smithjane\n"
    assert names == [
        "=cmd_104_9004_feedback.md",
        "doejohn_102_9002_feedback.md",
        "leeann_555_9003_feedback.md",
        "smithjane_LATE_101_9001_feedback.md",
    ]
    assert sorted(p.name for p in (lms / "feedback").iterdir()) == names
    assert "learner 'ghost': no canvas name to upload to" in done.notes
    # The same grades give the same bytes, and a learner gone since is gone from the upload.
    first = (lms / "feedback.zip").read_bytes()
    write_exports(tmp_path / "out", scores(canvas), staged=canvas)
    assert (lms / "feedback.zip").read_bytes() == first
    write_exports(tmp_path / "out", scores(canvas)[1:], staged=canvas)
    assert "=cmd_104_9004_feedback.md" not in {p.name for p in (lms / "feedback").iterdir()}


def test_moodle_feedback_goes_in_each_learners_download_folder(tmp_path: Path) -> None:
    folders = {
        moodle_folder("Jane Smith", 201): {BUILD03: NB},
        moodle_folder("John Doe", 202, since_41=True): {BUILD03: NB},
    }
    staged = stage(moodle_zip(tmp_path / "m.zip", folders), into=tmp_path / "staged")
    rows = [Score(x.learner, 1, 172, "graded", f"for {x.name}\n") for x in staged.learners]
    write_exports(tmp_path / "out", rows, staged=staged)
    with zipfile.ZipFile(tmp_path / "out" / "lms" / "feedback.zip") as archive:
        assert sorted(archive.namelist()) == [
            "Jane Smith_201_assignsubmission_file_/feedback.md",
            "John Doe_202_assignsubmission_file/feedback.md",
        ]
        assert archive.read("John Doe_202_assignsubmission_file/feedback.md") == b"for John Doe\n"


def test_canvas_name_rule() -> None:
    assert canvas_name("Smith, Jane") == "smithjane"
    assert canvas_name("O'Brien-Kelly, Seán") == "obrienkellyseán"
    assert canvas_name("de la Cruz, Ana_Maria") == "delacruzanamaria"
