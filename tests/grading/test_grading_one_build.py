"""A week-one class: build 03 alone, graded with ``BUILD=03``.

The class is the solution, the stubs, and one learner per known bug of build 03 (the solution
with that ``mutants.toml`` edit made in its answer cells). Every row is graded, on build 03's
columns and points alone; the summary names no other build; each known bug is what its
learner's feedback and the "What to reteach" table name (or tie with); the default feedback
holds none of a hidden test's call or expected value, and ``FEEDBACK=full`` holds them.
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import load_suite
from grader.classes.batch import grade_class
from grader.classes.class_command import grade_and_report
from grader.classes.grades import ClassReport, LearnerGrade
from grader.classes.reports import feedback_files
from grader.exports import gradescope
from grader.proofs import soundness as prove
from grader.runtime.escape import markdown
from tests.grading import corpus
from workbook.shared.export import cell_source
from workbook.shared.manifest import UnknownBuild, load_manifest, pick_builds

pytestmark = pytest.mark.slow

SUITE = load_suite("03")
MAX = load_manifest().entry("03").max_points


@dataclass
class Graded:
    out: Path
    report: ClassReport
    said: list[str]


def mutated(name: str) -> corpus.Notebook:
    """The solution with known bug `name`'s edits made in the answer cell holding each."""
    nb = copy.deepcopy(corpus.solution())
    mutant = next(m for m in SUITE.mutants if m.name == name)
    for edit in mutant.edits:
        cells = [c for c in corpus.answer_cells(nb) if edit.old in cell_source(c)]
        assert len(cells) == 1, (name, edit.old)
        cells[0]["source"] = cell_source(cells[0]).replace(edit.old, edit.new)
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    base = tmp_path_factory.mktemp("week1")
    submissions, out = base / "submissions", base / "grades"
    corpus.write(submissions / "solution", corpus.solution())
    corpus.write(submissions / "stubs", corpus.exercise())
    for mutant in SUITE.mutants:
        corpus.write(submissions / f"bug_{mutant.name}", mutated(mutant.name))
    said: list[str] = []
    assert grade_and_report(submissions, out, stdout=said.append, builds=["03"]) == 0
    report = grade_class(submissions, out, builds=["03"])  # from the cache: the same grades
    return Graded(out, report, said)


