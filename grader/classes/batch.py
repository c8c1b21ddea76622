"""Class grading: ``make check SUBMISSIONS=dir [OUT=grades]``.

Each subfolder of the submissions folder is one learner (`grader.classes.discovery` finds each
build's notebook in it). Every graded build of the manifest that has a hidden suite gets a column; a
build a learner did not hand in scores zero with the reason "not submitted".

Submissions are graded in parallel, one `Runner` per worker thread (`grader.runtime.pool`; each with
its own fork servers, cgroups and uids), behind walls that also hide the output folder and the other
learners' submissions. Grades are cached under ``OUT/.cache/`` by the content id of everything that
can change them (`grader.classes.cache`). Running it again on the same inputs grades nothing and
rewrites the same files byte for byte (`grader.classes.reports`; they are replaced, never appended
to); changing one submission regrades only that one.

Outputs, all in a fixed order (learners by folder name, builds and tests as the manifest
lists them): ``grades.csv``, ``feedback/<learner>.md``, ``summary.md`` and ``summary.csv``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from grader import Runner
from grader.classes.cache import Cache, file_key, grade_key, grader_digest, raw_key, tests_key
from grader.classes.discovery import (
    NOT_SUBMITTED,
    Found,
    Learner,
    find_notebook,
    scan_class,
    scan_learner,
    zip_reason,
)
from grader.classes.grades import BuildGrade, ClassReport, LearnerGrade, one_line
from grader.classes.progressbar import Progress
from grader.classes.reports import check_out, write_outputs
from grader.classes.reteach import as_graded, name_matches
from grader.learner_tests.wheats import TestCells, read_test_cells
from grader.runtime.cleanup import remove_stale_scratch
from grader.runtime.forkclient import SCRATCH_ROOT
from grader.runtime.pool import RunnerPool
from grader.runtime.results import Outcome, SubmissionResult, TestResult, all_zero, fault_sentence
from grader.runtime.sandbox import (
    Isolation,
    Limits,
    WallsMode,
    walls_identity,
)
from grader.suites.digest import content_id
from grader.suites.loading import has_suite, load_suite
from workbook.shared.errors import WorkbookError
from workbook.shared.export import (
    GRADED_TAGS,
    cell_source,
    cell_tags,
    export_source,
    notebook_bytes,
    read_notebook,
)
from workbook.shared.manifest import (
    Entry,
    Manifest,
    load_manifest,
    pick_builds,
)

__all__ = ["ClassReport", "LearnerGrade", "grade_class"]


@dataclass
class BuildJob:
    """One learner's notebook for one build on its way to a grade: found, then exported and
    looked up in the cache (`source`, `key`), then graded unless the cache knew it."""

    learner: str
    entry: Entry
    found: Found
    source: str | None = None
    cells: TestCells | None = None
    """Its test cells, when the build has learner tests (graded against the reference)."""
    key: str | None = None
    aliases: tuple[str, ...] = ()
    """Other keys of the same grade: `grader.classes.cache.file_key` of the notebook's bytes, then
    `grader.classes.cache.raw_key` of its stored graded cells (each left out when not readable)."""
    grade: BuildGrade | None = None
    tests_key: str | None = None
    """Where its learner tests' grade is cached (`grader.classes.cache.tests_key`)."""
    known_tests: tuple[TestResult, ...] | None = None
    """That grade, when the cache had it: the learner tests are then not run again."""


