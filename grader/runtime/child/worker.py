"""One job in the walls: the job's first process, the learner's process, and the probes.

The fork server clones the job's *first process* into new namespaces (`walls.clone`): PID 1
of the job. It raises the job's walls (`walls.raise_job_walls`) and forks the *learner's
process*, which locks itself in (`walls.lock_in`), says on the status pipe that its walls are
up, closes that pipe, and only then executes the exported answers and runs the probes, one
JSON line per event on the results pipe, in its working folder. When the learner's process
ends (or the server asks, with SIGUSR1), the first process ends every process left in the
job, copies the files left in the working folder out (`artefacts.copy_tree`) and reports how
the learner's process ended; its own end would end every process of the job anyway.

PID 1 runs none of the learner's code, so the kernel's care for a namespace's PID 1 (signals
it has no handler for are dropped) changes nothing the learner's code sees. The learner's code
never holds the status pipe, so nothing it does (``os._exit`` with any code included) reads as
the grader's own failure. Running a job twice gives the same lines, apart from the
``seconds`` fields.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, NoReturn

from grader.runtime.child import artefacts, walls
from grader.runtime.protocol import CRASHED, Event, Job, Limits, Private, WallsMode
from grader.suites.observe import (
    Probes,
    ProbeTimeout,
    guard_blocking_sleep,
    probe_ends,
    probe_starts,
    raised,
    safe_text,
)
from workbook import siblings
from workbook.shared.modules import execute, fresh_module

#: The name the exported answers run under (for tracebacks; nothing is read from it).
SUBMISSION = "/scratch/work/submission.py"
_armed = False


@dataclass(frozen=True)
class Plan:
    """How one fork server walls its workers in, fixed when it starts."""

    mode: WallsMode
    privileged: bool
    """The server is root: workers drop to `uid` (else they keep the instructor's uid)."""
    uid: int
    keep: tuple[str, ...] = ()
    """What the sandbox binds under /tmp or /dev/shm: put back in the private ones."""

    @property
    def walled(self) -> bool:
        return self.mode == "bwrap"


@dataclass(frozen=True)
class Fds:
    """The descriptors of one job (`grader.runtime.protocol.JOB_FDS`), as its first process holds
    them (the probes' text is the server's alone)."""

    results: int
    output: int
    private: int
    artefacts: int


def report(status: int, **fields: Any) -> None:
    """One line on the status pipe (short: a pipe write that small is never split)."""
    with contextlib.suppress(OSError):
        os.write(status, (json.dumps(fields) + "\n").encode()[:4000])


def first(job: Job, probes: Probes, fds: Fds, status: int, plan: Plan, started: float) -> NoReturn:
    """The job's first process (cloned by the server, PID 1 of the job when walled in):
    never returns. `started`: when the server began the job (for the LOADED report)."""
    code: int | None = None
    learner = 0
    try:
        walls.die_with_parent()
        # A session of its own, so that "the group of my parent" names this process alone
        # (which no signal from inside the job can end), never the grader's group.
        os.setsid()
        private = Private.from_json(_read_all(fds.private))
        limits = Limits(**job.limits)
        if plan.walled:
            walls.raise_job_walls(plan.privileged, plan.uid, limits, private.seams, plan.keep)
        else:
            os.mkdir("work", 0o700, dir_fd=fds.artefacts)
        learner = os.fork()
        if learner == 0:
            _learner(job, probes, fds, status, plan, private, started)
        os.close(fds.results)
        os.close(fds.output)

        def stop(signum: int, frame: Any) -> None:  # the server's kill request
            _kill_the_job(learner, plan)

        signal.signal(signal.SIGUSR1, stop)
        while True:
            ended, raw = os.wait()
            if ended == learner:
                code = os.waitstatus_to_exitcode(raw)
                break
    except BaseException as exc:
        report(status, wall=f"the job's first process: {type(exc).__name__}: {exc}")
        os._exit(0)
    # Nothing of the job may write while its files are copied: end what is left, reap it.
    _kill_the_job(learner, plan, reaped=True)
    with contextlib.suppress(ChildProcessError):
        while True:
            os.wait()
    kept = dropped = 0
    with contextlib.suppress(OSError):
        source = artefacts.open_folder(walls.WORK if plan.walled else "work", fds.artefacts)
        os.mkdir("kept", 0o700, dir_fd=fds.artefacts)
        dest = artefacts.open_folder("kept", fds.artefacts)
        kept, dropped = artefacts.copy_tree(source, dest)
    report(status, code=code, kept=kept, dropped=dropped)
    os._exit(0)


def _kill_the_job(learner: int, plan: Plan, *, reaped: bool = False) -> None:
    """SIGKILL every process of the job but this one: walled in, every other process of
    the PID namespace; without walls, the learner's process (unless `reaped`: its pid may
    be another's by now) and its session."""
    for kill in (os.killpg,) if reaped else (os.kill, os.killpg):
        with contextlib.suppress(OSError):
            kill(learner, signal.SIGKILL)
    if plan.walled:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)  # from PID 1 of the job: every process but itself


