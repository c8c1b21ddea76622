"""The runner: grade one submission of one build, walled in, on plain observations.

`Runner` owns two fork servers (`grader.runtime.forkclient`: interpreters started with
PYTHONHASHSEED 1 and 2, everything imported once, each inside its own bubblewrap sandbox). For a
submission the first server forks a walled-in worker that runs every probe of the build's hidden
suite, and the second one runs the probes that must agree across interpreters. The submission and
the reference seams it may load reach the worker alone, through a private in-memory file; nothing of
them is ever on a disk the walls show. The runner reads the worker's JSON lines as they come
(`grader.runtime.stream`), enforcing a real-time limit per probe: a probe that hangs costs only its
own points, because the server kills the job (every process of it: they share a PID namespace) and a
fresh worker runs the probes still to come. The files each worker left in its scratch folder are
copied out (`ProbeRun.artefacts`) for the judges, which then, here in the parent, turn the
observations into points from the manifest, each test with the kind of its outcome
(`grader.runtime.results.Outcome`).

Nothing a submission does raises out of `grade_source`/`grade_notebook`: a notebook that does
not export, code that fails to load, a crash, a hang, `sys.exit`, ``os._exit`` with any code,
a memory blow-up, a fork bomb or a flood of output each end as zeros with a reason, and only a
wall that did not rise (reported out of band, `grader.runtime.protocol.Exit`) is the grader's fault.
Grading the same submission twice gives the same points and messages. One `Runner` grades one
submission at a time; run one per worker thread to grade in parallel.
"""

from __future__ import annotations

import dataclasses
import os
import select
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from grader.learner_tests.wheats import TestCells, grade_learner_tests, read_test_cells
from grader.runtime import sandbox
from grader.runtime.child.artefacts import open_folder
from grader.runtime.cleanup import remove_stale_scratch, remove_tree
from grader.runtime.forkclient import SCRATCH_ROOT, ForkServer, digest
from grader.runtime.protocol import Exit, Job, Private, Reply, WallsMode
from grader.runtime.results import (
    Outcome,
    ProbeRecord,
    ProbeRun,
    ProbeStatus,
    SubmissionResult,
    SubmissionStatus,
    TestResult,
    all_zero,
    fault_sentence,
    zero_results,
)
from grader.runtime.sandbox import Isolation, Limits
from grader.runtime.stream import ResultStream, exit_reason, read_chunk, timeout_reason, void_reason
from grader.suites.judging import Observed, verdict
from grader.suites.loading import Suite, load_suite, module_name
from workbook import siblings
from workbook.shared import buildfolder
from workbook.shared.errors import WorkbookError
from workbook.shared.export import export_source
from workbook.shared.manifest import Entry, TestSpec, load_manifest, repo_root

#: The two interpreters' hash seeds: explicit and different (seeding both to 0 would hide
#: keys that depend on `hash()` or on the iteration order of a set of strings).
HASHSEEDS = ("1", "2")
#: What a worker must never see: the instructor's half of the repository (the grading outputs
#: and the class's submissions are added by whoever grades a batch, through ``hide=``). The
#: walls are an allowlist, so none of it is there anyway; these are covered as well should an
#: allowed folder ever hold one of them.
SECRET_PARTS = (".git", "solutions")


class WallsUnavailable(WorkbookError):
    """Walls were asked for and cannot be raised here; the message is `sandbox.refusal`."""


@dataclass(frozen=True)
class JobEnd:
    """How one worker ended, as the runner tells it."""

    code: int | None = None
    """The learner's process's exit code (negative: a signal)."""
    timeout: bool = False
    """The runner had the job killed for overrunning."""
    fault: str | None = None
    """The grader's own failure (a wall that did not rise, a server lost), in words."""


def _judged(spec: TestSpec, suite: Suite, run: ProbeRun, observed: Observed) -> TestResult:
    """The hidden test `spec` of a submission whose probes made `run`, as its judge says."""
    judge = suite.judges.by_name.get(spec.name)
    got = None
    if judge is None:
        kind = Outcome.GRADER_FAULT
        problem = f"no judge for {spec.name} in the hidden suite"
    elif run.load_error is not None:
        kind = Outcome.GRADER_FAULT if run.load_fault else Outcome.NOT_LOADED
        problem = run.load_error
    else:
        judged = verdict(judge, observed)
        kind, problem, got = judged.kind, str(judged.message), judged.got
    points = spec.points if kind is Outcome.PASSED else 0
    return TestResult(spec.name, points, spec.points, problem, spec.visible, kind, got)


