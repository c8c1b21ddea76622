"""`grader.classes.reports`: grades.csv, feedback, summary.md and summary.csv from hand-built
class reports; hidden tests stay hidden unless FEEDBACK=full."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.classes import reports
from grader.classes.grades import BuildGrade, ClassReport, LearnerGrade
from grader.classes.reports import OutputFolderError

MakeReport = Callable[..., ClassReport]
BuildOf = Callable[..., BuildGrade]


def table(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_grades_csv_has_a_row_per_learner_and_escapes_formulas(make_report: MakeReport) -> None:
    report = make_report(**{"=cmd": ("ok", "ok", "ok"), "bo": ("ok", "wrong", "stub")})
    rows = table(reports.grades_csv(report))
    assert list(rows[0]) == ["learner", "03", "total", "max", "status", "reason", "walls"]
    assert [(r["learner"], r["03"], r["total"], r["max"], r["walls"]) for r in rows] == [
        ("'=cmd", "6", "6", "6", "off"),
        ("bo", "2", "2", "6", "off"),
    ]


def test_feedback_shows_a_visible_message_but_only_words_for_a_hidden_test(
    make_report: MakeReport,
) -> None:
    learner = make_report(ada=("ok", "wrong", "wrong")).learners[0]
    text = reports.feedback_md(learner)
    assert text.startswith("# Feedback for ada\n")
    assert "**2 of 6 points.**" in text
    assert "called keeps(1, 2)" in text  # a visible check: its whole message
    assert "called hidden_edge" not in text
    assert "Result: it ran and gave a wrong result." in text
    assert "Hint: mind the edge" in text
    assert "| ✗ | `hidden_edge` (hidden) | 0 of 3 |" in text
    assert "called hidden_edge(1, 2)" in reports.feedback_md(learner, full=True)


def test_a_build_that_did_not_load_gives_the_hints_once(make_build: BuildOf) -> None:
    build = make_build(("broken",) * 3, reason="SyntaxError at line 3")
    text = reports.feedback_md(LearnerGrade("ada", [build]))
    assert "**error**: SyntaxError at line 3" in text
    assert "Every test above failed for that one reason. Start with the hints:" in text
    assert "- `hidden_edge`: mind the edge" in text


def test_summary_rows_rank_the_most_often_wrong_first(make_report: MakeReport) -> None:
    report = make_report(
        ada=("ok", "wrong", "ok"),
        bo=("ok", "wrong", "stub"),
        cy=("wrong", "ok", "ok"),
        di=None,
    )
    rows = reports.summary_rows(report)
    assert [(r.test, r.submitted, r.passed, r.wrong, r.not_done) for r in rows] == [
        ("keeps", 3, 1, 2, 0),
        ("adds", 3, 2, 1, 0),
        ("hidden_edge", 3, 2, 0, 1),
    ]
    assert (rows[0].common, rows[0].common_count, rows[0].failed) == ("got: 5", 2, 2)
    csv_rows = table(reports.summary_csv(rows))
    assert csv_rows[0]["most_common_wrong"] == "got: 5"
    assert csv_rows[2]["visible"] == "no"


def test_summary_md_says_the_walls_and_the_builds(make_report: MakeReport) -> None:
    report = make_report(ada=("ok", "ok", "ok"), bo=None)
    text = reports.summary_md(report, reports.summary_rows(report))
    assert text.startswith("# Class summary (walls: off)\n")
    assert "| 03 | 1 of 2 | 1 | 0 | 6.0 of 6 |" in text
    assert "No learner's failures match a known bug" in text
    assert "None (untouched stubs left out)." in text
    assert "## Folders and files that need a look" in text and "- bo: error:" in text


def test_identical_submissions_are_grouped_apart_from_stubs(make_build: BuildOf) -> None:
    learners = [
        LearnerGrade(name, [make_build(source_id=sid)])
        for name, sid in [("ada", "s1"), ("bo", "s1"), ("cy", "stub"), ("di", "stub"), ("ed", "x")]
    ]
    report = ClassReport([learners[0].builds[0].entry], learners, stub_ids={"03": "stub"})
    assert reports.identical_groups(report) == [("03", ["ada", "bo"])]


def test_write_outputs_writes_each_file_and_drops_stale_feedback(
    make_report: MakeReport, tmp_path: Path
) -> None:
    stale = tmp_path / "feedback" / "gone.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    report = make_report(ada=("ok", "ok", "ok"), **{"../bo": ("ok", "ok", "wrong")})
    reports.write_outputs(report, tmp_path)
    names = reports.feedback_files(report)
    assert names["ada"] == "ada.md" and "/" not in names["../bo"]
    assert sorted(p.name for p in (tmp_path / "feedback").iterdir()) == sorted(names.values())
    first = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert {p.name for p in first} >= {"grades.csv", "summary.md", "summary.csv", "ada.md"}
    reports.write_outputs(report, tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == first


def test_check_out_refuses_a_folder_where_an_output_goes(tmp_path: Path) -> None:
    reports.check_out(tmp_path / "out", 3)
    assert (tmp_path / "out" / ".cache" / "grades").is_dir()
    (tmp_path / "out" / "summary.md").mkdir()
    with pytest.raises(OutputFolderError, match=r"summary\.md is a folder.*nothing was graded"):
        reports.check_out(tmp_path / "out", 3)


def test_check_out_refuses_an_out_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("a file")
    with pytest.raises(OutputFolderError, match=r"cannot be written .*choose another OUT="):
        reports.check_out(tmp_path / "out", 1)


def test_check_out_refuses_when_the_disk_is_too_small(tmp_path: Path) -> None:
    with pytest.raises(OutputFolderError, match=r"MiB free; the outputs of .* learner\(s\)"):
        reports.check_out(tmp_path / "out", 10**12)