def grade_class(
    submissions: Path,
    out: Path,
    *,
    workers: int | None = None,
    limits: Limits | None = None,
    manifest: Manifest | None = None,
    progress: TextIO | None = None,
    walls: WallsMode = "bwrap",
    builds: Sequence[str] | None = None,
    full_feedback: bool = False,
    reteach: bool = True,
) -> ClassReport:
    """Grade every learner folder in `submissions`, write the outputs into `out`, and return
    what was written, on `builds` alone when given (the others are neither graded nor listed);
    `full_feedback` changes the feedback's text alone; `reteach` matches each learner's
    failures to the known bugs (`grader.classes.reteach`).
    Nothing a submission does raises out of here; an unknown build raises `UnknownBuild`, and
    an `out` that cannot hold the outputs `OutputFolderError`, before anything is graded."""
    start = time.perf_counter()
    manifest = manifest or load_manifest()
    if builds is not None:  # as BUILD= spells them ("3", "03 05"); unknown: UnknownBuild
        builds = pick_builds(builds, [e.number for e in manifest.graded])
    found_class = scan_class(submissions)
    check_out(out, len(found_class.learners))
    # Scratch of an earlier batch that was killed (whatever its learners left in it) goes
    # first; what cannot be removed is said, and never stops this batch.
    notes = [f"stale scratch not removed: {p}" for p in remove_stale_scratch(SCRATCH_ROOT)]
    root = manifest.root
    suites_root = root / "builds"
    limits = limits or Limits()
    asked = [e for e in manifest.graded if builds is None or e.number in builds]
    entries = [e for e in asked if has_suite(e.number, suites_root)]
    skipped = [e.number for e in asked if not has_suite(e.number, suites_root)]
    cache = Cache(out / ".cache" / "grades")
    # The walls are part of every grade's key: one made without them never serves a walled run.
    walled = walls_identity(walls)
    digests = {
        e.number: content_id(
            "walled", f"{grader_digest(e.number, root, suites_root, limits)}:{walled}"
        )
        for e in entries
    }

    learners = [LearnerGrade(x.name) for x in found_class.learners]
    jobs = _jobs(learners, found_class.learners, entries)
    bar = Progress(len(jobs), progress)
    report = ClassReport(
        builds=entries,
        learners=learners,
        skipped_builds=skipped,
        not_graded=found_class.not_graded,
        notes=notes,
        walls=walls,
        full_feedback=full_feedback,
    )
    pending: list[BuildJob] = []
    size = workers or os.cpu_count() or 1
    hide = (submissions.resolve(), out.resolve())
    pool: RunnerPool | None = None
    try:
        for job in jobs:
            _prepare(job, cache, digests[job.entry.number])
            if job.grade is not None:
                bar.advance(cached=job.grade.cached)
                continue
            if pool is None:
                # The first notebook to run: one runner's servers start now and import while
                # the rest of the class is read, not after it.
                pool = RunnerPool(size, limits, hide=hide, walls=walls, learner_tests=False)
                pool.spawn(1)
            pending.append(job)
        # The same cells handed in twice (untouched stubs, a shared copy) are run once.
        same = _twins(pending)
        if pool is not None:
            report.isolation = _grade_once(pool, size, same, entries, suites_root, cache, root, bar)
    finally:
        if pool is not None:
            pool.close()
    by_learner: dict[str, LearnerGrade] = {g.learner: g for g in learners}
    for job in jobs:
        assert job.grade is not None
        by_learner[job.learner].builds.append(job.grade)
    if reteach:
        started = functools.partial(_signature_pool, size, hide, walls)
        _reteach(report, entries, root, suites_root, started)
    report.graded = len(same)
    report.from_cache = sum(1 for j in jobs if j.grade is not None and j.grade.cached)
    report.stub_ids = _stub_ids(entries, root)
    if cache.unwritten:
        report.notes.append(
            f"{cache.unwritten} cache entries could not be stored: what they hold is graded"
            " again next time"
        )
    write_outputs(report, out)
    report.seconds = time.perf_counter() - start
    return report


def _jobs(
    learners: Sequence[LearnerGrade], members: Sequence[Learner], entries: Sequence[Entry]
) -> list[BuildJob]:
    """One job per learner and build, learners in folder order, builds in manifest order."""
    jobs: list[BuildJob] = []
    for learner, member in zip(learners, members, strict=True):
        for entry, found in zip(entries, _find_builds(learner, member, entries), strict=True):
            jobs.append(BuildJob(learner.learner, entry, found))
    return jobs


def _twins(pending: Sequence[BuildJob]) -> dict[str, list[BuildJob]]:
    """The jobs to run grouped by their grade's key, in order: the first of each group is run,
    the others (the same cells handed in again) take its grade."""
    same: dict[str, list[BuildJob]] = collections.defaultdict(list)
    for job in pending:
        assert job.key is not None
        same[job.key].append(job)
    return same


def _grade_once(
    pool: RunnerPool,
    size: int,
    same: dict[str, list[BuildJob]],
    entries: Sequence[Entry],
    suites_root: Path,
    cache: Cache,
    root: Path,
    bar: Progress,
) -> Isolation | None:
    """Grade the first job of each group of `same` on the pool's runners (`size` of them at
    most), and give its grade to the rest of its group; the pool's walls, as they were raised."""
    unique = [group[0] for group in same.values()]
    pool.spawn(min(size, len(unique)))
    if any(j.cells is not None and j.known_tests is None for j in unique):
        pool.warm()  # learner tests to grade (not all of them from the cache)
    # While the servers import: only the builds to grade, so a run served from the
    # cache imports no hidden suite, one changed notebook only its own.
    needed = {job.entry.number for job in unique}
    suites = {e.number: load_suite(e.number, suites_root) for e in entries if e.number in needed}
    pool.wait_ready()
    isolation = pool.isolation()

    def grade(runner: Runner, job: BuildJob) -> None:
        _grade(job, runner, suites, cache, root)
        bar.advance()
        assert job.grade is not None and job.key is not None
        for twin in same[job.key][1:]:
            twin.grade = BuildGrade(
                twin.entry,
                twin.found,
                _relabel(job.grade.result, twin.found.shown),
                job.grade.source_id,
                cached=True,
            )
            bar.advance(cached=True)

    pool.map(grade, unique)
    return isolation