class Runner:
    """Grades submissions one at a time. A context manager: leaving it stops its servers."""

    def __init__(
        self,
        limits: Limits | None = None,
        python: str = sys.executable,
        *,
        hide: tuple[str | Path, ...] = (),
        walls: WallsMode | None = None,
        learner_tests: bool = True,
    ) -> None:
        """`walls`: ``"bwrap"`` (raises `WallsUnavailable` when they cannot be raised here),
        ``"off"`` or ``"container"``; None: walls where they can be raised, else none (for
        the instructor's own notebooks). `hide`: folders covered besides `SECRET_PARTS` and
        each build's ``hidden/``, should an allowed folder hold them (a batch adds its output
        folder and the submissions).
        `learner_tests`: whether learner tests will run (their server then warms Hypothesis
        up; without it they still run, each worker importing it)."""
        self.learner_tests = learner_tests
        self.limits = limits or Limits()
        self.python = python
        self.walls: WallsMode = walls or sandbox.default_walls(python)
        if self.walls not in sandbox.WALLS_MODES:
            raise ValueError(f"walls must be one of {', '.join(sandbox.WALLS_MODES)}")
        if self.walls == "bwrap":
            problem = sandbox.walls_problem(python)
            if problem is not None:
                raise WallsUnavailable(sandbox.refusal(problem))
        root = repo_root()
        hidden = tuple(map(str, buildfolder.hidden_folders(root)))
        self.secrets = tuple(str(root / p) for p in SECRET_PARTS) + hidden + tuple(map(str, hide))
        self._servers: dict[str, ForkServer] = {}
        self._kept: list[Path] = []
        self._texts: dict[Path, bytes] = {}
        remove_stale_scratch(SCRATCH_ROOT)

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        for folder in self._kept:
            remove_tree(folder)
        self._kept.clear()

    def _new_server(self, hashseed: str) -> ForkServer:
        return ForkServer(hashseed, self.limits, self.python, walls=self.walls, hide=self.secrets)

    def start(self) -> Runner:
        """Start both fork servers at once (otherwise each starts on first use)."""
        for server in self.spawn():
            server.wait_ready()
        return self

    def spawn(self) -> list[ForkServer]:
        """Start the fork servers not yet running, without waiting for their imports: the
        ones started, each to `ForkServer.wait_ready` on before its first job."""
        fresh = []
        for hashseed in HASHSEEDS:
            if not self._usable(hashseed):
                server = self._servers[hashseed] = self._new_server(hashseed)
                server.spawn()
                self._warm(server)
                fresh.append(server)
        return fresh

    def warm(self) -> None:
        """Learner tests will run: their server warms Hypothesis up (now, or when it starts).
        Only while no job is in flight. Said, and left: learner code can tell a warmed server
        by its modules, so code written to could score otherwise in a batch with no learner
        tests to run; no honest answer reads `sys.modules`."""
        self.learner_tests = True
        server = self._servers.get(HASHSEEDS[0])
        if server is not None:
            self._warm(server)

    def _warm(self, server: ForkServer) -> None:
        # Learner tests run in the first interpreter only (`grader.learner_tests.wheatprobe`: one of
        # them).
        if self.learner_tests and server.hashseed == HASHSEEDS[0]:
            server.warm()

    def _usable(self, hashseed: str) -> bool:
        server = self._servers.get(hashseed)
        if server is not None and not server.alive():
            server.close()
            del self._servers[hashseed]
            return False
        return server is not None

    def server(self, hashseed: str) -> ForkServer:
        if not self._usable(hashseed):
            server = self._servers[hashseed] = self._new_server(hashseed)
            server.start()
            self._warm(server)
        return self._servers[hashseed]

    def isolation(self) -> Isolation:
        server = self.server(HASHSEEDS[0])
        ready = server.ready
        assert ready is not None  # a started server has said it is ready
        return sandbox.isolation(
            self.walls, ready.privileged, server.cgroup is not None, self.limits
        )

    # -- grading -------------------------------------------------------------------------

    def grade_notebook(
        self,
        build: str,
        notebook: str | Path,
        *,
        suite: Suite | None = None,
        entry: Entry | None = None,
    ) -> SubmissionResult:
        """Export `notebook` through the one export path, then grade it (its test cells too,
        when the build has learner tests)."""
        start = time.perf_counter()
        entry = entry or load_manifest().entry(build)
        try:
            source = export_source(notebook)
        except WorkbookError as exc:
            reason = str(exc)
        except OSError as exc:
            reason = f"{notebook}: cannot be read: {exc}"
        else:
            cells = read_test_cells(notebook) if entry.learner_tests else None
            return self.grade_source(
                build, source, label=str(notebook), suite=suite, entry=entry, cells=cells
            )
        seconds = time.perf_counter() - start
        return all_zero(build, entry, str(notebook), reason, Outcome.NOT_LOADED, seconds)

    def grade_source(
        self,
        build: str,
        source: str,
        *,
        label: str = "",
        suite: Suite | None = None,
        entry: Entry | None = None,
        cells: TestCells | None = None,
        root: Path | None = None,
        known_tests: Sequence[TestResult] | None = None,
    ) -> SubmissionResult:
        """Grade an exported module's text against build `build`'s hidden suite (or `suite`), with
        the points of the manifest's entry (or `entry`). `cells`: the submission's test cells,
        graded by wheats and chaffs (`grader.learner_tests.wheats`, against the solutions under
        `root`, default this repository); None leaves the learner tests out of the result (a known
        bug of the answers, say). `known_tests`: those cells' results, already graded (they depend
        on the test cells alone, never on the answers), used as they are once the answers load."""
        start = time.perf_counter()
        entry = entry or load_manifest().entry(build)
        suite = suite or load_suite(build)
        run = self.run_probes(source, suite)
        observed = Observed(run.records, source=source, artefacts=run.artefacts)
        tests = [_judged(spec, suite, run, observed) for spec in entry.tests]
        self.discard(run)  # judged: the artefacts have served
        if cells is not None and run.load_error is not None:
            # A build that does not load scores zero for one reason, its own tests included.
            kind = Outcome.GRADER_FAULT if run.load_fault else Outcome.NOT_LOADED
            tests += zero_results(entry, run.load_error, kind)
        elif cells is not None and known_tests is not None:
            tests += known_tests
        elif cells is not None:
            tests += grade_learner_tests(self, entry, suite, cells, root=root or repo_root())
        unfinished = [r for r in run.records.values() if r.status != "done"]
        status: SubmissionStatus
        if run.load_error is not None:
            status, reason = "error", run.load_error
        elif unfinished:
            kinds = sorted({r.status for r in unfinished})
            status = "partial"
            reason = f"{len(unfinished)} probe(s) did not finish ({', '.join(kinds)})"
        else:
            status, reason = "graded", ""
        return SubmissionResult(
            build=build,
            label=label,
            status=status,
            reason=reason,
            tests=tuple(tests),
            seconds=time.perf_counter() - start,
            output=run.output,
            notes=tuple(run.notes),
        )

    # -- probes --------------------------------------------------------------------------

    def run_probes(
        self, source: str, suite: Suite, *, probe_seconds: float | None = None
    ) -> ProbeRun:
        """Run every probe of `suite` on `source`; each record says what it saw or why not.
        The worker's files are in ``run.artefacts`` until `discard` (or `close`).
        `probe_seconds`: this run's real-time limit per probe, instead of the runner's."""
        if probe_seconds is None:
            return self._run_probes(source, suite)
        limits = self.limits
        self.limits = dataclasses.replace(limits, probe_seconds=probe_seconds)
        try:
            return self._run_probes(source, suite)
        finally:
            self.limits = limits

    def _run_probes(self, source: str, suite: Suite) -> ProbeRun:
        run = ProbeRun()
        start = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix=f"rit-{os.getpid()}-grade-", dir=SCRATCH_ROOT))
        run.artefacts = scratch / "artefacts"
        run.artefacts.mkdir()
        self._kept.append(scratch)
        private = Private(source, self._seams(suite.build))
        first = suite.probes.names
        self._run_all(run, scratch, private, suite, first, HASHSEEDS[0], "", start)
        second = [p.name for p in suite.probes if p.interpreters >= 2]
        if second and run.load_error is None:
            self._run_all(run, scratch, private, suite, second, HASHSEEDS[1], "@2", start)
        run.seconds = time.perf_counter() - start
        return run

    def discard(self, run: ProbeRun) -> None:
        """Remove what `run_probes` kept of `run` (its artefacts); a second call does nothing."""
        if run.artefacts is not None:
            scratch = run.artefacts.parent
            run.artefacts = None
            remove_tree(scratch)
            if scratch in self._kept:
                self._kept.remove(scratch)

    def _seams(self, build: str) -> dict[str, str]:
        """The reference seams of the earlier builds that build `build` may load (registered
        by the suites' probes with `workbook.siblings.use_reference`), as text: never the
        graded build's own, nor a later one's (a server serves every build)."""
        return {
            number: self._text(path).decode("utf-8")
            for number, path in sorted(siblings.references().items())
            if build and number < build
        }

    def _text(self, path: Path) -> bytes:
        """A suite file's bytes, read once per runner: the probes a worker runs are the ones
        the judges here were loaded with (`load_suite` loads each once), even if the file
        changes meanwhile."""
        if path not in self._texts:
            self._texts[path] = path.read_bytes()
        return self._texts[path]

    def _run_all(
        self,
        run: ProbeRun,
        scratch: Path,
        private: Private,
        suite: Suite,
        names: list[str],
        hashseed: str,
        suffix: str,
        start: float,
    ) -> None:
        pending = list(names)
        while pending:
            if time.perf_counter() - start > self.limits.budget_seconds:
                for name in pending:
                    run.records[name + suffix] = ProbeRecord(
                        name + suffix,
                        "not run",
                        reason=f"not run: the submission used up its {self.limits.budget_seconds:g}"
                        " s time budget",
                    )
                return
            stream = ResultStream(pending, suffix, self.limits, private.source)
            end = self._run_job(run, scratch, private, suite, stream, hashseed, suffix)
            stream.settle()
            run.records.update({stream.key(n): r for n, r in stream.records.items()})
            reason = stream.load_error
            if reason is None and not stream.loaded and not stream.deviation:
                if end.fault is not None:
                    reason, run.load_fault = end.fault, True
                elif end.timeout:
                    reason = (
                        "your answer cells did not finish running within"
                        f" {self.limits.load_seconds:g} s (an endless loop at the top level?)"
                    )
                else:
                    reason = "your answer cells could not run: " + exit_reason(end.code)
            if reason is not None:
                run.load_error = reason
                for name in pending:
                    run.records[name + suffix] = ProbeRecord(
                        name + suffix, "load failed", None, reason
                    )
                return
            done = set(stream.started)
            # The probe in flight when the worker ended; the next one when it made no progress.
            blamed = stream.current if stream.current is not None else None
            if not done:
                blamed = pending[0]
                done.add(blamed)
            if blamed is not None:
                run.records[blamed + suffix] = self._unfinished(
                    blamed + suffix, stream, end, in_flight=blamed == stream.current
                )
            pending = [n for n in pending if n not in done]

    def _unfinished(
        self, key: str, stream: ResultStream, end: JobEnd, *, in_flight: bool
    ) -> ProbeRecord:
        status: ProbeStatus
        if stream.deviation:
            status, reason = "void", void_reason(stream.deviation)
        elif end.fault is not None:
            return ProbeRecord(key, "crashed", None, end.fault, grader_fault=True)
        elif end.timeout and in_flight:
            status, reason = "timeout", timeout_reason(self.limits)
        else:
            status, reason = "crashed", exit_reason(end.code)
        return ProbeRecord(key, status, None, reason)

    def _run_job(
        self,
        run: ProbeRun,
        scratch: Path,
        private: Private,
        suite: Suite,
        stream: ResultStream,
        hashseed: str,
        suffix: str,
    ) -> JobEnd:
        """Run one worker until it ends or is killed, then keep its artefacts."""
        server = self.server(hashseed)
        run.children += 1
        folder = scratch / f"job-{run.children}"
        folder.mkdir(mode=0o700)
        output_path = scratch / f"output-{run.children}.log"
        output_fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        folder_fd = open_folder(str(folder))
        results_r, results_w = os.pipe()
        text = self._text(suite.probes_path)
        job = Job(
            suite=str(suite.probes_path),
            module=module_name(suite.probes_path),
            digest=digest(text),
            probes=tuple(stream.names),
            build=suite.build,
            limits=self.limits.as_json(),
        )
        try:
            server.submit(job, text, private, results_w, output_fd, folder_fd)
        finally:
            os.close(results_w)
            os.close(output_fd)
            os.close(folder_fd)
        end = JobEnd(fault=fault_sentence("the grading server stopped answering"))
        try:
            end = self._watch(server, stream, results_r)
        except BaseException:
            # The job may still be in flight there: the next job must not read its end.
            server.close()
            raise
        finally:
            server.kill_leftovers()
            stream.drain(results_r)
            os.close(results_r)
            self._keep_output(run, output_path)
            self._keep_artefacts(run, folder, suffix)
        if stream.deviation is not None:
            run.notes.append(f"results channel: {stream.deviation}")
        return end

    def _watch(self, server: ForkServer, stream: ResultStream, results_r: int) -> JobEnd:
        assert server.sock is not None
        os.set_blocking(results_r, False)
        stream.deadline = time.monotonic() + self.limits.load_seconds + self.limits.grace_seconds
        open_pipe = True
        killed = False
        lost = JobEnd(fault=fault_sentence("the grading server stopped answering"))
        while True:
            now = time.monotonic()
            if not killed and (now > stream.deadline or stream.deviation):
                server.kill_job()
                killed = True
                stream.deadline = now + 10.0  # the server must now report the end
            elif killed and now > stream.deadline:
                server.close()  # stuck: the next job starts a new server
                return lost
            watch: list[Any] = [server.sock] + ([results_r] if open_pipe else [])
            ready, _, _ = select.select(watch, [], [], max(stream.deadline - now, 0.0))
            if results_r in ready:
                chunk = read_chunk(results_r)
                if chunk is None:
                    open_pipe = False
                else:
                    stream.take(chunk)
            if server.sock in ready:
                reply = server.receive(timeout=0.0)
                if reply is None or reply[0] is not Reply.EXIT:
                    server.close()
                    return lost
                return self._ended(Exit.from_json(reply[1]), killed and not stream.deviation)

    def _ended(self, end: Exit, timeout: bool) -> JobEnd:
        """What the server's report of a job's end means. Only what came out of band (the
        walls not up) is the grader's fault; after that, every exit is the learner's."""
        if end.wall is not None:
            return JobEnd(fault=fault_sentence(f"a wall could not be raised: {end.wall}"))
        if not end.up:
            return JobEnd(fault=fault_sentence("the worker ended before its walls were up"))
        return JobEnd(code=end.code, timeout=timeout)

    def _keep_artefacts(self, run: ProbeRun, folder: Path, suffix: str) -> None:
        """Move what the job's first process copied out of the working folder (``kept``, its own
        copy: regular files and folders only, bounded) into ``run.artefacts`` (the second
        interpreter's into ``@2``), the first copy of a name winning; then remove the rest
        (without walls, the learner's own folder) however deep it goes."""
        kept = folder / "kept"
        if run.artefacts is not None and kept.is_dir() and not kept.is_symlink():
            dest = run.artefacts / suffix if suffix else run.artefacts
            dest.mkdir(exist_ok=True)
            for entry in os.scandir(kept):
                target = dest / entry.name
                if not os.path.lexists(target):
                    os.rename(entry.path, target)
        remove_tree(folder)

    def _keep_output(self, run: ProbeRun, path: Path) -> None:
        """Keep the start of what the worker printed (up to the limit), never parse it."""
        try:
            size = path.stat().st_size
            with path.open("rb") as captured:
                room = max(self.limits.output_bytes - run.output_bytes, 0)
                kept = captured.read(room)
        except OSError:
            return
        run.output += kept.decode("utf-8", "replace")
        if size > len(kept) and run.output_bytes + len(kept) >= self.limits.output_bytes:
            run.output += f"\n[output cut here by the grader: {size - len(kept)} bytes not kept]\n"
        run.output_bytes += size


def grade_notebook(
    build: str, notebook: str | Path, limits: Limits | None = None, walls: WallsMode | None = None
) -> SubmissionResult:
    """Grade one notebook with a runner of its own (starts and stops the servers)."""
    with Runner(limits, walls=walls) as runner:
        return runner.grade_notebook(build, notebook)
