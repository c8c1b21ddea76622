"""The parent's handle on one fork server (`grader.runtime.child.forkserver`): start it inside its
walls, hand it jobs, have it kill a job, stop it.

A `ForkServer` is an interpreter started with a fixed PYTHONHASHSEED that imported everything
once and forks a fresh worker per `Job`. With walls (mode ``bwrap``) it runs inside one
bubblewrap sandbox (`grader.runtime.sandbox.server_command`); where the machine has a writable pids
cgroup, the whole sandbox is in it from birth, so every process in there counts. Its workers'
pids are not ours to signal (they live in namespaces of their own), so a job is killed by
asking the server (`kill_job`); a server that does not answer is killed whole. Stopping a
server twice is harmless.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.runtime import sandbox
from grader.runtime.child.walls import UID_BASE
from grader.runtime.protocol import Job, Private, Ready, Reply, Request, WallsMode, decode_reply
from grader.runtime.sandbox import Limits, PidsCgroup
from workbook.shared.errors import WorkbookError

#: Per-submission folders live in RAM where there is a tmpfs: creating and removing them per
#: submission costs milliseconds on a disk.
SCRATCH_ROOT = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


class ServerError(WorkbookError):
    """A fork server could not start or stopped answering (not the submission's fault)."""


class _Spawner:
    """Starts every fork server from one thread that lives as long as this process.

    bubblewrap's ``--die-with-parent`` (like any PR_SET_PDEATHSIG) fires when the *thread*
    that started it ends: a server started from a pool's worker thread would die with that
    thread, not with the grader."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], Callable[[], Any]]]
        self._jobs = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="rit-spawner", daemon=True)
                self._thread.start()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((future, fn))
        return future.result()

    def _loop(self) -> None:
        while True:
            future, fn = self._jobs.get()
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _Spawner()
_uids: set[int] = set()
_uids_lock = threading.Lock()


def _take_uid() -> int:
    """A uid for one server's workers (root only): a different one for every live server
    of this process, and for every grading process (its pid is in it)."""
    base = UID_BASE + (os.getpid() % 2**20) * 64
    with _uids_lock:
        uid = next(base + n for n in range(64) if base + n not in _uids)
        _uids.add(uid)
    return uid


def memfd(name: str, data: bytes) -> int:
    """An in-memory file holding `data`, to pass as a descriptor (no size limit, no disk)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class ForkServer:
    """One pre-imported interpreter that forks a fresh worker per job."""

    def __init__(
        self,
        hashseed: str,
        limits: Limits,
        python: str = sys.executable,
        *,
        walls: WallsMode = "bwrap",
        hide: tuple[str, ...] = (),
    ) -> None:
        self.hashseed = hashseed
        self.limits = limits
        self.python = python
        self.walls = walls
        self.hide = hide
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.cgroup: PidsCgroup | None = None
        self.ready: Ready | None = None
        """What the server said of itself once it started."""
        self.uid = 0
        self._home = Path(tempfile.mkdtemp(prefix=f"rit-{os.getpid()}-server-", dir=SCRATCH_ROOT))

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the interpreter; `wait_ready` waits for its imports (spawn several, then wait)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        walled = self.walls == "bwrap"
        self.uid = _take_uid() if os.geteuid() == 0 else os.getuid()
        argv = [str(theirs.fileno()), self.walls, str(self.uid)]
        if walled:
            command = sandbox.server_command(self.python, self.hashseed, argv, hide=self.hide)
        else:
            command = [
                self.python,
                "-s",
                "-P",
                "-m",
                "grader.runtime.child.forkserver",
                *argv,
                "[]",
            ]
        overhead = sandbox.SANDBOX_PROCESSES if walled else 2
        self.cgroup = PidsCgroup.create(self.limits.max_pids + overhead)
        if self.cgroup is not None:
            # Into the cgroup before bwrap forks anything: every process of the sandbox counts.
            script = 'echo $$ > "$0" && exec "$@"'
            command = ["/bin/sh", "-c", script, str(self.cgroup.procs), *command]
        log = (self._home / "server.log").open("wb")
        try:
            self.proc = _SPAWNER.run(
                lambda: subprocess.Popen(
                    command,
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=self._home,
                    env=sandbox.environment(self.hashseed),
                    start_new_session=True,
                )
            )
        finally:
            theirs.close()
            log.close()
        self.sock = ours

    def wait_ready(self) -> None:
        reply = self.receive(timeout=60.0)
        if reply is None or reply[0] is not Reply.READY:
            raise ServerError(f"the grading server did not start: {self.log_tail()}")
        self.ready = Ready.from_json(reply[1])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self._home / "server.log").read_text(errors="replace")[-2000:] or "(no log)"
        return "(no log)"

    def receive(self, timeout: float) -> tuple[Reply, dict[str, Any]] | None:
        """The next message, or None when the server is gone, silent for `timeout` s, or
        says something off the protocol."""
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
        try:
            return decode_reply(data)
        except ValueError:
            return None

    def submit(
        self,
        job: Job,
        probes_text: bytes,
        private: Private,
        results_w: int,
        output_fd: int,
        artefacts_fd: int,
    ) -> int:
        """Hand a job to the server; returns the pid of the job's first process (in the
        server's namespace)."""
        assert self.sock is not None
        secret = memfd("rit-private", private.to_json())
        suite = memfd("rit-probes", probes_text)
        try:
            fds = [results_w, output_fd, secret, suite, artefacts_fd]
            socket.send_fds(self.sock, [job.to_json()], fds)
        finally:
            os.close(secret)
            os.close(suite)
        reply = self.receive(timeout=30.0)
        if reply is None or reply[0] is not Reply.PID:
            detail = reply[1].get("error") if reply else self.log_tail()
            raise ServerError(f"the grading server did not start the job: {detail}")
        pid: int = reply[1]["pid"]
        return pid

    def warm(self) -> None:
        """Ask the server to warm Hypothesis up for learner tests (0.3 s of its time, which
        every worker forked later is spared); only between jobs."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.send(b'{"request": "%s"}' % Request.WARM.value.encode())

    def kill_job(self) -> None:
        """Ask the server to kill the job in flight (it then reports its end as usual)."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.send(b'{"request": "%s"}' % Request.KILL.value.encode())

    def kill_leftovers(self) -> None:
        """Without walls (no PID namespace per job), kill what a finished job left running,
        where a cgroup knows it: everything in it but the server."""
        if self.walls != "bwrap" and self.cgroup is not None and self.proc is not None:
            self.cgroup.kill_all(keep=self.proc.pid)

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
        with _uids_lock:
            _uids.discard(self.uid)
        shutil.rmtree(self._home, ignore_errors=True)


def digest(text: bytes) -> str:
    """The digest a job carries for its probes' text (the server imports each text once)."""
    return hashlib.sha256(text).hexdigest()
