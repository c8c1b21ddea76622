"""The fork server: a child interpreter that imports everything once, then forks per job.

Started by the runner as ``python -m grader.forkserver FD`` with a fixed PYTHONHASHSEED.
It leaves the network, becomes a subreaper, finds out which walls against root this machine
allows (`sandbox.probe_walls`), and waits on the socket FD for jobs. For each job it forks a
worker that walls itself in (new session, pids cgroup, a private view of the filesystem with
the secrets covered, a uid of its own, rlimits, scratch folder, captured and capped output),
executes the exported answers from text, and runs the named probes, writing one JSON line per
event on the results pipe it was handed. The worker never returns into the server; the server
reports the worker's pid, then how it ended. Every message is spelled in `grader.protocol`.

A job's results depend only on the exported source and the probes, so running it twice gives
the same lines (apart from the ``seconds`` fields).
"""

from __future__ import annotations

# Imported once here, so that every worker starts with them loaded (fork copies them).
import asyncio  # noqa: F401
import contextlib
import dataclasses
import gc
import hashlib  # noqa: F401
import io
import json
import math  # noqa: F401
import os
import random  # noqa: F401
import signal
import socket
import sys
import time
import types
from pathlib import Path
from typing import Any

import looptime  # noqa: F401

import etl  # noqa: F401
from grader import sandbox
from grader.observe import (
    Probes,
    ProbeTimeout,
    guard_blocking_sleep,
    raised,
    safe_text,
)
from grader.protocol import CRASHED, WALL_FAILED, Event, Job, Ready, Reply, encode_reply
from grader.suites import load_probes
from workbook.modules import execute, fresh_module

_suites: dict[str, Probes] = {}
_armed = False


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    network, network_text = sandbox.leave_network()
    sandbox.become_subreaper()
    walls = sandbox.probe_walls(os.getcwd())
    ready = Ready(
        network=network,
        network_text=network_text,
        filesystem=walls.filesystem,
        filesystem_text=walls.filesystem_text,
        user=walls.user,
        user_text=walls.user_text,
        hashseed=os.environ.get("PYTHONHASHSEED", "random"),
        hash=hash("run-it-twice"),
    )
    sock.sendall(encode_reply(Reply.READY, **dataclasses.asdict(ready)))
    while True:
        _reap()
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            return 0
        if not data:
            return 0
        job = Job.from_json(data)
        results_fd, output_fd = fds
        try:
            probes = _suite(job.suite)
            sandbox.needed_paths()  # worked out here once, not in every worker
            # Everything imported so far is shared with the workers: keep the collector off
            # it, so a worker's first collection does not copy every page of it.
            gc.freeze()
        except BaseException as exc:  # a broken suite is reported, not fatal
            error = f"cannot import the probes {job.suite}: {safe_text(exc)}"
            sock.sendall(encode_reply(Reply.ERROR, error=error))
            os.close(results_fd)
            os.close(output_fd)
            continue
        # The last job's leftovers were killed after it ended; reaped here, before the fork,
        # they no longer count against the cgroup this server and its workers share.
        _reap()
        pid = os.fork()
        if pid == 0:
            sock.close()
            _worker(job, probes, results_fd, output_fd, walls)  # never returns
        os.close(results_fd)
        os.close(output_fd)
        sock.sendall(encode_reply(Reply.PID, pid=pid))
        _, status = os.waitpid(pid, 0)
        sock.sendall(encode_reply(Reply.EXIT, code=os.waitstatus_to_exitcode(status)))


def _reap() -> None:
    """Collect orphans of earlier workers (they were re-parented to us, the subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _suite(path: str) -> Probes:
    if path not in _suites:
        probes = load_probes(Path(path)).PROBES
        assert isinstance(probes, Probes), f"{path}: PROBES is not a Probes registry"
        _suites[path] = probes
    return _suites[path]


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
        if room > 0:
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


def _alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise ProbeTimeout()


def _timer(seconds: float) -> None:
    global _armed
    _armed = seconds > 0
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.0))


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


def _worker(
    job: Job, probes: Probes, results_fd: int, output_fd: int, walls: sandbox.Walls
) -> None:
    code = 0
    forked = time.perf_counter()
    server = os.getppid()
    try:
        os.setsid()
        sandbox.enter_cgroup(job.cgroup)
        limits = sandbox.Limits(**job.limits)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        # The worker keeps only stdin/stdout/stderr and the results pipe: in particular not
        # the server's socket, so nothing the learner runs can talk to the runner.
        os.closerange(3, results_fd)
        os.closerange(results_fd + 1, 1 << 16)
        workdir = job.workdir
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir)
        os.umask(0o077)
        budget = [int(limits.output_bytes)]
        sys.stdout = _Output(1, budget)
        sys.stderr = _Output(2, budget)
        # Read while still root: the file is the grader's (mode 600), not the learner's.
        source = Path(job.source).read_text(encoding="utf-8")
        try:
            sandbox.wall_in(
                secrets=job.secrets,
                around=job.around,
                keep=_kept_seams(job.build),
                workdir=workdir,
                walls=walls,
                uid=sandbox.UID_BASE + server,
            )
        except OSError as exc:
            print(f"grader: could not wall in the worker: {exc}", file=sys.stderr)
            code = WALL_FAILED
            return
        sandbox.apply_rlimits(limits)
        signal.signal(signal.SIGALRM, _alarm)
        channel = _Channel(results_fd)
        # Taken before the learner's code runs, so that rebinding the registry changes nothing.
        chosen = [(name, probes.by_name[name].fn) for name in job.probes]
        for name in [m for m in sys.modules if m.startswith("_hidden_")]:
            del sys.modules[name]
        guard_blocking_sleep()
        module = _load(job, source, channel, limits, time.perf_counter() - forked)
        if module is None:
            return
        for name, fn in chosen:
            channel.send({"event": Event.START, "probe": name})
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
            channel.send(event)
        channel.send({"event": Event.END})
    except BaseException:  # the runner sees the exit code and the events
        code = CRASHED
    finally:
        _timer(0)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)  # no atexit handlers, no finalizers of the learner's objects


def _kept_seams(build: str) -> list[str]:
    """The reference seams of builds before `build` that some suite registered: read when
    the learner's setup cell loads an earlier build, after the hidden folder is covered.
    Never the graded build's own (a server serves every build, so a later build's suite may
    have registered it): those would be its reference solution, ready to load."""
    siblings = sys.modules.get("workbook.siblings")
    registered = getattr(siblings, "_references", {}) if siblings else {}
    return [str(path) for number, path in registered.items() if build and number < build]


def _load(
    job: Job,
    source: str,
    channel: _Channel,
    limits: sandbox.Limits,
    setup: float,
) -> types.ModuleType | None:
    """Execute the exported source as a fresh module, or report why it could not run."""
    path = job.source
    module = fresh_module("submission", path)
    # Kept there for the worker's life: dataclasses and typing look their module up by name.
    sys.modules["submission"] = module
    started = time.perf_counter()
    try:
        _timer(limits.load_seconds)
        execute(module, source, path)
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
                "line": _learner_line(exc, path),
            }
        )
        return None
    loaded = round(time.perf_counter() - started, 4)
    channel.send({"event": Event.LOADED, "seconds": loaded, "setup": round(setup, 4)})
    return module


def _learner_line(exc: BaseException, path: str) -> int | None:
    """The last line of the exported source in the traceback (where the learner's code broke)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line = exc.lineno
    return line


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
