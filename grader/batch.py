"""Class grading: ``make check SUBMISSIONS=dir [OUT=grades]``.

Each subfolder of the submissions folder is one learner. It may hold the learner's whole
copy of the workbook or just their build notebooks, anywhere inside; a build is found by its
number (``03_*.ipynb``), hidden folders (``.pristine/``, ``.backups/``, checkpoints) aside.
Every graded build of the manifest that has a hidden suite gets a column; a build a learner
did not hand in scores zero with the reason "not submitted".

Submissions are graded in parallel, one `Runner` per worker thread (each with its own fork
servers, cgroups and uids), behind walls that also hide the output folder and the other
learners' submissions. Grades are cached under ``OUT/.cache/`` by the content id (SHA-256) of
everything that can change them: the submission's setup and answer cells, the build's hidden
probes and judges, the reference seams, the manifest, the `etl` and `workbook` packages,
``requirements.txt`` and the grading limits. Running it again on the same inputs grades
nothing and rewrites the same files byte for byte (they are replaced, never appended to);
changing one submission regrades only that one.

Outputs, all in a fixed order (learners by folder name, builds and tests as the manifest
lists them):

- ``grades.csv``: ``learner``, one column per graded build, ``total``, ``max``, ``status``
  (``graded``, ``partial`` or ``error``) and ``reason``;
- ``feedback/<learner>.md``: per test, passed or not, the judge's message and the hint (never
  the hidden code or expected values, never the learner's own output);
- ``summary.md`` and ``summary.csv``: per test, how many of the learners who handed the build
  in failed it, most failed first (what to reteach); identical submissions.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import hashlib
import io
import json
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from grader.results import SubmissionResult, TestResult
from grader.runner import GRADER_FAULT, Runner
from grader.sandbox import Isolation, Limits
from grader.suites import has_suite, load_suite, suite_dir
from workbook.errors import WorkbookError
from workbook.export import export_source
from workbook.manifest import Entry, Manifest, load_manifest, repo_root

#: Bump when the grading logic changes in a way the hashed files would not show.
GRADER_VERSION = "1"
#: A notebook bigger than this is not read (a learner's notebook is a few hundred KiB).
MAX_NOTEBOOK_BYTES = 16 * 2**20
#: Folders inside a learner's folder that never hold the notebook they hand in.
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules"})
#: How much of a judge's message the feedback shows (lines, characters per line).
MESSAGE_LINES, MESSAGE_WIDTH = 16, 400
HEADER = re.compile(r"\A# Exported from .*")
BuildStatus = Literal["graded", "partial", "error", "not submitted"]
LearnerStatus = Literal["graded", "partial", "error"]


def content_id(kind: str, canonical: str) -> str:
    """sha256(kind ‖ 0x00 ‖ canonical) in hex: the workbook's own content ids."""
    digest = hashlib.sha256(kind.encode())
    digest.update(b"\x00")
    digest.update(canonical.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------
# Finding the notebooks.


@dataclass(frozen=True)
class Found:
    """A learner's notebook for one build, or why there is none to grade."""

    path: Path | None
    problem: str | None = None
    shown: str = ""
    """The path as the learner knows it (relative to their folder)."""


def learner_folders(submissions: Path) -> list[Path]:
    """One folder per learner, sorted by name; hidden entries and loose files are skipped."""
    return sorted(
        (p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.name,
    )


def find_notebook(folder: Path, entry: Entry) -> Found:
    """Build `entry`'s notebook in `folder` (searched recursively, hidden folders skipped).

    Several candidates: the one at the manifest's path wins, then the manifest's file name;
    otherwise the learner must keep just one. A symlink is never followed: it could point at
    the instructor's solution."""
    if folder.is_symlink():
        return Found(None, "the learner's folder is a symlink, not a folder")
    pattern = re.compile(rf"{re.escape(entry.number)}_.*\.ipynb")
    candidates: list[Path] = []
    links: list[Path] = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS)
        for name in sorted(files):
            if pattern.fullmatch(name):
                path = Path(here, name)
                (links if path.is_symlink() else candidates).append(path)
    if not candidates:
        if links:
            link = links[0].relative_to(folder).as_posix()
            return Found(None, f"{link} is a symlink, not a notebook file: hand in the file")
        return Found(None, "not submitted")
    if len(candidates) > 1:
        exact = [p for p in candidates if p.relative_to(folder).as_posix() == entry.path]
        named = [p for p in candidates if p.name == Path(entry.path).name]
        candidates = exact or named or candidates
    if len(candidates) > 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in candidates)
        return Found(
            None,
            f"{len(candidates)} notebooks for build {entry.number} ({listed}): hand in one",
        )
    path = candidates[0]
    shown = path.relative_to(folder).as_posix()
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return Found(
            None, f"{shown} is {size // 2**20} MiB: too large to be a notebook (limit 16 MiB)"
        )
    return Found(path, None, shown)


