"""The fork server: an interpreter that imports everything once, then forks a worker per job.

Started by the runner (``grader.runtime.forkclient``) as ``python -s -P -m
grader.runtime.child.forkserver FD MODE UID KEEP``, inside bubblewrap when MODE is ``bwrap`` (KEEP:
`Plan.keep`, as JSON). It becomes a subreaper, says it is ready, and waits on the socket FD for
requests: a job, or a request to warm Hypothesis up for the learner tests to come. For each job it
imports the probes from the text passed with the job (once per text: no hidden file is ever bound
into the walls), clones the job's first process into namespaces of its own
(`grader.runtime.child.worker.first`), reports its pid, and then waits on three things at once: the
socket (a kill request, or the runner gone), the status pipe (what the job's processes say of their
walls and of the learner's end) and a pidfd of the first process. When that has ended it reports how
the job went (`grader.runtime.protocol.Exit`). The server never reads a job's private input (the
submission and the seams): only the job does, so nothing of one learner stays in the memory the next
learner's job is cloned from. Every message is spelled in `grader.runtime.protocol`.
"""

from __future__ import annotations

# Imported once here, so that every worker starts with them loaded (fork copies them).
import asyncio  # noqa: F401  (preloaded: the answers' async code runs on it)
import contextlib
import gc
import hashlib
import json
import math  # noqa: F401  (preloaded: answers import it)
import os
import random  # noqa: F401  (preloaded: answers and probes import it)
import select
import signal
import socket
import sys
import time
from typing import Any

import looptime  # noqa: F401  (preloaded: the probes' virtual time)

import etl  # noqa: F401  (preloaded: the package the answers build on)
from grader.runtime.child import walls
from grader.runtime.child.worker import Fds, Plan, first
from grader.runtime.protocol import (
    JOB_FDS,
    Exit,
    Job,
    Ready,
    Reply,
    Request,
    decode_request,
    encode_reply,
    walls_mode,
)
from grader.suites.observe import Probes, safe_text
from workbook.shared.modules import execute, fresh_module

_suites: dict[str, Probes] = {}
_warm = False
#: After a kill request, how long the job's first process may take to copy its artefacts.
KILL_PATIENCE = 2.0


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    keep = tuple(json.loads(argv[3]))
    plan = Plan(mode=walls_mode(argv[1]), privileged=os.geteuid() == 0, uid=int(argv[2]), keep=keep)
    walls.die_with_parent()
    walls.become_subreaper()
    ready = Ready(
        mode=plan.mode,
        privileged=plan.privileged,
        hashseed=os.environ.get("PYTHONHASHSEED", "random"),
        hash=hash("run-it-twice"),
    )
    sock.sendall(encode_reply(Reply.READY, **ready.__dict__))
    while True:
        _reap()
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, len(JOB_FDS))
        except OSError:
            return 0
        if not data:
            return 0
        try:
            kind, fields = decode_request(data)
        except ValueError:
            kind, fields = Request.KILL, {}
        if kind is Request.WARM:
            _preload()
        if kind is not Request.JOB or len(fds) != len(JOB_FDS):
            for fd in fds:  # a warm-up, or a late kill: no job to run
                os.close(fd)
            continue
        if not _serve(sock, Job.from_json(fields), fds, plan):
            return 0


def _preload() -> None:
    """What learner tests need, built once asked for: the runner goes on meanwhile (a job
    sent now waits in the socket), and every worker forked later starts with Hypothesis
    imported and warm (0.3 s a server, instead of 0.7 s on the first learner test's path)."""
    global _warm
    if _warm:
        return
    _warm = True
    with contextlib.suppress(Exception):
        from workbook.checking import fixedhypothesis

        fixedhypothesis.warm_up()


