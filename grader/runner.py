"""The runner: grade one submission of one build, isolated, on plain observations.

`Runner` owns two fork servers (interpreters started with PYTHONHASHSEED 1 and 2, everything
imported once). For a submission it writes the exported source to a scratch folder, has the
first server fork a walled-in worker that runs every probe of the build's hidden suite, and
the second run the probes that must agree across interpreters. It reads the worker's JSON
lines as they come, enforcing a real-time limit per probe: a probe that hangs costs only its
own points, because the worker is killed (its process group and its whole pids cgroup) and a
fresh one runs the probes still to come. Then the judges, here in the parent, turn the
observations into points from the manifest.

Nothing a submission does raises out of `grade_source`/`grade_notebook`: a notebook that does
not export, code that fails to load, a crash, a hang, `sys.exit`, a memory blow-up, a fork
bomb or a flood of output each end as zeros with a reason. Grading the same submission twice
gives the same points and messages. One `Runner` grades one submission at a time; run one per
worker thread to grade in parallel (each has its own cgroups).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from grader import sandbox
from grader.judging import Observed, verdict
from grader.results import (
    ProbeRecord,
    ProbeRun,
    ProbeStatus,
    SubmissionResult,
    SubmissionStatus,
    TestResult,
)
from grader.sandbox import Isolation, Limits, PidsCgroup
from grader.suites import Suite, load_suite
from workbook.errors import WorkbookError
from workbook.export import export_source
from workbook.manifest import Entry, load_manifest, repo_root

#: The two interpreters' hash seeds: explicit and different (seeding both to 0 would hide
#: keys that depend on `hash()` or on the iteration order of a set of strings).
HASHSEEDS = ("1", "2")
#: A results line longer than this is not a probe's observation.
MAX_LINE = 4 * 2**20
#: Scratch folders live in RAM where there is a tmpfs: creating and removing them per
#: submission costs milliseconds on a disk.
SCRATCH_ROOT = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None
#: What a worker must never see: the instructor's half of the repository (the grading outputs
#: and the class's submissions are added by whoever grades a batch, through ``hide=``).
SECRET_PARTS = (".git", "solutions", "tests/hidden")
#: A worker exits with this when a wall the server's self-test said works could not be raised.
WALL_FAILED = 71
#: Reasons starting with this are the grader's fault, not the submission's: never cache them.
GRADER_FAULT = "grader error:"
_SIGNALS = {
    signal.SIGKILL: "killed (SIGKILL: out of memory, or stopped by the grader)",
    signal.SIGXCPU: "stopped by the CPU time limit",
    signal.SIGSEGV: "the interpreter crashed (segmentation fault)",
    signal.SIGABRT: "the interpreter aborted",
}


class ServerError(WorkbookError):
    """A fork server could not start or stopped answering (not the submission's fault)."""


class ForkServer:
    """One pre-imported interpreter that forks a fresh worker per job."""

    def __init__(self, hashseed: str, limits: Limits, python: str = sys.executable) -> None:
        self.hashseed = hashseed
        self.limits = limits
        self.python = python
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.cgroup: PidsCgroup | None = None
        self.inside = False
        """Whether the server itself is in `cgroup` (its workers are then born there)."""
        self.network = "not started"
        self.filesystem = "not started"
        self.user = "not started"
        self.hash_probe: int | None = None
        self._home = Path(tempfile.mkdtemp(prefix=f"rit-{os.getpid()}-server-", dir=SCRATCH_ROOT))

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the interpreter; `wait_ready` waits for its imports (spawn several, then wait)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        # glibc gives each thread a 64 MiB arena under RLIMIT_AS unless told otherwise.
        env.update(PYTHONHASHSEED=self.hashseed, MALLOC_ARENA_MAX="2", PYTHONDONTWRITEBYTECODE="1")
        log = (self._home / "server.log").open("wb")
        try:
            self.proc = subprocess.Popen(
                [self.python, "-m", "grader.forkserver", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self._home,
                env=env,
                start_new_session=True,
            )
        finally:
            theirs.close()
            log.close()
        self.sock = ours

    def wait_ready(self) -> None:
        ready = self.receive(timeout=60.0)
        if ready is None or not ready.get("ready"):
            raise ServerError(f"the grading server did not start: {self.log_tail()}")
        self.network = str(ready["network"])
        self.filesystem = str(ready.get("filesystem", "not reported"))
        self.user = str(ready.get("user", "not reported"))
        self.hash_probe = ready.get("hash")
        if self.cgroup is None:
            # One more than the limit: the server is in it too, the workers' parent.
            self.cgroup = PidsCgroup.create(self.limits.max_pids + 1)
            if self.cgroup is not None and self.proc is not None:
                try:
                    sandbox.enter_cgroup(str(self.cgroup.path), self.proc.pid)
                    self.inside = True
                except OSError:  # each worker then joins it itself
                    self.inside = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self._home / "server.log").read_text(errors="replace")[-2000:] or "(no log)"
        return "(no log)"

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when the server is gone or silent for `timeout` s."""
        assert self.sock is not None
        ready, _, _ = select.select([self.sock], [], [], max(timeout, 0.0))
        if not ready:
            return None
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            return None
        if not data:
            return None
        message: dict[str, Any] = json.loads(data)
        return message

    def submit(self, job: dict[str, Any], results_w: int, output_fd: int) -> int:
        """Hand a job to the server; returns the worker's pid."""
        assert self.sock is not None
        socket.send_fds(self.sock, [json.dumps(job).encode()], [results_w, output_fd])
        reply = self.receive(timeout=30.0)
        if reply is None or "pid" not in reply:
            detail = reply.get("error") if reply else self.log_tail()
            raise ServerError(f"the grading server did not start the job: {detail}")
        pid: int = reply["pid"]
        return pid

    def kill_worker(self, pid: int) -> None:
        """Kill the worker, its process group and everything in the cgroup."""
        for kill in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill(pid, signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill_all(keep=self.proc.pid if self.proc is not None else None)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        shutil.rmtree(self._home, ignore_errors=True)


@dataclass
class _Job:
    """The parent's view of one worker: which probe is in flight, what came back.

    The worker writes, in order: ``loaded``, then per probe ``start`` and one report
    (``done``, ``timeout`` or ``probe_error``), then ``end``. A report counts only once the
    worker confirms it by going on (the next ``start``, or ``end``): a report forged by the
    learner's code, which runs in the worker, is followed by the probe's real report or by no
    confirmation at all. Anything off this sequence is a deviation, and every report of the
    worker is void: once something else writes on the channel, none of it can be trusted.
    """

    names: list[str]
    suffix: str
    limits: Limits
    source: str
    loaded: bool = False
    load_error: str | None = None
    started: list[str] = field(default_factory=list)
    current: str | None = None
    records: dict[str, ProbeRecord] = field(default_factory=dict)
    unconfirmed: str | None = None
    ended: bool = False
    deviation: str | None = None
    deadline: float = 0.0

    def key(self, name: str) -> str:
        return name + self.suffix

    def feed(self, line: bytes, now: float) -> None:
        """One line from the results pipe. Anything off the protocol is a deviation."""
        if self.deviation:
            return
        try:
            event = json.loads(line)
            kind = event["event"]
        except (ValueError, TypeError, KeyError):
            self.deviation = "a line on the results channel that is not a probe's report"
            return
        step = self.limits.probe_seconds + self.limits.grace_seconds
        if not self.loaded and self.load_error is None:
            if kind == "loaded":
                self.loaded, self.deadline = True, now + step
            elif kind == "load_error":
                self.load_error = _load_reason(event, self.source)
            else:
                self.deviation = f"a {kind!r} report before the answers had loaded"
            return
        if self.ended:
            self.deviation = f"a {kind!r} report after the worker's last one"
            return
        if self.current is None:
            expected = (
                self.names[len(self.started)] if len(self.started) < len(self.names) else None
            )
            if kind == "start" and expected is not None and event.get("probe") == expected:
                self.current = expected
                self.started.append(expected)
                self.unconfirmed = None
                self.deadline = now + step
            elif kind == "end" and expected is None:
                self.ended, self.unconfirmed = True, None
            else:
                self.deviation = f"an unexpected {kind!r} report between probes"
            return
        name = self.current
        if event.get("probe") != name or kind not in ("done", "timeout", "probe_error"):
            self.deviation = f"an unexpected {kind!r} report while {name} was running"
            return
        seconds = float(event.get("seconds", 0.0))
        if kind == "done":
            record = ProbeRecord(self.key(name), "done", event.get("obs"), "", seconds)
        elif kind == "timeout":
            record = ProbeRecord(self.key(name), "timeout", None, _timeout_reason(self.limits))
        else:
            error = event.get("error")
            text = error if isinstance(error, str) else json.dumps(error)
            record = ProbeRecord(
                self.key(name), "error", None, f"the probe itself failed: {text}", seconds
            )
        self.records[name] = record
        self.current = None
        self.unconfirmed = name
        self.deadline = now + step

    def settle(self) -> None:
        """Once the worker is gone: void what a deviation taints or nothing confirmed."""
        if self.deviation is not None:
            reason = _void_reason(self.deviation)
            for name in self.records:
                self.records[name] = ProbeRecord(self.key(name), "void", None, reason)
        elif self.unconfirmed is not None:
            name = self.unconfirmed
            reason = _void_reason("the worker ended right after this report, unconfirmed")
            self.records[name] = ProbeRecord(self.key(name), "void", None, reason)


def _timeout_reason(limits: Limits) -> str:
    return (
        f"timed out: the code under test did not return within {limits.probe_seconds:g} s of"
        " real time (an endless loop, or a blocking wait?)"
    )


def _load_reason(event: dict[str, Any], source: str) -> str:
    error = event.get("error")
    if error == "timeout":
        return "your answer cells did not finish running (an endless loop at the top level?)"
    line = event.get("line")
    cell = _cell_of(line, source) if isinstance(line, int) else ""
    return f"your answer cells could not run: {error}" + (f" (in {cell})" if cell else "")


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the grading process stopped answering"
    if code == WALL_FAILED:
        return (
            f"{GRADER_FAULT} the worker could not be walled in (not your submission's fault;"
            " tell your instructor)"
        )
    if code < 0:
        sig = -code
        known = _SIGNALS.get(signal.Signals(sig)) if sig in signal.valid_signals() else None
        return known or f"killed by signal {sig}"
    return f"the process exited with code {code} (sys.exit or os._exit in your code?)"


def _cell_of(line: int, source: str) -> str:
    """Which notebook cell an exported line belongs to, from the export's ``# %%`` markers."""
    cell = ""
    for number, text in enumerate(source.splitlines(), start=1):
        if number > line:
            break
        match = re.match(r"# %% cell (\d+) \[(\w+)\]", text)
        if match:
            cell = f"cell {match[1]} ({match[2]})"
    return cell


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
        return Isolation(
            pids=sandbox.pids_wall(server.cgroup, self.limits.max_pids),
            network=server.network,
            filesystem=server.filesystem,
            user=server.user,
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
                problem: str | None = f"no judge for {spec.name} in the hidden suite"
            elif run.load_error is not None:
                problem = run.load_error
            else:
                problem = verdict(judge, observed)
            points = spec.points if problem is None else 0
            tests.append(TestResult(spec.name, points, spec.points, problem or "", spec.visible))
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
        tests = tuple(TestResult(t.name, 0, t.points, reason, t.visible) for t in entry.tests)
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
            second = [p.name for p in suite.probes.by_name.values() if p.interpreters >= 2]
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
            job = _Job(pending, suffix, self.limits, source.read_text(encoding="utf-8"))
            code = self._run_job(run, scratch, source, suite, job, hashseed)
            job.settle()
            run.records.update({job.key(n): r for n, r in job.records.items()})
            reason = job.load_error
            if reason is None and not job.loaded and not job.deviation:
                reason = (
                    "your answer cells did not finish running within"
                    f" {self.limits.load_seconds:g} s (an endless loop at the top level?)"
                    if code == "timeout"
                    else "your answer cells could not run: "
                    + _exit_reason(code if isinstance(code, int) else None)
                )
            if reason is not None:
                run.load_error = reason
                for name in pending:
                    run.records[name + suffix] = ProbeRecord(
                        name + suffix, "load failed", None, reason
                    )
                return
            if job.current is not None:  # the probe in flight when the worker ended
                name = job.current
                status: ProbeStatus
                if job.deviation:
                    status, reason = "void", _void_reason(job.deviation)
                elif code == "timeout":
                    status, reason = "timeout", _timeout_reason(self.limits)
                else:
                    status, reason = (
                        "crashed",
                        _exit_reason(code if isinstance(code, int) else None),
                    )
                run.records[name + suffix] = ProbeRecord(name + suffix, status, None, reason)
            done = set(job.started)
            if not done:  # the worker made no progress: the next probe takes the blame
                name = pending[0]
                done.add(name)
                if job.deviation:
                    status, reason = "void", _void_reason(job.deviation)
                else:
                    status, reason = (
                        "crashed",
                        _exit_reason(code if isinstance(code, int) else None),
                    )
                run.records[name + suffix] = ProbeRecord(name + suffix, status, None, reason)
            pending = [n for n in pending if n not in done]

    def _run_job(
        self,
        run: ProbeRun,
        scratch: Path,
        source: Path,
        suite: Suite,
        job: _Job,
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
        payload = {
            "suite": str(suite.probes_path),
            "probes": job.names,
            "source": str(source),
            "workdir": str(workdir),
            "cgroup": str(server.cgroup.path) if server.cgroup and not server.inside else None,
            "limits": self.limits.as_json(),
            "secrets": sorted({*self.secrets, str(suite.folder.parent)}),
            "build": suite.build,
            "around": self.around,
        }
        try:
            pid = server.submit(payload, results_w, output_fd)
        finally:
            os.close(results_w)
            os.close(output_fd)
        outcome: int | str | None = None
        try:
            outcome = self._watch(server, pid, job, results_r)
        finally:
            server.kill_worker(pid)
            _drain(results_r, job)
            os.close(results_r)
            self._keep_output(run, output_path)
        if job.deviation is not None:
            run.notes.append(f"results channel: {job.deviation}")
        return outcome

    def _watch(self, server: ForkServer, pid: int, job: _Job, results_r: int) -> int | str | None:
        assert server.sock is not None
        os.set_blocking(results_r, False)
        job.deadline = time.monotonic() + self.limits.load_seconds + self.limits.grace_seconds
        buffer = b""
        open_pipe = True
        killed = False
        while True:
            now = time.monotonic()
            if not killed and (now > job.deadline or job.deviation):
                server.kill_worker(pid)
                killed = True
                job.deadline = now + 10.0  # the server must now report the exit
            elif killed and now > job.deadline:
                server.close()  # stuck: the next job starts a new server
                return None
            watch: list[Any] = [server.sock] + ([results_r] if open_pipe else [])
            ready, _, _ = select.select(watch, [], [], max(job.deadline - now, 0.0))
            if results_r in ready:
                chunk = _read(results_r)
                if chunk is None:
                    open_pipe = False
                else:
                    buffer = _feed(job, buffer + chunk)
            if server.sock in ready:
                message = server.receive(timeout=0.0)
                if message is None:
                    server.close()
                    return None
                exit_code = message.get("exit")
                if killed and not job.deviation:
                    return "timeout"
                return exit_code if isinstance(exit_code, int) else None

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


def _read(fd: int) -> bytes | None:
    try:
        chunk = os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""
    return chunk or None


def _feed(job: _Job, buffer: bytes) -> bytes:
    now = time.monotonic()
    *lines, rest = buffer.split(b"\n")
    for line in lines:
        job.feed(line, now)
    if len(rest) > MAX_LINE:
        job.deviation = "a report longer than any probe writes"
        return b""
    return rest


def _drain(fd: int, job: _Job) -> None:
    """Read what the killed worker left in the pipe (its writers are all dead now)."""
    os.set_blocking(fd, True)
    buffer = b""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0.0))
        if not ready:
            break
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buffer = _feed(job, buffer + chunk)
        if len(buffer) > MAX_LINE:
            break


def _void_reason(deviation: str) -> str:
    return (
        "not graded: something other than the probe wrote to the grader's results channel"
        f" ({deviation})"
    )


def grade_notebook(
    build: str, notebook: str | Path, limits: Limits | None = None
) -> SubmissionResult:
    """Grade one notebook with a runner of its own (starts and stops the servers)."""
    with Runner(limits) as runner:
        return runner.grade_notebook(build, notebook)
