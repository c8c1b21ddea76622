"""Class grading end to end: the broken and the cheating corpus graded as one class.

One batch grades every corpus learner (see `corpus.py`) plus two learners holding every
graded build (all solutions, all stubs). Each broken submission scores zero for what it broke,
with a reason, and the batch goes on; no cheat scores above its honest twin, and no forgery
(of the probes, the result stream, the digests, the error classes) earns a point the work
itself would not; feedback shows no secret and none of the learners' own output; the
repository and the outputs survive learners that try to delete or forge them. A second, small
class proves the cache.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader import Outcome, ProbeRecord, load_suite
from grader.classes import batch
from grader.classes.batch import ClassReport, LearnerGrade, grade_class
from grader.classes.class_command import grade_and_report
from grader.proofs import soundness as prove
from grader.runtime.sandbox import Limits
from grader.shipping.release import secrets
from grader.suites.judging import Observed, verdict
from grader.suites.observe import inputs_seed, tag_of
from tests.grading import corpus
from tests.grading.corpus import CHEATS, FORGERIES, ROBUST, Learner
from workbook.shared.export import export_source

#: Short load time: three learners hang or fork at load, and each costs this much.
LIMITS = Limits(load_seconds=3.0)


@dataclass
class Graded:
    submissions: Path
    out: Path
    report: ClassReport
    progress: str
    arc: list[str]

    def learner(self, name: str) -> LearnerGrade:
        return next(g for g in self.report.learners if g.learner == name)

    def build03(self, name: str, build: str = "03") -> tuple[int, str, str]:
        """(points, status, every word the learner is told) for build 03 (or `build`)."""
        grade = next(b for b in self.learner(name).builds if b.entry.number == build)
        told = " ".join(
            [grade.found.problem or "", grade.result.reason]
            + [t.message for t in grade.result.tests]
        )
        return grade.score, grade.status, told


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    base = tmp_path_factory.mktemp("class")
    submissions, out = base / "submissions", base / "grades"
    corpus.write_corpus(submissions, out)
    arc = corpus.write_arc(submissions / "arc_solution", "solution")
    corpus.write_arc(submissions / "arc_stub", "exercise")
    stream = io.StringIO()
    report = grade_class(submissions, out, limits=LIMITS, progress=stream)
    return Graded(submissions, out, report, stream.getvalue(), arc)


def rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        return {row["learner"]: row for row in csv.DictReader(handle)}


def test_every_learner_gets_one_row_in_a_fixed_order(graded: Graded) -> None:
    table = rows(graded.out)
    expected = sorted(p.name for p in graded.submissions.iterdir() if p.is_dir())
    assert list(table) == expected
    header = (graded.out / "grades.csv").read_text().splitlines()[0].split(",")
    builds = [e.number for e in graded.report.builds]
    assert header == ["learner", *builds, "total", "max", "status", "reason", "walls"]
    assert "03" in builds
    total = len(table) * len(builds)
    last = graded.progress.rstrip().splitlines()[-1]
    # Identical cells (the solution in three folders, the stubs) ran once; the rest reused it.
    assert f" {total}/{total} notebooks ({graded.report.from_cache} from cache) " in last


@pytest.mark.parametrize(
    "learner", [x for x in ROBUST if x.points is not None], ids=lambda x: x.name
)
def test_broken_submissions_lose_only_what_they_broke(graded: Graded, learner: Learner) -> None:
    points, status, told = graded.build03(learner.name)
    assert points == learner.points, told[:2000]
    if learner.status:
        assert status == learner.status, told[:500]
    for word in learner.words:
        assert word in told, told[:1000]


def test_the_batch_goes_on_after_every_breakage(graded: Graded) -> None:
    # The clean learners were graded in the same batch as the hangs, crashes and fork bombs.
    full = corpus.BUILD03.max_points
    for name in ("ok_solution", "ok_whole_copy", "ok_noisy_stderr", "arc_solution"):
        assert graded.build03(name)[0] == full
    table = rows(graded.out)
    assert table["ok_solution"]["03"] == str(full)
    assert table["hang_at_load"]["status"] in ("partial", "error")
    assert "03: your answer cells did not finish running" in table["hang_at_load"]["reason"]
    assert table["not_submitted"]["status"] == "error"


def test_every_graded_build_grades_its_solution_full_and_its_stub_zero(graded: Graded) -> None:
    assert graded.arc, "no graded build with a solution on disk"
    for build in graded.learner("arc_solution").builds:
        assert build.status == "graded", build.result.reason
        assert build.score == build.max_score, [t.name for t in build.result.tests if not t.passed]
    for build in graded.learner("arc_stub").builds:
        assert build.status == "graded", build.result.reason
        assert build.score == 0, [t.name for t in build.result.tests if t.points]


@pytest.mark.parametrize("learner", CHEATS, ids=lambda x: x.name)
def test_no_cheat_scores_above_its_honest_score(graded: Graded, learner: Learner) -> None:
    points, _, told = graded.build03(learner.name)
    if learner.twin:
        honest = graded.build03(learner.twin)[0]
        assert points <= honest, told[:2000]
        assert honest < corpus.BUILD03.max_points  # the twin leaves the cheated part undone
    if learner.points is not None:
        assert points == learner.points, told[:2000]


@pytest.mark.parametrize(
    "learner",
    [x for x in FORGERIES if x.twin or x.points is not None or x.fails],
    ids=lambda x: x.name,
)
def test_a_forgery_earns_nothing_the_work_itself_would_not(
    graded: Graded, learner: Learner
) -> None:
    """A replayed observation, a probe swapped from inside, a forged result stream, digests
    that are only consistent, an empty list of draws, a look-alike error class, rebound etl
    kinds, the reference seams, a connection lying about its trace: none earns a point."""
    points, _, told = graded.build03(learner.name, learner.build)
    if learner.twin:
        assert points <= graded.build03(learner.twin, learner.build)[0], told[:2000]
    if learner.points is not None:
        assert points == learner.points, told[:2000]
    grade = next(b for b in graded.learner(learner.name).builds if b.entry.number == learner.build)
    passed = {t.name for t in grade.result.tests if t.passed}
    assert not passed & set(learner.fails), told[:2000]


@pytest.mark.parametrize("build", ["03", "05", "07"])
def test_a_replayed_report_passes_no_test_of_any_build(build: str) -> None:
    """The solution's own reports, their seed tags rewritten for another submission's text
    (as a forger in the worker can), judged for that submission: every test fails, because
    every test's inputs are drawn for the submission judged."""
    suite = load_suite(build)
    source = export_source(corpus.ROOT / str(corpus.MANIFEST.entry(build).solution))
    other = source + "\n# another learner's answers\n"
    records = {}
    files = corpus.recorded_artefacts(build)  # the solution's own files, replayed too
    ticks = corpus.recorded_ledgers(build)  # and its ledger's ticks
    for key, obs in corpus.recorded(build).items():
        name = key.split("@")[0]
        if isinstance(obs, dict) and "seed" in obs:
            obs = {**obs, "seed": tag_of(inputs_seed(other, suite.probes.salt, name))}
        records[key] = ProbeRecord(key, "done", obs, ledger=ticks[key])
    passed = [
        name
        for name, judge in suite.judges.by_name.items()
        if verdict(judge, Observed(records, source=other, artefacts=files)).kind is Outcome.PASSED
    ]
    assert passed == []
    recorded = {
        k: ProbeRecord(k, "done", o, ledger=ticks[k]) for k, o in corpus.recorded(build).items()
    }
    honest = Observed(recorded, source=source, artefacts=files)
    assert all(verdict(j, honest).kind is Outcome.PASSED for j in suite.judges), build