# ---------------------------------------------------------------------------------------
# The cache: grades by the content id of everything that can change them.


def _digest_files(paths: Sequence[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\x00")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _files(folder: Path) -> list[Path]:
    if not folder.exists():
        return []
    return [
        p
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def grader_digest(build: str, root: Path, hidden: Path, limits: Limits) -> str:
    """The content id of everything besides the submission that can change build `build`'s
    grade: its hidden suite, every reference seam, the manifest, the packages, the
    requirements, the limits and this grader's version."""
    shared = [*_files(root / "etl"), *_files(root / "workbook")]
    shared += [p for p in (root / "workbook.toml", root / "requirements.txt") if p.exists()]
    suite = [*_files(suite_dir(build, hidden)), *_files(hidden / "seams")]
    parts = {
        "version": GRADER_VERSION,
        "python": sys.version,
        "limits": limits.as_json(),
        "shared": _digest_files(shared, root),
        "suite": _digest_files(suite, hidden),
    }
    return content_id("grader", canonical(parts))


class Cache:
    """Grades on disk, one JSON file per content id. A file that is missing, unreadable or not
    for its key is a miss; grades the grader itself failed to produce are never stored."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> SubmissionResult | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            if data.get("key") != key:
                return None
            return result_from_json(data["result"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: SubmissionResult) -> None:
        if result.reason.startswith(GRADER_FAULT) or any(
            t.message.startswith(GRADER_FAULT) for t in result.tests
        ):
            return
        data = {"key": key, "result": result.as_json()}
        _write(self._path(key), json.dumps(data, sort_keys=True, indent=1) + "\n")


def result_from_json(data: dict[str, Any]) -> SubmissionResult:
    tests = tuple(
        TestResult(
            t["name"], int(t["points"]), int(t["max_points"]), t["message"], bool(t["visible"])
        )
        for t in data["tests"]
    )
    return SubmissionResult(
        build=data["build"],
        label=data["label"],
        status=data["status"],
        reason=data["reason"],
        tests=tests,
        seconds=float(data.get("seconds", 0.0)),
        output=data.get("output", ""),
        notes=tuple(data.get("notes", ())),
    )


def _write(path: Path, text: str) -> None:
    """Replace `path` with `text` at once (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    partial.write_text(text, encoding="utf-8", newline="\n")
    partial.replace(path)


# ---------------------------------------------------------------------------------------
# Grading.


@dataclass
class BuildGrade:
    """One learner's grade for one build."""

    entry: Entry
    found: Found
    result: SubmissionResult
    source_id: str | None = None
    cached: bool = False

    @property
    def status(self) -> BuildStatus:
        if self.found.problem == "not submitted":
            return "not submitted"
        return self.result.status

    @property
    def score(self) -> int:
        return self.result.score

    @property
    def max_score(self) -> int:
        return self.entry.max_points


@dataclass
class LearnerGrade:
    learner: str
    builds: list[BuildGrade] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(b.score for b in self.builds)

    @property
    def max(self) -> int:
        return sum(b.max_score for b in self.builds)

    @property
    def status(self) -> LearnerStatus:
        statuses = {b.status for b in self.builds}
        if statuses <= {"graded"}:
            return "graded"
        if statuses <= {"error", "not submitted"}:
            return "error"
        return "partial"

    @property
    def reason(self) -> str:
        parts = []
        for build in self.builds:
            if build.status == "graded":
                continue
            why = build.found.problem or build.result.reason or build.status
            parts.append(f"{build.entry.number}: {_one_line(why, 200)}")
        return "; ".join(parts)


@dataclass
class ClassReport:
    builds: list[Entry]
    learners: list[LearnerGrade]
    graded: int = 0
    from_cache: int = 0
    seconds: float = 0.0
    isolation: Isolation | None = None
    skipped_builds: list[str] = field(default_factory=list)
    stub_ids: dict[str, str] = field(default_factory=dict)


def _one_line(text: str, width: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _zero(entry: Entry, label: str, status: Literal["error"], reason: str) -> SubmissionResult:
    tests = tuple(TestResult(t.name, 0, t.points, reason, t.visible) for t in entry.tests)
    return SubmissionResult(entry.number, label, status, reason, tests)


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal; elsewhere a line
    every tenth of the way, so a CI log stays short)."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.cached = 0
        self.start = time.perf_counter()
        self.tty = self.stream.isatty()
        self._shown_tenths = -1
        self._lock = threading.Lock()

    def advance(self, cached: bool = False) -> None:
        with self._lock:
            self.done += 1
            self.cached += cached
            tenths = self.done * 10 // self.total
            if self.tty or tenths != self._shown_tenths or self.done == self.total:
                self._shown_tenths = tenths
                self._draw()

    def _draw(self) -> None:
        filled = self.width * self.done // self.total
        bar = "█" * filled + "░" * (self.width - filled)
        seconds = time.perf_counter() - self.start
        text = (
            f"grading {bar} {self.done}/{self.total} notebooks"
            f" ({self.cached} from cache) {seconds:5.1f} s"
        )
        end = "" if self.tty and self.done < self.total else "\n"
        self.stream.write(("\r" if self.tty else "") + text + end)
        self.stream.flush()


@dataclass
class _Job:
    learner: str
    entry: Entry
    found: Found
    source: str | None = None
    key: str | None = None
    grade: BuildGrade | None = None


class _Pool:
    """Runners shared by worker threads: each runner grades one submission at a time."""

    def __init__(self, size: int, limits: Limits, hide: Sequence[Path]) -> None:
        self.size = size
        self.limits = limits
        self.hide = tuple(str(p) for p in hide)
        self.runners: list[Runner] = []
        self._free: queue.SimpleQueue[Runner] = queue.SimpleQueue()

    def start(self) -> None:
        self.runners = [Runner(self.limits, hide=self.hide) for _ in range(self.size)]
        with ThreadPoolExecutor(max_workers=self.size) as executor:
            list(executor.map(Runner.start, self.runners))
        for runner in self.runners:
            self._free.put(runner)

    @contextlib.contextmanager
    def runner(self) -> Iterator[Runner]:
        runner = self._free.get()
        try:
            yield runner
        finally:
            self._free.put(runner)

    def close(self) -> None:
        for runner in self.runners:
            runner.close()


def grade_class(
    submissions: Path,
    out: Path,
    *,
    workers: int | None = None,
    limits: Limits | None = None,
    manifest: Manifest | None = None,
    progress: TextIO | None = None,
) -> ClassReport:
    """Grade every learner folder in `submissions`, write the outputs into `out`, and return
    what was written. Nothing a submission does raises out of here."""
    start = time.perf_counter()
    manifest = manifest or load_manifest()
    root = manifest.root
    hidden = root / "tests" / "hidden"
    limits = limits or Limits()
    builds = [e for e in manifest.graded if has_suite(e.number, hidden)]
    skipped = [e.number for e in manifest.graded if not has_suite(e.number, hidden)]
    cache = Cache(out / ".cache" / "grades")
    digests = {e.number: grader_digest(e.number, root, hidden, limits) for e in builds}
    suites = {e.number: load_suite(e.number, hidden) for e in builds}

    jobs: list[_Job] = []
    learners = [LearnerGrade(folder.name) for folder in learner_folders(submissions)]
    for learner in learners:
        for entry in builds:
            found = find_notebook(submissions / learner.learner, entry)
            jobs.append(_Job(learner.learner, entry, found))

    bar = Progress(len(jobs), progress)
    pending: list[_Job] = []
    for job in jobs:
        _prepare(job, cache, digests[job.entry.number])
        if job.grade is not None:
            bar.advance(cached=job.grade.cached)
        else:
            pending.append(job)

    report = ClassReport(builds=builds, learners=learners, skipped_builds=skipped)
    # The same cells handed in twice (untouched stubs, a shared copy) are run once.
    same: dict[str, list[_Job]] = collections.defaultdict(list)
    for job in pending:
        assert job.key is not None
        same[job.key].append(job)
    unique = [group[0] for group in same.values()]
    if unique:
        size = max(1, min(workers or os.cpu_count() or 1, len(unique)))
        pool = _Pool(size, limits, hide=(submissions.resolve(), out.resolve()))
        try:
            pool.start()
            report.isolation = pool.runners[0].isolation()

            def grade(job: _Job) -> None:
                with pool.runner() as runner:
                    _grade(job, runner, suites, cache)
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

            with ThreadPoolExecutor(max_workers=size) as executor:
                list(executor.map(grade, unique))
        finally:
            pool.close()
    by_learner: dict[str, LearnerGrade] = {g.learner: g for g in learners}
    for job in jobs:
        assert job.grade is not None
        by_learner[job.learner].builds.append(job.grade)
    report.graded = len(unique)
    report.from_cache = sum(1 for j in jobs if j.grade is not None and j.grade.cached)
    report.stub_ids = _stub_ids(builds, root)
    write_outputs(report, out)
    report.seconds = time.perf_counter() - start
    return report


def _prepare(job: _Job, cache: Cache, digest: str) -> None:
    """Export the notebook (in this process: plain JSON and `compile`, no learner code runs)
    and look its grade up; `job.grade` is set unless the submission must be run."""
    entry, found = job.entry, job.found
    if found.path is None:
        reason = found.problem or "not submitted"
        job.grade = BuildGrade(entry, found, _zero(entry, "", "error", reason))
        return
    try:
        source = export_source(found.path)
    except WorkbookError as exc:
        # The export names the notebook by the grader's path; the learner knows their own.
        reason = str(exc).replace(str(found.path), found.shown)
        job.grade = BuildGrade(entry, found, _zero(entry, found.shown, "error", reason))
        return
    except Exception as exc:  # a notebook crafted to break the exporter breaks only itself
        reason = f"{found.shown}: cannot be read: {type(exc).__name__}: {_one_line(str(exc), 200)}"
        job.grade = BuildGrade(entry, found, _zero(entry, found.shown, "error", reason))
        return
    # The header names the notebook file; only a comment, so identical cells under another
    # file name are the same submission (one cache entry, and a match in the summary).
    source = HEADER.sub("# Exported", source, count=1)
    job.source = source
    source_id = content_id("submission", source)
    job.key = content_id(
        "grade", canonical({"build": entry.number, "grader": digest, "source": source_id})
    )
    hit = cache.get(job.key)
    if hit is not None:
        job.grade = BuildGrade(entry, found, _relabel(hit, found.shown), source_id, cached=True)


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


def _grade(job: _Job, runner: Runner, suites: dict[str, Any], cache: Cache) -> None:
    assert job.source is not None and job.key is not None
    entry = job.entry
    try:
        result = runner.grade_source(
            entry.number,
            job.source,
            label=job.found.shown,
            suite=suites[entry.number],
            entry=entry,
        )
    except Exception as exc:  # the grader's own failure: reported, never cached
        reason = f"{GRADER_FAULT} {type(exc).__name__}: {_one_line(str(exc), 300)}"
        result = _zero(entry, job.found.shown, "error", reason)
    cache.put(job.key, result)
    job.grade = BuildGrade(
        entry, job.found, result, content_id("submission", job.source), cached=False
    )


def _stub_ids(builds: Sequence[Entry], root: Path) -> dict[str, str]:
    """The content id of each build's untouched exercise (identical stubs are no news)."""
    ids = {}
    for entry in builds:
        with contextlib.suppress(WorkbookError, OSError):
            source = HEADER.sub("# Exported", export_source(root / entry.path), count=1)
            ids[entry.number] = content_id("submission", source)
    return ids


# ---------------------------------------------------------------------------------------
# Outputs.


def write_outputs(report: ClassReport, out: Path) -> None:
    """grades.csv, feedback/<learner>.md, summary.md and summary.csv, each replaced whole;
    feedback of learners no longer in the class is removed."""
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "grades.csv", grades_csv(report))
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    keep = set()
    for learner in report.learners:
        name = f"{learner.learner}.md"
        keep.add(name)
        _write(feedback / name, feedback_md(learner))
    for stale in feedback.glob("*.md"):
        if stale.name not in keep:
            stale.unlink()
    rows = summary_rows(report)
    _write(out / "summary.csv", summary_csv(rows))
    _write(out / "summary.md", summary_md(report, rows))


def grades_csv(report: ClassReport) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    numbers = [e.number for e in report.builds]
    writer.writerow(["learner", *numbers, "total", "max", "status", "reason"])
    for learner in report.learners:
        scores = {b.entry.number: b.score for b in learner.builds}
        writer.writerow(
            [
                learner.learner,
                *(scores[n] for n in numbers),
                learner.total,
                learner.max,
                learner.status,
                learner.reason,
            ]
        )
    return buffer.getvalue()


def _fence(text: str) -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _message(text: str) -> str:
    lines = text.splitlines() or [""]
    cut = [ln if len(ln) <= MESSAGE_WIDTH else ln[: MESSAGE_WIDTH - 1] + "…" for ln in lines]
    if len(cut) > MESSAGE_LINES:
        cut = [*cut[:MESSAGE_LINES], f"… ({len(cut) - MESSAGE_LINES} more lines)"]
    return "\n".join(cut)


def feedback_md(learner: LearnerGrade) -> str:
    out = [f"# Feedback for {learner.learner}", ""]
    out.append(
        f"**{learner.total} of {learner.max} points.** Each build below lists its tests;"
        " for each one that did not pass you get what the grader called, what came back,"
        " what it expected (in words where the value is the grader's), and a hint."
    )
    for build in learner.builds:
        entry = build.entry
        out += ["", f"## {entry.number} · {entry.title}: {build.score} of {build.max_score}", ""]
        if build.status == "not submitted":
            out.append(
                f"Not submitted: no `{entry.number}_*.ipynb` in your folder"
                f" (the workbook's is `{entry.path}`)."
            )
            continue
        if build.found.shown:
            out.append(f"Graded from `{build.found.shown}`.")
        if build.status != "graded":
            out += [
                "",
                f"**{build.status}**: "
                + _one_line(build.found.problem or build.result.reason, 600),
            ]
        out += ["", "| | test | points |", "|---|---|---|"]
        for test in build.result.tests:
            mark = "✓" if test.passed else "✗"
            seen = "" if test.visible else " (hidden)"
            out.append(f"| {mark} | `{test.name}`{seen} | {test.points} of {test.max_points} |")
        failed = [t for t in build.result.tests if not t.passed]
        shared = build.result.status == "error" and all(
            t.message == build.result.reason for t in failed
        )
        if failed and not shared:
            hints = {t.name: t.hint for t in entry.tests}
            for test in failed:
                out += ["", f"### ✗ `{test.name}` ({test.points} of {test.max_points})", ""]
                out.append(_fence(_message(test.message)))
                if hints.get(test.name):
                    out += ["", f"Hint: {hints[test.name]}"]
        elif failed:
            out += ["", "Every test above failed for that one reason. Start with the hints:"]
            for spec in entry.tests:
                out.append(f"- `{spec.name}`: {spec.hint}")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class SummaryRow:
    """One test over the learners who handed its build in. A failure is *wrong* (the code ran
    and gave the wrong answer, hung or crashed: what to reteach), *not done* (a stub, a
    missing name) or *broken* (the build did not load, so nothing of it ran)."""

    build: str
    test: str
    points: int
    visible: bool
    submitted: int
    passed: int
    wrong: int
    not_done: int
    broken: int
    common: str
    common_count: int

    @property
    def failed(self) -> int:
        return self.submitted - self.passed


NOT_DONE = "not done yet"


def summary_rows(report: ClassReport) -> list[SummaryRow]:
    """Per test: most often wrong first, then most often not done, then manifest order."""
    ranked: list[tuple[int, int, int, SummaryRow]] = []
    order = 0
    for entry in report.builds:
        handed_in = [
            b
            for learner in report.learners
            for b in learner.builds
            if b.entry.number == entry.number and b.status != "not submitted"
        ]
        for spec in entry.tests:
            outcomes = [(b, b.result.test(spec.name)) for b in handed_in]
            failing = [(b, r) for b, r in outcomes if not r.passed]
            broken = [r for b, r in failing if b.result.status == "error"]
            not_done = [r for b, r in failing if b.result.status != "error" and _not_done(r)]
            wrong = [r for b, r in failing if b.result.status != "error" and not _not_done(r)]
            firsts = collections.Counter(_first_line(r.message) for r in wrong)
            common, count = min(firsts.items(), key=lambda kv: (-kv[1], kv[0]), default=("", 0))
            row = SummaryRow(
                build=entry.number,
                test=spec.name,
                points=spec.points,
                visible=spec.visible,
                submitted=len(outcomes),
                passed=len(outcomes) - len(failing),
                wrong=len(wrong),
                not_done=len(not_done),
                broken=len(broken),
                common=common,
                common_count=count,
            )
            ranked.append((-row.wrong, -row.not_done, order, row))
            order += 1
    return [row for *_, row in sorted(ranked, key=lambda t: t[:3])]


def _not_done(result: TestResult) -> bool:
    return result.message.startswith(NOT_DONE)


def _first_line(message: str) -> str:
    """The line that says most about a failure: the ``got:`` line when there is one."""
    lines = message.splitlines() or [""]
    got = next((ln for ln in lines if ln.startswith("got:")), lines[0])
    return _one_line(got, 100)


def summary_csv(rows: Sequence[SummaryRow]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "build",
            "test",
            "points",
            "visible",
            "submitted",
            "passed",
            "wrong",
            "not_done",
            "broken",
            "most_common_wrong",
        ]
    )
    for row in rows:
        writer.writerow(
            [
                row.build,
                row.test,
                row.points,
                "yes" if row.visible else "no",
                row.submitted,
                row.passed,
                row.wrong,
                row.not_done,
                row.broken,
                row.common,
            ]
        )
    return buffer.getvalue()


def summary_md(report: ClassReport, rows: Sequence[SummaryRow]) -> str:
    learners = report.learners
    out = ["# Class summary", ""]
    out.append(
        f"{len(learners)} learners; graded builds: {', '.join(e.number for e in report.builds)}."
    )
    if report.skipped_builds:
        out.append(
            f"Not graded (graded tests in the manifest but no hidden suite):"
            f" {', '.join(report.skipped_builds)}."
        )
    out += [
        "",
        "## Builds",
        "",
        "| build | handed in | full marks | errors | mean score |",
        "|---|---|---|---|---|",
    ]
    for entry in report.builds:
        grades = [b for g in learners for b in g.builds if b.entry.number == entry.number]
        handed = [b for b in grades if b.status != "not submitted"]
        full = sum(b.score == b.max_score for b in handed)
        errors = sum(b.status == "error" for b in handed)
        mean = sum(b.score for b in handed) / len(handed) if handed else 0.0
        out.append(
            f"| {entry.number} | {len(handed)} of {len(grades)} | {full} | {errors} |"
            f" {mean:.1f} of {entry.max_points} |"
        )
    out += [
        "",
        "## Tests, most often wrong first",
        "",
        "Over the learners who handed the build in. *Wrong*: the code ran and gave a wrong"
        " answer, hung or crashed; that is what to reteach. *Not done*: still a stub."
        " *Broken*: the build did not load, so none of it ran.",
        "",
        "| build | test | wrong | not done | broken | passed | most common wrong result |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        seen = "" if row.visible else " (hidden)"
        common = f"{row.common_count}× {row.common}".replace("|", "\\|") if row.wrong else ""
        out.append(
            f"| {row.build} | `{row.test}`{seen} | {row.wrong} | {row.not_done} | {row.broken}"
            f" | {row.passed} of {row.submitted} | {common} |"
        )
    groups = identical_groups(report)
    out += ["", "## Identical submissions", ""]
    if groups:
        out.append(
            "The same setup and answer cells, character for character (untouched stubs left out):"
        )
        out.append("")
        for number, names in groups:
            out.append(f"- {number}: {', '.join(names)}")
    else:
        out.append("None (untouched stubs left out).")
    return "\n".join(out) + "\n"


def identical_groups(report: ClassReport) -> list[tuple[str, list[str]]]:
    groups: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for learner in report.learners:
        for build in learner.builds:
            number = build.entry.number
            if build.source_id and build.source_id != report.stub_ids.get(number):
                groups[(number, build.source_id)].append(learner.learner)
    return sorted(
        ((number, sorted(names)) for (number, _), names in groups.items() if len(names) > 1),
        key=lambda g: (g[0], g[1]),
    )


# ---------------------------------------------------------------------------------------
# Command line.


def main(argv: Sequence[str] | None = None, *, stdout: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.batch", description=__doc__)
    parser.add_argument("submissions", type=Path, help="one folder per learner")
    parser.add_argument("--out", type=Path, default=Path("grades"))
    parser.add_argument("--workers", type=int, default=None, help="default: one per core")
    args = parser.parse_args(argv)
    return run(args.submissions, args.out, workers=args.workers, stdout=stdout)


def run(
    submissions: Path,
    out: Path,
    *,
    workers: int | None = None,
    stdout: Callable[[str], None] = print,
) -> int:
    """Grade the class, print where the outputs are; 0 once grading finished, 2 when the
    submissions folder is missing, the output folder is inside it, or either holds the
    repository."""
    if not submissions.is_dir():
        stdout(f"SUBMISSIONS={submissions}: no such folder (one subfolder per learner).")
        return 2
    sub, dest = submissions.resolve(), out.resolve()
    if sub == repo_root() or sub in repo_root().parents:
        stdout(f"SUBMISSIONS={submissions} holds the repository: give the folder of the class.")
        return 2
    if dest == repo_root() or dest in repo_root().parents:
        stdout(f"OUT={out} holds the repository: choose a folder of its own (default grades/).")
        return 2
    if dest == sub or sub in dest.parents:
        stdout(f"OUT={out} is inside SUBMISSIONS={submissions}: it would be graded as a learner.")
        return 2
    report = grade_class(submissions, out, workers=workers)
    learners = len(report.learners)
    per = report.seconds / learners if learners else 0.0
    stdout(
        f"Graded {learners} learner(s) in {report.seconds:.1f} s ({per:.2f} s per learner):"
        f" {report.graded} notebook(s) run, {report.from_cache} from the cache."
    )
    if report.isolation is not None:
        iso = report.isolation
        for label, text in (
            ("processes", iso.pids),
            ("network", iso.network),
            ("files", iso.filesystem),
            ("user", iso.user),
        ):
            stdout(f"  {label:<10} {text}")
    if report.skipped_builds:
        stdout("  not graded (no hidden suite yet): " + ", ".join(report.skipped_builds))
    statuses = collections.Counter(g.status for g in report.learners)
    stdout("  " + ", ".join(f"{statuses[s]} {s}" for s in ("graded", "partial", "error")))
    stdout(f"Wrote {out}/grades.csv, {out}/feedback/ ({learners} files), {out}/summary.md.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