def _reap() -> None:
    """Collect orphans (re-parented to us, the subreaper), so they count against nothing."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _suite(job: Job, fd: int) -> Probes:
    """The probes of the job's text, imported once per text under the job's module name."""
    if job.digest not in _suites:
        with os.fdopen(os.dup(fd), "rb") as stream:
            stream.seek(0)
            text = stream.read()
        if hashlib.sha256(text).hexdigest() != job.digest:
            raise ValueError("the probes' text does not match its digest")
        module = fresh_module(job.module, job.suite)
        sys.modules[job.module] = module  # dataclasses look their module up by name
        try:
            execute(module, text.decode("utf-8"), job.suite)
        except BaseException:
            sys.modules.pop(job.module, None)
            raise
        probes = getattr(module, "PROBES", None)
        if not isinstance(probes, Probes):
            raise TypeError(f"{job.suite}: PROBES is not a Probes registry")
        _suites[job.digest] = probes
    return _suites[job.digest]


def _serve(sock: socket.socket, job: Job, fds: list[int], plan: Plan) -> bool:
    """Run one job to its end; False when the runner has gone (the server then leaves)."""
    results, output, private, suite, folder = fds
    try:
        probes = _suite(job, suite)
        # Everything imported so far is shared with the workers: keep the collector off it,
        # so a worker's first collection does not copy every page of it.
        gc.freeze()
    except BaseException as exc:  # a broken suite is reported, not fatal
        error = f"cannot import the probes {job.suite}: {safe_text(exc)}"
        sock.sendall(encode_reply(Reply.ERROR, error=error))
        for fd in (results, output, private, folder):  # `suite` is closed below, once
            os.close(fd)
        return True
    finally:
        os.close(suite)
    status_r, status_w = os.pipe()
    started = time.perf_counter()
    try:
        pid, pidfd = walls.clone(walls.JOB_NAMESPACES if plan.walled else 0)
    except OSError as exc:
        for fd in (results, output, private, folder, status_r, status_w):
            os.close(fd)
        sock.sendall(encode_reply(Reply.PID, pid=0))
        sock.sendall(encode_reply(Reply.EXIT, **Exit(None, False, str(exc)).__dict__))
        return True
    if pid == 0:
        sock.close()
        os.close(status_r)
        first(job, probes, Fds(results, output, private, folder), status_w, plan, started)
    for fd in (results, output, private, folder, status_w):
        os.close(fd)
    sock.sendall(encode_reply(Reply.PID, pid=pid))
    try:
        said, alive = _follow(sock, pid, pidfd, status_r)
    finally:
        os.close(pidfd)
        os.close(status_r)
    end = Exit(
        code=said.get("code"),
        up=bool(said.get("up")),
        wall=said.get("wall"),
        kept=int(said.get("kept", 0)),
        dropped=int(said.get("dropped", 0)),
    )
    sock.sendall(encode_reply(Reply.EXIT, **end.__dict__))
    return alive


def _follow(sock: socket.socket, pid: int, pidfd: int, status: int) -> tuple[dict[str, Any], bool]:
    """Wait for the job's first process to end, stopping the job on request; what the
    status pipe said, and whether the runner is still there."""
    said: dict[str, Any] = {}
    buffer = b""
    alive, open_pipe = True, True
    deadline: float | None = None
    while True:
        watched: list[Any] = [pidfd] + ([status] if open_pipe else []) + ([sock] if alive else [])
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        ready, _, _ = select.select(watched, [], [], timeout)
        if not ready and deadline is not None:  # it did not end in time: the hard way
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            deadline = None
        if status in ready:
            chunk = os.read(status, 1 << 16)
            open_pipe = bool(chunk)
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                with contextlib.suppress(ValueError, TypeError):
                    said.update(json.loads(line))
        if sock in ready:
            data = sock.recv(1 << 16)
            if not data:
                alive = False
            if (not data or _is_kill(data)) and deadline is None:
                # The first process ends the job and copies its artefacts; the runner gone,
                # nobody needs them.
                sig = signal.SIGUSR1 if data else signal.SIGKILL
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, sig)
                deadline = time.monotonic() + KILL_PATIENCE
        if pidfd in ready:
            os.waitpid(pid, 0)
            _drain(status, buffer, said)
            return said, alive


def _is_kill(data: bytes) -> bool:
    try:
        return decode_request(data)[0] is Request.KILL
    except ValueError:
        return False


def _drain(status: int, buffer: bytes, said: dict[str, Any]) -> None:
    """What is left on the status pipe once the first process has ended (its writers are
    gone, or die with it within moments), after the unfinished line `buffer`."""
    os.set_blocking(status, False)
    with contextlib.suppress(OSError):
        while chunk := os.read(status, 1 << 16):
            buffer += chunk
    for line in buffer.split(b"\n"):
        with contextlib.suppress(ValueError, TypeError):
            if line:
                said.update(json.loads(line))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