def _signature_pool(size: int, hide: tuple[Path, ...], walls: WallsMode) -> RunnerPool:
    """Runners for the known bugs' signatures, under the default limits whatever the
    batch's: the signatures are kept under them."""
    started = RunnerPool(size, Limits(), hide=hide, walls=walls, learner_tests=False)
    started.spawn(size)
    started.wait_ready()
    return started


def _reteach(
    report: ClassReport,
    entries: Sequence[Entry],
    root: Path,
    suites_root: Path,
    started: Callable[[], RunnerPool],
) -> None:
    """Match each learner's failures to the known bugs (`grader.classes.reteach`) into `report`."""
    try:
        report.reteach = name_matches(report.learners, entries, root, suites_root, started)
    except Exception as exc:  # the table is advice: its failure costs no grade
        for learner in report.learners:
            learner.reteach.clear()
        report.notes.append(f"what to reteach was not worked out: {type(exc).__name__}: {exc}")


def _find_builds(learner: LearnerGrade, member: Learner, builds: Sequence[Entry]) -> list[Found]:
    """Each build's notebook in the learner's folder, from one walk of it; what stands in the
    way of all of them (a zip instead of a folder, an unreadable folder) is the learner's
    `problem`, and what was found but not read goes in their notes."""
    beside = [f"{z} beside the folder was not read (graded from the folder)" for z in member.zips]
    if member.folder is None:
        learner.problem = zip_reason(member.zips)
        return [Found(None, learner.problem) for _ in builds]
    try:
        scanned = scan_learner(member.folder)
        found = [find_notebook(scanned, entry) for entry in builds]
    except Exception as exc:  # one folder that cannot be searched stops no one else
        learner.problem = f"the folder could not be searched: {type(exc).__name__}: {exc}"
        return [Found(None, learner.problem) for _ in builds]
    if scanned.problem is not None:
        learner.problem = scanned.problem
    elif scanned.zips and all(f.path is None for f in found):
        learner.problem = zip_reason(scanned.zips)
    elif scanned.zips:
        beside += [f"{z} was not read (zips are not unpacked)" for z in scanned.zips]
    learner.notes += [*beside, *scanned.notes]
    return [Found(None, learner.problem) for _ in builds] if learner.problem else found


def _prepare(job: BuildJob, cache: Cache, digest: str) -> None:
    """Export the notebook (in this process: plain JSON and `compile`, no learner code runs)
    and look its grade up; `job.grade` is set unless the submission must be run, and then
    its learner tests' cached grade, if any, is `job.known_tests`."""
    entry, found = job.entry, job.found
    if found.path is None:
        reason = found.problem or NOT_SUBMITTED
        job.grade = BuildGrade(
            entry, found, all_zero(entry.number, entry, "", reason, Outcome.NOT_LOADED)
        )
        return
    # The same bytes, then the same stored cells, as an earlier run: its grade, found without
    # parsing the notebook (bytes) or exporting and compiling it (cells).
    for alias_key in _aliases(entry, found.path, digest):
        job.aliases += (alias_key,)
        alias = cache.get_alias(alias_key)
        hit = cache.get(alias[0]) if alias is not None else None
        if alias is not None and hit is not None:
            job.key = alias[0]
            job.grade = BuildGrade(entry, found, _relabel(hit, found.shown), alias[1], cached=True)
            for earlier in job.aliases[:-1]:
                cache.put_alias(earlier, alias[0], alias[1])
            return
    try:
        source = export_source(found.path)
    except WorkbookError as exc:
        # The export names the notebook by the grader's path; the learner knows their own.
        reason = str(exc).replace(str(found.path), found.shown)
        job.grade = BuildGrade(entry, found, _not_loaded(entry, found.shown, reason))
        return
    except Exception as exc:  # a notebook crafted to break the exporter breaks only itself
        reason = f"{found.shown}: cannot be read: {type(exc).__name__}: {one_line(str(exc), 200)}"
        job.grade = BuildGrade(entry, found, _not_loaded(entry, found.shown, reason))
        return
    # The header names the notebook file; only a comment, so identical cells under another
    # file name are the same submission (one cache entry, and a match in the summary).
    source = as_graded(source)
    job.source = source
    source_id = content_id("submission", source)
    tests_id = None
    if entry.learner_tests:
        job.cells = read_test_cells(found.path)
        tests_id = _tests_id(job.cells)
    job.key = grade_key(entry.number, digest, source_id, tests_id)
    if job.aliases and not _unchanged(job.aliases[0], entry, found.path, digest):
        # Replaced while it was read (an LMS sync mid-batch): the bytes first hashed are not
        # what was exported, so no alias may name this grade.
        job.aliases = ()
    hit = cache.get(job.key)
    if hit is not None:
        job.grade = BuildGrade(entry, found, _relabel(hit, found.shown), source_id, cached=True)
        for alias_key in job.aliases:
            cache.put_alias(alias_key, job.key, source_id)
    elif job.cells is not None:
        # The learner tests' grade depends on the test cells alone: a notebook whose answers
        # changed since an earlier batch (or another learner's with the same test cells,
        # graded then) reuses it.
        assert tests_id is not None  # set with the cells
        job.tests_key = tests_key(entry.number, digest, tests_id)
        job.known_tests = cache.get_tests(job.tests_key)