def _learner(
    job: Job,
    probes: Probes,
    fds: Fds,
    status: int,
    plan: Plan,
    private: Private,
    started: float,
) -> NoReturn:
    """The learner's process: walls up, status pipe closed, then the answers and the probes."""
    code = CRASHED
    try:
        parent = os.getppid()
        walls.die_with_parent(parent)
        # A session of its own: a signal to "my process group" reaches nothing of the grader.
        os.setsid()
        limits = Limits(**job.limits)
        if plan.walled:
            walls.lock_in(plan.privileged, plan.uid, limits)
            work = artefacts.open_folder(walls.WORK)
            reference = walls.REFERENCE
        else:
            work = artefacts.open_folder("work", fds.artefacts)
            reference = _write_seams(work, private.seams)
            walls.apply_rlimits(limits, nproc=False)
        walls.die_with_parent(parent)  # the uid and namespace changes forgot it
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fds.output, 1)
        os.dup2(fds.output, 2)
        # Kept: stdin/stdout/stderr, the results pipe, the scratch folder, and the status
        # pipe until the walls are up. Not the server's socket, the artefacts folder (the
        # grader's side) or the private input.
        keep = sorted({fds.results, work, status})
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        os.fchdir(work)
        os.environ.update(HOME=os.getcwd(), TMPDIR="/tmp" if plan.walled else os.getcwd())
        os.environ.pop("PWD", None)  # bubblewrap's, of the server's folder
        os.umask(0o077)
        _register_seams(private.seams, reference)
        budget = [int(limits.output_bytes)]
        sys.stdout = _Output(1, budget)
        sys.stderr = _Output(2, budget)
    except BaseException as exc:
        report(status, wall=f"{type(exc).__name__}: {exc}")
        os._exit(CRASHED)
    report(status, up=True)
    os.close(status)
    try:
        setup = time.perf_counter() - started
        code = _run(job, probes, _Channel(fds.results), private.take_source(), limits, setup)
    except BaseException:  # the runner sees the exit code and the events
        code = CRASHED
    finally:
        _timer(0)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)  # no atexit handlers, no finalizers of the learner's objects


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _write_seams(work: int, seams: dict[str, str]) -> str:
    """Without walls: the seams as files in the job's own folder (beside the scratch)."""
    folder = os.path.join(os.path.dirname(os.readlink(f"/proc/self/fd/{work}")), "reference")
    os.makedirs(folder, exist_ok=True)
    for build, text in seams.items():
        with open(os.path.join(folder, f"{build}.py"), "w", encoding="utf-8") as out:
            out.write(text)
    return folder


def _register_seams(seams: dict[str, str], folder: str) -> None:
    """The earlier builds' reference seams this build may load, and no other: a seam the
    probes registered for a build it may not load (a later build's suite may have registered
    the graded build's own) is forgotten here."""
    for build in list(siblings.references()):
        siblings.use_reference(build, None)
    for build in seams:
        siblings.use_reference(build, os.path.join(folder, f"{build}.py"))