def test_every_row_is_graded_on_build_03_alone(graded: Graded) -> None:
    with (graded.out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["learner", "03", "total", "max", "status", "reason", "walls"]
    assert {r["status"] for r in rows} == {"graded"}
    assert {r["max"] for r in rows} == {str(MAX)}
    by_name = {r["learner"]: r for r in rows}
    assert by_name["solution"]["total"] == str(MAX) and by_name["stubs"]["total"] == "0"
    learners = len(SUITE.mutants) + 2
    assert any(f"{learners} learners graded on build 03" in line for line in graded.said)
    assert not any("partial" in line for line in graded.said), graded.said


def test_the_summary_and_the_exports_name_no_other_build(graded: Graded) -> None:
    summary = (graded.out / "summary.md").read_text(encoding="utf-8")
    assert "graded builds: 03." in summary
    for other in ("05", "07", "08"):
        assert f"| {other} |" not in summary
    feedback = (graded.out / "feedback" / "solution.md").read_text(encoding="utf-8")
    assert "## 03 " in feedback and "## 05 " not in feedback
    assert f"**{MAX} of {MAX} points.**" in feedback


def test_each_known_bug_is_named_for_its_learner_and_in_the_table(graded: Graded) -> None:
    learners = {g.learner: g for g in graded.report.learners}
    summary = (graded.out / "summary.md").read_text(encoding="utf-8")
    table = summary.split("## What to reteach")[1].split("\n## ")[0]
    for mutant in SUITE.mutants:
        named = learners[f"bug_{mutant.name}"].reteach
        assert f"build 03: {mutant.bug}" in named, (mutant.name, named)
        assert f"| 03 | {markdown(mutant.bug)} |" in table, mutant.name
    assert learners["solution"].reteach == [] and learners["stubs"].reteach == []
    files = feedback_files(graded.report)
    told = (graded.out / "feedback" / files[f"bug_{SUITE.mutants[0].name}"]).read_text()
    assert "## What to look at again" in told and markdown(SUITE.mutants[0].bug) in told


def hidden_details(learner: LearnerGrade) -> list[str]:
    """Each line of the learner's failed hidden tests' messages (the call, what came back, what
    was expected) that no visible check of theirs says too (those they may see)."""
    visible, hidden = set(), []
    for test in (t for b in learner.builds for t in b.result.tests if not t.passed):
        lines = [ln.strip() for ln in test.message.splitlines() if len(ln.strip()) > 12]
        if test.visible:
            visible.update(lines)
        else:
            hidden += lines
    return [line for line in hidden if line not in visible]


def test_default_feedback_keeps_hidden_calls_and_expected_values_hidden(
    graded: Graded, tmp_path: Path
) -> None:
    # The same OUT: every grade comes from the cache, so its key ignores the feedback mode.
    default_out = tmp_path / "default"
    shutil.copytree(graded.out, default_out, ignore=shutil.ignore_patterns(".cache"))
    full_out = graded.out
    submissions = graded.out.parent / "submissions"
    report = grade_class(submissions, full_out, builds=["03"], full_feedback=True)
    assert report.from_cache == len(report.learners) and report.graded == 0
    files = feedback_files(graded.report)
    shown = 0
    for learner in graded.report.learners:
        details = hidden_details(learner)
        default = (default_out / "feedback" / files[learner.learner]).read_text(encoding="utf-8")
        full = (full_out / "feedback" / files[learner.learner]).read_text(encoding="utf-8")
        assert [d for d in details if d in default] == [], learner.learner
        assert [d for d in details if d not in full] == [], learner.learner
        shown += len(details)
    assert shown > 100  # the class's known bugs fail many hidden tests
    everything = "\n".join(p.read_text() for p in (default_out / "feedback").glob("*.md"))
    assert "Result: it ran and gave a wrong result." in everything
    assert "Feedback: default" in (default_out / "summary.md").read_text()
    assert "Feedback: full" in (full_out / "summary.md").read_text()
    # The text alone: the same grades, the same grades.csv, no grade from a new key.
    assert [g.total for g in report.learners] == [g.total for g in graded.report.learners]
    assert (full_out / "grades.csv").read_bytes() == (default_out / "grades.csv").read_bytes()


def test_build_lists_take_spaces_and_commas_and_refuse_unknown_numbers() -> None:
    valid = ["03", "05", "07", "08"]
    assert pick_builds(["03"], valid) == ["03"]
    assert pick_builds(["5,3"], valid) == ["03", "05"]
    assert pick_builds(["07 03"], valid) == ["03", "07"]
    assert pick_builds([], valid) == valid
    with pytest.raises(UnknownBuild) as raised:
        pick_builds(["03 09"], valid)
    assert str(raised.value) == "BUILD=03 09: no build 09 here; the builds are 03, 05, 07, 08."
    with pytest.raises(UnknownBuild):
        pick_builds([","], valid)


def test_an_unknown_build_is_refused_in_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "class" / "someone").mkdir(parents=True)
    said: list[str] = []
    out = tmp_path / "grades"
    assert grade_and_report(tmp_path / "class", out, stdout=said.append, builds=["9"]) == 2
    assert said == ["BUILD=9: no build 9 here; the builds are 03, 05, 07, 08."]
    assert not out.exists()
    assert prove.main(["--build", "03 09"]) == 2
    assert capsys.readouterr().out == (
        "BUILD=03 09: no build 09 here; the builds are 03, 05, 07, 08.\n"
    )


def test_a_gradescope_bundle_for_build_03_grades_it_alone(tmp_path: Path) -> None:
    path = gradescope.build_bundle(tmp_path, builds=["03"])
    with zipfile.ZipFile(path) as bundle:
        settings = json.loads(bundle.read(gradescope.SETTINGS))
    assert settings == {"builds": ["03"], "feedback": "default"}
    submission = tmp_path / "submission"
    corpus.write(submission, corpus.solution())
    report = gradescope.grade_submission(submission, tmp_path / "run", "bwrap", ["03"])
    data = gradescope.results(report, 1.0)
    assert (data["score"], data["extra_data"]["max_score"]) == (MAX, MAX) == (54, 54)
    assert {t["name"].split()[0] for t in data["tests"]} == {"03"}