def _not_loaded(entry: Entry, label: str, reason: str) -> SubmissionResult:
    return all_zero(entry.number, entry, label, reason, Outcome.NOT_LOADED)


def _tests_id(cells: TestCells) -> str:
    return content_id("test cells", repr((cells.text, cells.problem)))


def _unchanged(first: str, entry: Entry, path: Path, digest: str) -> bool:
    """Whether the file still has the bytes whose `file_key` is `first`."""
    try:
        return file_key(entry.number, digest, notebook_bytes(path)) == first
    except Exception:  # gone or unreadable now: changed
        return False


def _aliases(entry: Entry, path: Path, digest: str) -> Iterator[str]:
    """The notebook's `file_key`, then its `raw_key`, each computed only when asked for;
    none when the file cannot be read (the export then says why)."""
    try:
        yield file_key(entry.number, digest, notebook_bytes(path))
    except Exception:  # not a readable file: the export gives the reason
        return
    raw = _raw(entry, path, digest)
    if raw is not None:
        yield raw


def _raw(entry: Entry, path: Path, digest: str) -> str | None:
    """The `raw_key` of the notebook's graded cells as stored, or None if it cannot be read
    (the export then says why)."""
    try:
        cells = [
            [cell_tags(c), cell_source(c)]
            for c in read_notebook(path)["cells"]
            if isinstance(c, dict)
            and c.get("cell_type") == "code"
            and set(cell_tags(c)) & set(GRADED_TAGS)
        ]
    except Exception:  # a notebook that cannot be read gets its reason from the export
        return None
    return raw_key(entry.number, digest, cells)


def _relabel(result: SubmissionResult, label: str) -> SubmissionResult:
    # A cached grade may come from another learner's identical submission.
    return SubmissionResult(
        result.build,
        label,
        result.status,
        result.reason,
        result.tests,
        result.seconds,
        result.output,
        result.notes,
    )


def _grade(job: BuildJob, runner: Runner, suites: dict[str, Any], cache: Cache, root: Path) -> None:
    assert job.source is not None and job.key is not None
    entry = job.entry
    known = job.known_tests
    try:
        result = runner.grade_source(
            entry.number,
            job.source,
            label=job.found.shown,
            suite=suites[entry.number],
            entry=entry,
            cells=job.cells,
            root=root,
            known_tests=known,
        )
    except Exception as exc:  # the grader's own failure: reported, never cached
        reason = fault_sentence(f"{type(exc).__name__}: {one_line(str(exc), 300)}")
        result = all_zero(entry.number, entry, job.found.shown, reason, Outcome.GRADER_FAULT)
    source_id = content_id("submission", job.source)
    if job.tests_key is not None and known is None and result.status != "error":
        cache.put_tests(job.tests_key, result.tests[len(entry.tests) :])  # graded, not zeroed
    if cache.put(job.key, result):
        for alias_key in job.aliases:
            cache.put_alias(alias_key, job.key, source_id)
    job.grade = BuildGrade(entry, job.found, result, source_id, cached=False)


def _stub_ids(builds: Sequence[Entry], root: Path) -> dict[str, str]:
    """The content id of each build's untouched exercise (identical stubs are no news)."""
    ids = {}
    for entry in builds:
        with contextlib.suppress(WorkbookError, OSError):
            source = as_graded(export_source(root / entry.path))
            ids[entry.number] = content_id("submission", source)
    return ids


# ---------------------------------------------------------------------------------------
# Command line.