def _run(
    job: Job, probes: Probes, channel: _Channel, source: str, limits: Limits, setup: float
) -> int:
    """The answers, then each probe; returns the exit code."""
    signal.signal(signal.SIGALRM, _alarm)
    # Taken before the learner's code runs, so that rebinding the registry changes nothing.
    chosen = [(name, probes.by_name[name].fn) for name in job.probes]
    for name in [m for m in sys.modules if m.startswith("_hidden_")]:
        del sys.modules[name]
    guard_blocking_sleep()
    module = _load(source, channel, limits, setup)
    del source  # nothing up the stack of the learner's code holds the text it was made from
    if module is None:
        return 0
    for name, fn in chosen:
        channel.send({"event": Event.START, "probe": name})
        probe_starts(channel.fd)
        started = time.perf_counter()
        try:
            _timer(limits.probe_seconds)
            observation = fn(module)
            _timer(0)
            event = {"event": Event.DONE, "probe": name, "obs": observation}
        except ProbeTimeout:
            _timer(0)
            event = {"event": Event.TIMEOUT, "probe": name}
        except BaseException as exc:  # a probe must not end the worker
            _timer(0)
            event = {"event": Event.PROBE_ERROR, "probe": name, "error": raised(exc)}
        event["seconds"] = round(time.perf_counter() - started, 4)
        probe_ends()
        channel.send(event)
    channel.send({"event": Event.END})
    return 0


def _load(source: str, channel: _Channel, limits: Limits, setup: float) -> types.ModuleType | None:
    """Execute the exported source as a fresh module, or report why it could not run."""
    module = fresh_module("submission", SUBMISSION)
    # Kept there for the worker's life: dataclasses and typing look their module up by name.
    sys.modules["submission"] = module
    started = time.perf_counter()
    try:
        _timer(limits.load_seconds)
        execute(module, source, SUBMISSION)
        _timer(0)
    except ProbeTimeout:
        _timer(0)
        channel.send({"event": Event.LOAD_ERROR, "error": "timeout", "line": None})
        return None
    except BaseException as exc:
        _timer(0)
        text = safe_text(exc)
        channel.send(
            {
                "event": Event.LOAD_ERROR,
                "error": f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
                "line": _learner_line(exc),
            }
        )
        return None
    loaded = round(time.perf_counter() - started, 4)
    channel.send({"event": Event.LOADED, "seconds": loaded, "setup": round(setup, 4)})
    return module


def _learner_line(exc: BaseException) -> int | None:
    """The last line of the exported source in the traceback (where the learner's code broke)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SUBMISSION:
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename == SUBMISSION:
        line = exc.lineno
    return line


def _alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise ProbeTimeout()


def _timer(seconds: float) -> None:
    global _armed
    _armed = seconds > 0
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.0))


class _Output(io.TextIOBase):
    """stdout/stderr of the worker: written through to the captured file up to a shared cap,
    then counted and dropped, so a chatty but correct answer loses nothing."""

    def __init__(self, fd: int, budget: list[int]) -> None:
        self._fd = fd
        self._budget = budget

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if self._budget[0] <= 0:  # past the cap: count, never encode (a flood stays cheap)
            self._budget[0] -= len(text)
            return len(text)
        data = str(text).encode("utf-8", "backslashreplace")
        room = self._budget[0]
        self._budget[0] -= len(data)
        chunk = data[:room]
        if len(data) > room:
            chunk += b"\n[output cut here by the grader]\n"
        try:
            while chunk:
                chunk = chunk[os.write(self._fd, chunk) :]
        except OSError:
            self._budget[0] = 0
        return len(text)

    def fileno(self) -> int:
        return self._fd

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class _Channel:
    """The results pipe. One JSON object per line; nothing else is ever written to it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, event: dict[str, Any]) -> None:
        try:
            line = json.dumps(event, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            line = json.dumps(
                {
                    "event": Event.PROBE_ERROR,
                    "probe": event.get("probe"),
                    "error": f"observation is not plain JSON: {exc}",
                }
            )
        data = (line + "\n").encode()
        while data:
            data = data[os.write(self.fd, data) :]