def test_a_learner_cannot_read_the_secrets(graded: Graded) -> None:
    _, _, told = graded.build03("cheat_reads_hidden")
    seen = told.split("got:", 1)[1].split("expected:", 1)[0]
    # Not a file of the hidden suite, the solution or the repository's history can be read,
    assert "unread: mutants.toml probes.py 03_build_retry_and_sink.ipynb HEAD" in seen, seen
    # not even the reference seams: build 03's own would be its solution, ready to load.
    for folder in ("hidden", "solutions"):  # not there at all (an allowlist)
        assert f"{folder}: FileNotFoundError" in seen, seen
    # The build's folder holds its visible half only: the worker cannot even list hidden/.
    assert "build03: ['__init__.py', 'build.toml', 'visible']" in seen, seen
    assert "JUDGES" not in told and "PROBES" not in told


def test_feedback_shows_no_secret_and_no_learner_output(graded: Graded) -> None:
    hidden = secrets()
    learner_output = (
        "still noisy",
        "a learner's warning",
        "31 passed",
        "all 31 graded tests passed",
        "yyyyyyyy",
    )
    for path in sorted((graded.out / "feedback").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        leaked = [s.splitlines()[0][:60] for s in hidden if s in text]
        assert not leaked, f"{path.name}: {leaked[:3]}"
        for printed in learner_output:
            assert printed not in text, f"{path.name} shows the learner's output {printed!r}"
    for path in (graded.out / "summary.md", graded.out / "summary.csv"):
        text = path.read_text(encoding="utf-8")
        assert not [s for s in hidden if s in text], path.name


def test_forged_and_deleted_outputs_change_nothing(graded: Graded) -> None:
    table = rows(graded.out)
    assert table["cheat_fake_results"]["03"] == "0"
    feedback = (graded.out / "feedback" / "cheat_fake_results.md").read_text()
    assert feedback.startswith("# Feedback for cheat_fake_results")
    assert not list((graded.out / ".cache" / "grades").glob("00/x.json"))
    assert graded.submissions.exists() and (graded.submissions / "ok_solution").exists()
    planted = corpus.ROOT / corpus.PLANTED
    if planted.exists():  # remove it before failing, so the repository stays clean
        planted.unlink()
        pytest.fail("a learner wrote into the repository")


def test_feedback_lists_every_test_with_its_hint(graded: Graded) -> None:
    text = (graded.out / "feedback" / "twin_hardcodes.md").read_text(encoding="utf-8")
    entry = corpus.BUILD03
    for spec in entry.tests:
        assert f"`{spec.name}`" in text
    assert graded.build03("twin_hardcodes")[1] == "graded"
    assert "### ✗ `fnv1a_vectors`" in text
    assert "Hint: " + entry.test("fnv1a_vectors").hint in text
    assert "not done yet: fnv1a_64(b'') raised NotImplementedError('fnv1a_64')" in text
    assert "### ✗ `honors_retry_after`" not in text  # passed: in the table only


def test_the_summary_ranks_tests_by_what_learners_get_wrong(graded: Graded) -> None:
    with (graded.out / "summary.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    ranks = [(-int(row["wrong"]), -int(row["not_done"])) for row in table]
    assert ranks == sorted(ranks)
    for row in table:
        counts = sum(int(row[k]) for k in ("passed", "wrong", "not_done", "broken"))
        assert counts == int(row["submitted"])
    assert {row["test"] for row in table if row["build"] == "03"} == {
        t.name for t in corpus.BUILD03.every_test
    }
    fnv = next(row for row in table if row["test"] == "fnv1a_vectors")
    # The hangs, the crash and the hard-coded answers ran and were wrong; stubs are not done.
    assert int(fnv["wrong"]) >= 4 and int(fnv["not_done"]) >= 3 and int(fnv["broken"]) >= 10
    assert fnv["most_common_wrong"]
    summary = (graded.out / "summary.md").read_text(encoding="utf-8")
    assert "## Tests, most often wrong first" in summary
    # The same answer cells under three folders (and in a whole copy) are one submission;
    # untouched stubs are no news.
    line = next(
        ln for ln in summary.splitlines() if ln.startswith("- 03: ") and "ok_solution" in ln
    )
    assert "arc_solution" in line and "ok_whole_copy" in line
    assert not [ln for ln in summary.splitlines() if ln.startswith("- 03: ") and "ok_stub" in ln]


# ─────────────────────────────────────────────────────────────────── the cache, on its own


def small_class(folder: Path) -> None:
    corpus.write(folder / "ann", corpus.solution())
    corpus.write(folder / "ben" / "exercises", corpus.exercise())
    corpus.write(folder / "cid", corpus.stubbed(corpus.solution(), "with_retry"))


def outputs(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and ".cache" not in p.parts
    }


def test_rerunning_grades_nothing_and_rewrites_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    submissions, out = tmp_path / "class", tmp_path / "grades"
    small_class(submissions)
    first = grade_class(submissions, out, progress=io.StringIO())
    assert first.graded == 3  # build 03 each; the other builds were not handed in
    before = outputs(out)
    with monkeypatch.context() as patched:
        # A cached re-run reads a submission's stored cells and nothing more: no export, no
        # compile (the untouched stubs, exported to recognise them, are the repository's).
        export = export_source

        def no_export(path: Path) -> str:
            if submissions in Path(path).parents:
                raise AssertionError(f"exported {path} on a cached re-run")
            return export(path)

        patched.setattr(batch, "export_source", no_export)
        # Nor parsed: unchanged bytes find their grade by `grader.classes.cache.file_key`.
        reader = batch.read_notebook

        def no_parse(path: Path) -> Any:
            if submissions in Path(path).parents:
                raise AssertionError(f"parsed {path} on a cached re-run of unchanged files")
            return reader(path)

        patched.setattr(batch, "read_notebook", no_parse)
        again = grade_class(submissions, out, progress=io.StringIO())
    assert (again.graded, again.from_cache) == (0, first.graded)
    assert outputs(out) == before
    # One learner changes one build: only that notebook runs again.
    corpus.write(submissions / "ben" / "exercises", corpus.stubbed(corpus.solution(), "fnv1a_64"))
    changed = grade_class(submissions, out, progress=io.StringIO())
    assert changed.graded == 1
    full = corpus.BUILD03.max_points
    assert rows(out)["ben"]["03"] == str(full - corpus.BUILD03.test("fnv1a_vectors").points)
    # Ben now hands in what Ann did: the same cells are the same grade, from the cache.
    corpus.write(submissions / "ben" / "exercises", corpus.solution())
    assert grade_class(submissions, out, progress=io.StringIO()).graded == 0
    assert rows(out)["ben"]["03"] == str(full)
    assert rows(out)["ann"]["03"] == str(full)
    # A learner who leaves takes their feedback along; the CSV is replaced, not appended to.
    for path in (submissions / "cid").rglob("*"):
        path.unlink()
    (submissions / "cid").rmdir()
    grade_class(submissions, out, progress=io.StringIO())
    assert list(rows(out)) == ["ann", "ben"]
    assert sorted(p.name for p in (out / "feedback").iterdir()) == ["ann.md", "ben.md"]


def test_a_notebook_replaced_while_it_is_read_leaves_no_alias_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LMS sync that replaces a notebook between its hash and its export: the bytes first
    hashed must not come to name the grade of what was exported."""
    submissions, out = tmp_path / "class", tmp_path / "grades"
    path = corpus.write(submissions / "ann", corpus.solution())
    solution = path.read_bytes()
    export = batch.export_source

    def replaced_first(notebook: Path) -> str:
        corpus.write(submissions / "ann", corpus.exercise())  # the stub lands mid-read
        return export(notebook)

    with monkeypatch.context() as patched:
        patched.setattr(batch, "export_source", replaced_first)
        grade_class(submissions, out, progress=io.StringIO())
    assert rows(out)["ann"]["03"] == "0"  # the stub was what got graded
    path.write_bytes(solution)  # the learner's own file again, byte for byte
    again = grade_class(submissions, out, progress=io.StringIO())
    assert again.graded == 1, "the solution's bytes were served the stub's grade"
    assert rows(out)["ann"]["03"] == str(corpus.BUILD03.max_points)


def test_make_check_submissions_grades_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    submissions, out = tmp_path / "class", tmp_path / "out"
    small_class(submissions)
    assert prove.main(["--submissions", str(submissions), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "Graded 3 learner(s)" in said and "grades.csv" in said
    assert set(rows(out)) == {"ann", "ben", "cid"}


def test_folders_that_would_mix_up_the_class_are_refused(tmp_path: Path) -> None:
    said: list[str] = []
    assert grade_and_report(tmp_path / "missing", tmp_path / "out", stdout=said.append) == 2
    (tmp_path / "class").mkdir()
    assert grade_and_report(tmp_path / "class", tmp_path / "class" / "out", stdout=said.append) == 2
    assert grade_and_report(corpus.ROOT.parent, tmp_path / "out", stdout=said.append) == 2
    assert "no such folder" in said[0] and "inside SUBMISSIONS" in said[1]
    assert "holds the repository" in said[2]
