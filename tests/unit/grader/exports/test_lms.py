"""`grader.exports.lms`: the two-column scores, Canvas's import CSV matched to a roster, and
feedback named for an LMS upload, written from small hand-made scores."""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.classes.grades import ClassReport
from grader.classes.layouts import Learner, Staged
from grader.exports import lms
from grader.exports.lms import LmsError, Score, write_exports

SCORES = [Score("smithjane", 5, 6, "graded", "jane's"), Score("=evil", 1, 6, "partial", "x")]
ROSTER = (
    "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,Run It Twice (77),Other\n"
    "    Points Possible,,,,,6,10\n"
    '"Smith, Jane",12,s1,jsmith,A,,9\n'
    '"Nobody, Here",13,s2,nhere,A,,8\n'
)


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_scores_csv_is_learner_and_score_sorted_and_escaped(tmp_path: Path) -> None:
    done = write_exports(tmp_path, SCORES)
    assert rows((tmp_path / "lms" / "scores.csv").read_text()) == [
        ["learner", "score"],
        ["'=evil", "1"],
        ["smithjane", "5"],
    ]
    assert [p.name for p in done.files] == ["scores.csv", "notes.txt"]
    assert (tmp_path / "lms" / "notes.txt").read_text() == "Every learner matched.\n"


def test_writing_again_replaces_the_folder_with_the_same_bytes(tmp_path: Path) -> None:
    (tmp_path / "lms").mkdir()
    (tmp_path / "lms" / "stale.txt").write_text("old")
    write_exports(tmp_path, SCORES)
    first = {p.name: p.read_bytes() for p in (tmp_path / "lms").iterdir()}
    write_exports(tmp_path, list(reversed(SCORES)))
    assert {p.name: p.read_bytes() for p in (tmp_path / "lms").iterdir()} == first
    assert "stale.txt" not in first


def test_canvas_import_copies_the_identity_columns_and_notes_the_unmatched(
    tmp_path: Path,
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    done = write_exports(tmp_path, SCORES, roster=roster)
    assert rows((tmp_path / "lms" / "canvas_import.csv").read_text()) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Run It Twice (77)"],
        ["    Points Possible", "", "", "", "", "6"],
        ["Smith, Jane", "12", "s1", "jsmith", "A", "5"],
        ["Nobody, Here", "13", "s2", "nhere", "A", ""],
    ]
    assert done.notes == (
        "roster row 'Nobody, Here': no learner matched, its cell left empty",
        "learner '=evil': not in the roster, not imported",
    )


def test_a_roster_row_is_matched_by_canvas_id_before_the_name() -> None:
    header = ["Student", "ID", "SIS Login ID"]
    students = [["Other, Name", "12", ""], ["Smith, Jane", "99", ""], ["X", "5", "bo"]]
    scores = [Score("smithjane", 5, 6, "graded"), Score("bo", 2, 6, "graded")]
    staged = Staged("canvas", Path("."), (Learner("smithjane", "smithjane", user_id="12"),))
    assert lms.match_roster(students, header, scores, staged) == {0: "smithjane", 2: "bo"}
    assert lms.match_roster(students, header, scores, None) == {1: "smithjane", 2: "bo"}
    assert lms.canvas_name("Smith, Jane-Ann_2") == "smithjaneann2"


def test_a_missing_assignment_column_is_added_and_noted() -> None:
    roster = [["Student", "ID"], ["Smith, Jane", "1"]]
    text, notes = lms.canvas_import(roster, SCORES[:1], None, "Quiz")
    assert rows(text) == [
        ["Student", "ID", "Quiz"],
        ["    Points Possible", "", "6"],
        ["Smith, Jane", "1", "5"],
    ]
    assert notes == ['ASSIGNMENT="Quiz": no such column in the roster; Canvas adds it']


def test_a_roster_that_is_not_canvass_export_is_refused_before_anything_is_removed(
    tmp_path: Path,
) -> None:
    write_exports(tmp_path, SCORES)
    roster = tmp_path / "roster.csv"
    roster.write_text("name,grade\nada,5\n")
    with pytest.raises(LmsError, match=r"not a Canvas gradebook export \(no Student and ID"):
        write_exports(tmp_path, SCORES, roster=roster)
    assert (tmp_path / "lms" / "scores.csv").is_file()
    with pytest.raises(LmsError, match="cannot be read"):
        write_exports(tmp_path, SCORES, roster=tmp_path / "missing.csv")


def test_feedback_is_named_as_the_lms_upload_matches_it(tmp_path: Path) -> None:
    canvas = Staged("canvas", tmp_path, (Learner("smithjane", prefix="smithjane_12_34"),))
    named, notes = lms.feedback_names(SCORES, canvas)
    assert named == {"smithjane_12_34_feedback.md": "jane's"}
    assert notes == ["learner '=evil': no canvas name to upload to"]
    moodle = Staged("moodle", tmp_path, (Learner("smithjane", prefix="Jane_1_assign_file_"),))
    assert lms.feedback_names(SCORES[:1], moodle)[0] == {
        "Jane_1_assign_file_/feedback.md": "jane's"
    }
    done = write_exports(tmp_path / "out", SCORES, staged=canvas)
    with zipfile.ZipFile(tmp_path / "out" / "lms" / "feedback.zip") as archive:
        assert archive.namelist() == ["smithjane_12_34_feedback.md"]
    assert (tmp_path / "out" / "lms" / "feedback" / "smithjane_12_34_feedback.md").is_file()
    assert done.files[-1].name == "notes.txt"


def test_scores_from_a_report_carry_the_feedback(make_report: Callable[..., ClassReport]) -> None:
    report = make_report(ada=("ok", "ok", "wrong"))
    (score,) = lms.scores_from_report(report)
    assert (score.learner, score.total, score.max, score.status) == ("ada", 3, 6, "graded")
    assert score.feedback.startswith("# Feedback for ada")
