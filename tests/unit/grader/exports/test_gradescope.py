"""`grader.exports.gradescope`: the bundle's files and settings, and results.json in
Gradescope's shape from a hand-built class of one (no grading run)."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

from grader.classes.grades import ClassReport
from grader.exports import gradescope
from grader.exports.classroom import LEARNER_NOTE

MakeReport = Callable[..., ClassReport]


def test_results_have_gradescopes_fields_and_hide_hidden_tests(make_report: MakeReport) -> None:
    data = gradescope.results(make_report(ada=("ok", "wrong", "wrong")), 12.6)
    assert data["score"] == 2 and data["execution_time"] == 13
    assert (data["visibility"], data["stdout_visibility"]) == ("visible", "hidden")
    assert data["extra_data"] == {"max_score": 6, "status": "graded"}
    assert [(t["name"], t["number"], t["status"], t["visibility"]) for t in data["tests"]] == [
        ("03 adds", "03.1", "passed", "visible"),
        ("03 keeps", "03.2", "failed", "visible"),
        ("03 hidden_edge", "03.3", "failed", "after_published"),
    ]
    keeps, hidden = data["tests"][1]["output"], data["tests"][2]["output"]
    assert "called keeps(1, 2)" in keeps and "Hint: keep the rows" in keeps
    assert hidden == "Result: it ran and gave a wrong result.\n\nHint: mind the edge"
    assert data["output"].startswith("Visible checks: 2 of 3 points. The 1 hidden tests")
    assert data["tests"][0]["output"] == ""
    json.dumps(data)  # all of it JSON


def test_full_feedback_shows_a_hidden_tests_call(make_report: MakeReport) -> None:
    data = gradescope.results(make_report(ada=("ok", "ok", "wrong")), 1.0, full=True)
    assert "called hidden_edge(1, 2)" in data["tests"][2]["output"]


def test_a_build_not_graded_is_said_in_the_output(make_report: MakeReport) -> None:
    data = gradescope.results(make_report(ada=None), 0.0)
    assert data["score"] == 0
    assert data["output"].splitlines()[-1] == "- 03: not submitted"


def test_a_long_message_is_cut() -> None:
    assert gradescope._cut("x" * 5000) == "x" * 3999 + "…"


def test_a_failed_grading_is_a_valid_zero_that_blames_no_learner() -> None:
    data = gradescope.failed("RuntimeError", 3.2)
    assert data["score"] == 0 and data["tests"] == [] and data["execution_time"] == 3
    assert (
        "The autograder itself failed (RuntimeError); this is not about your work."
        in (data["output"])
    )


def test_settings_say_the_builds_and_feedback_or_default(tmp_path: Path) -> None:
    assert gradescope.settings(tmp_path) == (None, False)
    (tmp_path / gradescope.SETTINGS).write_text('{"builds": ["03"], "feedback": "full"}')
    assert gradescope.settings(tmp_path) == (["03"], True)
    (tmp_path / gradescope.SETTINGS).write_text("{broken")
    assert gradescope.settings(tmp_path) == (None, False)


def fake_repo(root: Path) -> Path:
    for name in ("grader/a.py", "grader/__pycache__/a.pyc", "builds/.hidden/x", "etl/b.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    (root / "workbook.toml").write_text("[x]\n")
    (root / "requirements.txt").write_text("httpx\nruff\n")
    return root


def test_the_bundle_holds_the_scripts_and_the_repo_without_caches(tmp_path: Path) -> None:
    root = fake_repo(tmp_path / "repo")
    files = gradescope.bundle_files(root)
    assert sorted(files) == [
        "etl/b.py",
        "grader/a.py",
        "requirements.txt",
        "run_autograder",
        "setup.sh",
        "workbook.toml",
    ]
    assert files["requirements.txt"] == f"{LEARNER_NOTE}\nhttpx\n"


def test_the_same_repo_gives_the_same_bundle(tmp_path: Path) -> None:
    root = fake_repo(tmp_path / "repo")
    one = gradescope.build_bundle(tmp_path / "one", root, builds=["03"], feedback="full")
    two = gradescope.build_bundle(tmp_path / "two", root, builds=["03"], feedback="full")
    assert one.read_bytes() == two.read_bytes()
    with zipfile.ZipFile(one) as archive:
        assert json.loads(archive.read(gradescope.SETTINGS)) == {
            "builds": ["03"],
            "feedback": "full",
        }
        run = archive.getinfo("run_autograder")
        assert (run.external_attr >> 16) & 0o111
