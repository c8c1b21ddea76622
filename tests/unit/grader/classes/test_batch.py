"""Class grading's parts, without a grading run: one job per learner and build, a build not
handed in, a notebook that cannot be read, the cache (by bytes, by stored cells, by content),
identical submissions run once, a cached grade relabelled for its learner, the stubs' ids,
an unknown build refused before anything; and one small class graded without walls (slow)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from grader.classes import batch
from grader.classes.batch import BuildJob, grade_class
from grader.classes.cache import Cache
from grader.classes.discovery import NOT_SUBMITTED, Found, scan_class
from grader.classes.grades import LearnerGrade
from grader.runtime.results import Outcome, SubmissionResult
from grader.runtime.results import TestResult as Graded
from grader.suites.digest import content_id
from tests.conftest import ROOT
from workbook.shared.manifest import Entry, UnknownBuild, load_manifest

MANIFEST = load_manifest()
B03 = MANIFEST.entry("03")
B05 = MANIFEST.entry("05")
NAME03 = Path(B03.path).name
DIGEST = "grader-digest"


def hand_in(folder: Path, source: Path, name: str = NAME03) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(source, folder / name))


def job_for(path: Path, learner: str = "ann", entry: Entry = B03) -> BuildJob:
    return BuildJob(learner, entry, Found(path, None, path.name))


def full_marks(entry: Entry, label: str) -> SubmissionResult:
    tests = tuple(
        Graded(t.name, t.points, t.points, "", t.visible, Outcome.PASSED) for t in entry.every_test
    )
    return SubmissionResult(entry.number, label, "graded", "", tests, 1.5, "out", ("a note",))


class FakeRunner:
    """Stands for a `Runner`: answers every submission with `result` (or raises `error`)."""

    def __init__(self, result: SubmissionResult | None = None, error: Exception | None = None):
        self.result, self.error = result, error
        self.sources: list[str] = []

    def grade_source(self, build: str, source: str, **kwargs: object) -> SubmissionResult:
        self.sources.append(source)
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# ── which jobs, and what a learner's folder stands for ──────────────────────────────────


def test_jobs_one_per_learner_and_build_in_folder_then_manifest_order(tmp_path: Path) -> None:
    hand_in(tmp_path / "bob", ROOT / B03.path)
    hand_in(tmp_path / "ann", ROOT / str(B05.solution), Path(B05.path).name)
    members = scan_class(tmp_path).learners
    learners = [LearnerGrade(m.name) for m in members]
    jobs = batch._jobs(learners, members, [B03, B05])
    assert [(j.learner, j.entry.number) for j in jobs] == [
        ("ann", "03"),
        ("ann", "05"),
        ("bob", "03"),
        ("bob", "05"),
    ]
    found = {(j.learner, j.entry.number): j.found for j in jobs}
    assert found["ann", "03"] == Found(None, NOT_SUBMITTED)
    assert found["ann", "05"].path == tmp_path / "ann" / Path(B05.path).name
    assert found["bob", "03"].shown == NAME03


def test_a_zip_instead_of_a_folder_is_every_builds_reason(tmp_path: Path) -> None:
    (tmp_path / "cat.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    members = scan_class(tmp_path).learners
    learners = [LearnerGrade(m.name) for m in members]
    jobs = batch._jobs(learners, members, [B03, B05])
    assert learners[0].problem is not None and "cat.zip" in learners[0].problem
    assert "zips are not read" in learners[0].problem
    assert {j.found for j in jobs} == {Found(None, learners[0].problem)}


# ── preparing one job: not handed in, unreadable, cached ────────────────────────────────


def test_a_build_not_submitted_scores_zero_with_the_reason(tmp_path: Path) -> None:
    job = BuildJob("ann", B03, Found(None, NOT_SUBMITTED))
    batch._prepare(job, Cache(tmp_path), DIGEST)
    assert job.grade is not None and job.key is None
    assert job.grade.status == "not submitted"
    assert job.grade.score == 0 and job.grade.max_score == B03.max_points
    assert len(job.grade.result.tests) == len(B03.every_test)
    assert {t.message for t in job.grade.result.tests} == {NOT_SUBMITTED}
    assert {t.kind for t in job.grade.result.tests} == {Outcome.NOT_LOADED}


def test_an_unreadable_notebook_is_not_loaded_and_named_as_the_learner_knows_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ann" / NAME03
    path.parent.mkdir()
    path.write_text("{ not json")
    job = job_for(path)
    batch._prepare(job, Cache(tmp_path / "cache"), DIGEST)
    assert job.grade is not None and job.grade.status == "error"
    assert job.grade.score == 0
    reason = job.grade.result.reason
    assert NAME03 in reason
    assert str(tmp_path) not in reason
    assert job.key is None  # nothing to run, nothing to cache


def test_a_notebook_to_grade_gets_its_source_key_and_aliases(tmp_path: Path) -> None:
    job = job_for(hand_in(tmp_path / "ann", ROOT / str(B03.solution)))
    batch._prepare(job, Cache(tmp_path / "cache"), DIGEST)
    assert job.grade is None  # to be run
    assert job.source is not None and "def " in job.source
    assert job.key is not None
    assert len(job.aliases) == 2  # the file's bytes, then its stored cells
    assert job.cells is not None  # build 03 has learner tests
    assert job.tests_key is not None and job.known_tests is None


def test_a_grade_is_cached_and_served_relabelled_to_an_identical_notebook(
    tmp_path: Path,
) -> None:
    cache = Cache(tmp_path / "cache")
    first = job_for(hand_in(tmp_path / "ann", ROOT / str(B03.solution)))
    batch._prepare(first, cache, DIGEST)
    runner = FakeRunner(full_marks(B03, NAME03))
    batch._grade(first, runner, {"03": None}, cache, ROOT)  # type: ignore[arg-type]
    assert first.grade is not None and not first.grade.cached
    assert first.grade.score == B03.max_points
    # Another learner, the same bytes under another name: served from the cache by its bytes.
    again = job_for(hand_in(tmp_path / "bob", ROOT / str(B03.solution), "03_mine.ipynb"), "bob")
    batch._prepare(again, cache, DIGEST)
    assert again.grade is not None and again.grade.cached
    assert again.key == first.key
    assert again.grade.result.label == "03_mine.ipynb"
    assert again.grade.score == B03.max_points
    assert again.grade.source_id == first.grade.source_id
    assert len(runner.sources) == 1


def test_the_same_cells_with_other_outputs_hit_the_cache_by_content(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    first = job_for(hand_in(tmp_path / "ann", ROOT / str(B03.solution)))
    batch._prepare(first, cache, DIGEST)
    batch._grade(first, FakeRunner(full_marks(B03, NAME03)), {"03": None}, cache, ROOT)  # type: ignore[arg-type]
    notebook = json.loads((ROOT / str(B03.solution)).read_text(encoding="utf-8"))
    notebook["metadata"]["ran_by"] = "bob"  # other bytes, the same graded cells
    path = tmp_path / "bob" / NAME03
    path.parent.mkdir()
    path.write_text(json.dumps(notebook), encoding="utf-8")
    job = job_for(path, "bob")
    batch._prepare(job, cache, DIGEST)
    assert job.grade is not None and job.grade.cached
    assert job.key == first.key


def test_a_grade_under_another_grader_digest_is_not_served(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    first = job_for(hand_in(tmp_path / "ann", ROOT / str(B03.solution)))
    batch._prepare(first, cache, DIGEST)
    batch._grade(first, FakeRunner(full_marks(B03, NAME03)), {"03": None}, cache, ROOT)  # type: ignore[arg-type]
    other = job_for(first.found.path)  # type: ignore[arg-type]
    batch._prepare(other, cache, "another grader")
    assert other.grade is None and other.key != first.key


def test_a_grader_fault_is_reported_as_such_and_never_cached(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "cache")
    job = job_for(hand_in(tmp_path / "ann", ROOT / str(B03.solution)))
    batch._prepare(job, cache, DIGEST)
    runner = FakeRunner(error=RuntimeError("the fork server died"))
    batch._grade(job, runner, {"03": None}, cache, ROOT)  # type: ignore[arg-type]
    assert job.grade is not None and job.grade.score == 0
    assert job.grade.result.grader_fault
    assert "RuntimeError: the fork server died" in job.grade.result.reason
    assert job.key is not None and cache.get(job.key) is None
    again = job_for(job.found.path)  # type: ignore[arg-type]
    batch._prepare(again, cache, DIGEST)
    assert again.grade is None  # run again next time


# ── twins, relabelling, the stubs' ids ──────────────────────────────────────────────────


def test_twins_group_jobs_by_key_in_order() -> None:
    found = Found(Path("x.ipynb"), None, "x.ipynb")
    jobs = [BuildJob(n, B03, found, key=k) for n, k in (("a", "k1"), ("b", "k2"), ("c", "k1"))]
    same = batch._twins(jobs)
    assert list(same) == ["k1", "k2"]
    assert [j.learner for j in same["k1"]] == ["a", "c"]
    assert [j.learner for j in same["k2"]] == ["b"]
    assert batch._twins([]) == {}


def test_relabel_changes_the_label_alone() -> None:
    result = full_marks(B03, "ann/03.ipynb")
    relabelled = batch._relabel(result, "bob/03_mine.ipynb")
    assert relabelled.label == "bob/03_mine.ipynb"
    assert relabelled == SubmissionResult(
        result.build,
        "bob/03_mine.ipynb",
        result.status,
        result.reason,
        result.tests,
        result.seconds,
        result.output,
        result.notes,
    )
    assert result.label == "ann/03.ipynb"


def test_stub_ids_match_an_untouched_stub_handed_in_under_another_name(tmp_path: Path) -> None:
    ids = batch._stub_ids([B03, B05], ROOT)
    assert set(ids) == {"03", "05"} and ids["03"] != ids["05"]
    job = job_for(hand_in(tmp_path / "ann", ROOT / B03.path, "03_my_copy.ipynb"))
    batch._prepare(job, Cache(tmp_path / "cache"), DIGEST)
    assert job.source is not None
    assert content_id("submission", job.source) == ids["03"]


def test_stub_ids_leave_out_a_build_whose_exercise_is_missing(tmp_path: Path) -> None:
    assert batch._stub_ids([B03], tmp_path) == {}


# ── grade_class ─────────────────────────────────────────────────────────────────────────


def test_an_unknown_build_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    hand_in(tmp_path / "class" / "ann", ROOT / B03.path)
    out = tmp_path / "out"
    with pytest.raises(UnknownBuild, match=r"BUILD=99: no build 99 here; the builds are 03"):
        grade_class(tmp_path / "class", out, builds=["99"], walls="off")
    assert not out.exists()


@pytest.mark.slow
def test_a_small_class_graded_without_walls_then_again_from_the_cache(tmp_path: Path) -> None:
    submissions, out = tmp_path / "class", tmp_path / "out"
    hand_in(submissions / "ann", ROOT / str(B03.solution))
    hand_in(submissions / "bob", ROOT / B03.path)
    hand_in(submissions / "dan", ROOT / B03.path, "03_dans.ipynb")  # bob's twin
    (submissions / "eve").mkdir()  # hands in nothing
    kwargs = {"workers": 1, "walls": "off", "builds": ["3"], "reteach": False}
    report = grade_class(submissions, out, progress=io.StringIO(), **kwargs)  # type: ignore[arg-type]
    scores = {g.learner: (g.total, g.builds[0].status) for g in report.learners}
    full = B03.max_points
    assert scores == {
        "ann": (full, "graded"),
        "bob": (0, "graded"),
        "dan": (0, "graded"),
        "eve": (0, "not submitted"),
    }
    assert [b.number for b in report.builds] == ["03"]
    assert report.graded == 2  # dan took bob's grade
    assert report.from_cache == 1
    assert set(report.stub_ids) == {"03"}
    table = (out / "grades.csv").read_text(encoding="utf-8")
    assert table.splitlines()[0].startswith("learner,03,total,max,status")
    again = grade_class(submissions, out, progress=io.StringIO(), **kwargs)  # type: ignore[arg-type]
    assert again.graded == 0 and again.from_cache == 3
    assert (out / "grades.csv").read_text(encoding="utf-8") == table
