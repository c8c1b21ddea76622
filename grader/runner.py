"""The runner: grade one submission of one build, isolated, on plain observations.

`Runner` owns two fork servers (`grader.forkclient`: interpreters started with PYTHONHASHSEED
1 and 2, everything imported once). For a submission it writes the exported source to a
scratch folder, has the first server fork a walled-in worker that runs every probe of the
build's hidden suite, and the second run the probes that must agree across interpreters. It
reads the worker's JSON lines as they come (`grader.stream`), enforcing a real-time limit per
probe: a probe that hangs costs only its own points, because the worker is killed (its
process group and its whole pids cgroup) and a fresh one runs the probes still to come. Then
the judges, here in the parent, turn the observations into points from the manifest, each
test with the kind of its outcome (`grader.results.Outcome`).

Nothing a submission does raises out of `grade_source`/`grade_notebook`: a notebook that does
not export, code that fails to load, a crash, a hang, `sys.exit`, a memory blow-up, a fork
bomb or a flood of output each end as zeros with a reason. Grading the same submission twice
gives the same points and messages. One `Runner` grades one submission at a time; run one per
worker thread to grade in parallel (each has its own cgroups).
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from grader import sandbox
from grader.forkclient import SCRATCH_ROOT, ForkServer
from grader.judging import Observed, verdict
from grader.protocol import WALL_FAILED, Job, Reply
from grader.results import (
    Outcome,
    ProbeRecord,
    ProbeRun,
    ProbeStatus,
    SubmissionResult,
    SubmissionStatus,
    TestResult,
)
from grader.sandbox import Isolation, Limits
from grader.stream import ResultStream, exit_reason, read_chunk, timeout_reason, void_reason
from grader.suites import Suite, load_suite
from workbook.errors import WorkbookError
from workbook.export import export_source
from workbook.manifest import Entry, load_manifest, repo_root

#: The two interpreters' hash seeds: explicit and different (seeding both to 0 would hide
#: keys that depend on `hash()` or on the iteration order of a set of strings).
HASHSEEDS = ("1", "2")
#: What a worker must never see: the instructor's half of the repository (the grading outputs
#: and the class's submissions are added by whoever grades a batch, through ``hide=``).
SECRET_PARTS = (".git", "solutions", "tests/hidden")
#: Old spelling of a grader fault, for callers that still read reasons: read
#: `SubmissionResult.grader_fault` (or a test's `kind`) instead.
GRADER_FAULT = "grader error:"


class Runner:
    """Grades submissions one at a time. A context manager: leaving it stops its servers."""

    def __init__(
        self,
        limits: Limits | None = None,
        python: str = sys.executable,
        *,
        hide: tuple[str | Path, ...] = (),
    ) -> None:
        """`hide`: folders no worker may see besides `SECRET_PARTS` and the hidden suites
        (a batch adds its output folder and the submissions)."""
        self.limits = limits or Limits()
        self.python = python
        root = repo_root()
        self.secrets = [str(root / part) for part in SECRET_PARTS] + [str(p) for p in hide]
        self.around = str(root.parent)
        self._servers: dict[str, ForkServer] = {}
        _remove_stale_scratch()

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

    def start(self) -> Runner:
        """Start both fork servers at once (otherwise each starts on first use)."""
        fresh = []
        for hashseed in HASHSEEDS:
            if not self._usable(hashseed):
                server = self._servers[hashseed] = ForkServer(hashseed, self.limits, self.python)
                server.spawn()
                fresh.append(server)
        for server in fresh:
            server.wait_ready()
        return self

    def _usable(self, hashseed: str) -> bool:
        server = self._servers.get(hashseed)
        if server is not None and not server.alive():
            server.close()
            del self._servers[hashseed]
            return False
        return server is not None

    def server(self, hashseed: str) -> ForkServer:
        if not self._usable(hashseed):
            server = self._servers[hashseed] = ForkServer(hashseed, self.limits, self.python)
            server.start()
        return self._servers[hashseed]

    def isolation(self) -> Isolation:
        server = self.server(HASHSEEDS[0])
        ready = server.ready
        assert ready is not None  # a started server has said it is ready
        return Isolation(
            pids=server.cgroup is not None,
            pids_text=sandbox.pids_wall(server.cgroup, self.limits.max_pids),
            **ready.walls(),
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
        """Export `notebook` through the one export path, then grade it."""
        start = time.perf_counter()
        entry = entry or load_manifest().entry(build)
        try:
            source = export_source(notebook)
        except WorkbookError as exc:
            return self._all_zero(build, entry, str(notebook), str(exc), start)
        except OSError as exc:
            reason = f"{notebook}: cannot be read: {exc}"
            return self._all_zero(build, entry, str(notebook), reason, start)
        return self.grade_source(build, source, label=str(notebook), suite=suite, entry=entry)

    def grade_source(
        self,
        build: str,
        source: str,
        *,
        label: str = "",
        suite: Suite | None = None,
        entry: Entry | None = None,
    ) -> SubmissionResult:
        """Grade an exported module's text against build `build`'s hidden suite (or `suite`),
        with the points of the manifest's entry (or `entry`)."""
        start = time.perf_counter()
        entry = entry or load_manifest().entry(build)
        suite = suite or load_suite(build)
        run = self.run_probes(source, suite)
        observed = Observed(run.records)
        tests = []
        for spec in entry.tests:
            judge = suite.judges.by_name.get(spec.name)
            if judge is None:
                kind = Outcome.GRADER_FAULT
                problem = f"no judge for {spec.name} in the hidden suite"
            elif run.load_error is not None:
                kind = Outcome.GRADER_FAULT if run.load_fault else Outcome.NOT_LOADED
                problem = run.load_error
            else:
                kind, problem = verdict(judge, observed)
            points = spec.points if kind is Outcome.PASSED else 0
            tests.append(TestResult(spec.name, points, spec.points, problem, spec.visible, kind))
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

    def _all_zero(
        self, build: str, entry: Entry, label: str, reason: str, start: float
    ) -> SubmissionResult:
        tests = tuple(
            TestResult(t.name, 0, t.points, reason, t.visible, Outcome.NOT_LOADED)
            for t in entry.tests
        )
        return SubmissionResult(build, label, "error", reason, tests, time.perf_counter() - start)

    # -- probes --------------------------------------------------------------------------

    def run_probes(self, source: str, suite: Suite) -> ProbeRun:
        """Run every probe of `suite` on `source`; each record says what it saw or why not."""
        run = ProbeRun()
        start = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix=f"rit-{os.getpid()}-grade-", dir=SCRATCH_ROOT))
        try:
            # The worker's own uid may pass through to its folder, but not list this one or
            # read the source (it is read while the worker is still root).
            scratch.chmod(0o711)
            path = scratch / "submission.py"
            path.touch(mode=0o600)
            path.write_text(source, encoding="utf-8")
            first = suite.probes.names
            self._run_all(run, scratch, path, suite, first, HASHSEEDS[0], "", start)
            second = [p.name for p in suite.probes if p.interpreters >= 2]
            if second and run.load_error is None:
                self._run_all(run, scratch, path, suite, second, HASHSEEDS[1], "@2", start)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        run.seconds = time.perf_counter() - start
        return run

    def _run_all(
        self,
        run: ProbeRun,
        scratch: Path,
        source: Path,
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
            stream = ResultStream(pending, suffix, self.limits, source.read_text(encoding="utf-8"))
            code = self._run_job(run, scratch, source, suite, stream, hashseed)
            stream.settle()
            run.records.update({stream.key(n): r for n, r in stream.records.items()})
            exit_code = code if isinstance(code, int) else None
            fault = exit_code == WALL_FAILED
            reason = stream.load_error
            if reason is None and not stream.loaded and not stream.deviation:
                reason = (
                    "your answer cells did not finish running within"
                    f" {self.limits.load_seconds:g} s (an endless loop at the top level?)"
                    if code == "timeout"
                    else "your answer cells could not run: " + exit_reason(exit_code)
                )
                run.load_fault = fault
            if reason is not None:
                run.load_error = reason
                for name in pending:
                    run.records[name + suffix] = ProbeRecord(
                        name + suffix, "load failed", None, reason
                    )
                return
            if stream.current is not None:  # the probe in flight when the worker ended
                name = stream.current
                status: ProbeStatus
                if stream.deviation:
                    status, reason = "void", void_reason(stream.deviation)
                elif code == "timeout":
                    status, reason = "timeout", timeout_reason(self.limits)
                else:
                    status, reason = "crashed", exit_reason(exit_code)
                run.records[name + suffix] = ProbeRecord(
                    name + suffix, status, None, reason, grader_fault=status == "crashed" and fault
                )
            done = set(stream.started)
            if not done:  # the worker made no progress: the next probe takes the blame
                name = pending[0]
                done.add(name)
                if stream.deviation:
                    status, reason = "void", void_reason(stream.deviation)
                else:
                    status, reason = "crashed", exit_reason(exit_code)
                run.records[name + suffix] = ProbeRecord(
                    name + suffix, status, None, reason, grader_fault=status == "crashed" and fault
                )
            pending = [n for n in pending if n not in done]

    def _run_job(
        self,
        run: ProbeRun,
        scratch: Path,
        source: Path,
        suite: Suite,
        stream: ResultStream,
        hashseed: str,
    ) -> int | str | None:
        """Run one worker until it ends or is killed. Returns its exit code, ``"timeout"``
        when the parent killed it for overrunning, or None when the server died."""
        server = self.server(hashseed)
        run.children += 1
        workdir = scratch / f"work-{run.children}"
        workdir.mkdir()
        output_path = scratch / f"output-{run.children}.log"
        output_fd = os.open(output_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        results_r, results_w = os.pipe()
        job = Job(
            suite=str(suite.probes_path),
            probes=tuple(stream.names),
            source=str(source),
            workdir=str(workdir),
            cgroup=server.cgroup_for_workers(),
            limits=self.limits.as_json(),
            secrets=tuple(sorted({*self.secrets, str(suite.folder.parent)})),
            build=suite.build,
            around=self.around,
        )
        try:
            pid = server.submit(job, results_w, output_fd)
        finally:
            os.close(results_w)
            os.close(output_fd)
        outcome: int | str | None = None
        try:
            outcome = self._watch(server, pid, stream, results_r)
        finally:
            server.kill_worker(pid)
            stream.drain(results_r)
            os.close(results_r)
            self._keep_output(run, output_path)
        if stream.deviation is not None:
            run.notes.append(f"results channel: {stream.deviation}")
        return outcome

    def _watch(
        self, server: ForkServer, pid: int, stream: ResultStream, results_r: int
    ) -> int | str | None:
        assert server.sock is not None
        os.set_blocking(results_r, False)
        stream.deadline = time.monotonic() + self.limits.load_seconds + self.limits.grace_seconds
        buffer = b""
        open_pipe = True
        killed = False
        while True:
            now = time.monotonic()
            if not killed and (now > stream.deadline or stream.deviation):
                server.kill_worker(pid)
                killed = True
                stream.deadline = now + 10.0  # the server must now report the exit
            elif killed and now > stream.deadline:
                server.close()  # stuck: the next job starts a new server
                return None
            watch: list[Any] = [server.sock] + ([results_r] if open_pipe else [])
            ready, _, _ = select.select(watch, [], [], max(stream.deadline - now, 0.0))
            if results_r in ready:
                chunk = read_chunk(results_r)
                if chunk is None:
                    open_pipe = False
                else:
                    buffer = stream.take(buffer + chunk)
            if server.sock in ready:
                reply = server.receive(timeout=0.0)
                if reply is None:
                    server.close()
                    return None
                if killed and not stream.deviation:
                    return "timeout"
                kind, fields = reply
                code = fields.get("code") if kind is Reply.EXIT else None
                return code if isinstance(code, int) else None

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


def _remove_stale_scratch() -> None:
    """Remove scratch folders of runners that were killed before they could clean up."""
    root = Path(SCRATCH_ROOT or tempfile.gettempdir())
    for folder in root.glob("rit-*-*"):
        owner = folder.name.split("-")[1]
        if owner.isdigit() and not Path("/proc", owner).exists():
            shutil.rmtree(folder, ignore_errors=True)


def grade_notebook(
    build: str, notebook: str | Path, limits: Limits | None = None
) -> SubmissionResult:
    """Grade one notebook with a runner of its own (starts and stops the servers)."""
    with Runner(limits) as runner:
        return runner.grade_notebook(build, notebook)
