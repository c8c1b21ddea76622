"""The parent's handle on one fork server (`grader.forkserver`): start it, hand it jobs, kill
its workers, stop it.

A `ForkServer` is an interpreter started with a fixed PYTHONHASHSEED that imported everything
once and forks a fresh worker per `Job`; it lives in a pids cgroup of its own where the
machine has one, so its workers are born inside. Stopping a server twice is harmless.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grader import sandbox
from grader.protocol import Job, Ready, Reply, decode_reply
from grader.sandbox import Limits, PidsCgroup
from workbook.errors import WorkbookError

#: Scratch folders live in RAM where there is a tmpfs: creating and removing them per
#: submission costs milliseconds on a disk.
SCRATCH_ROOT = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else None


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
        self.ready: Ready | None = None
        """What the server said of its walls once it started."""
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
        reply = self.receive(timeout=60.0)
        if reply is None or reply[0] is not Reply.READY:
            raise ServerError(f"the grading server did not start: {self.log_tail()}")
        self.ready = Ready.from_json(reply[1])
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

    def submit(self, job: Job, results_w: int, output_fd: int) -> int:
        """Hand a job to the server; returns the worker's pid."""
        assert self.sock is not None
        socket.send_fds(self.sock, [job.to_json()], [results_w, output_fd])
        reply = self.receive(timeout=30.0)
        if reply is None or reply[0] is not Reply.PID:
            detail = reply[1].get("error") if reply else self.log_tail()
            raise ServerError(f"the grading server did not start the job: {detail}")
        pid: int = reply[1]["pid"]
        return pid

    def cgroup_for_workers(self) -> str | None:
        """The cgroup a worker must join itself (None when it is born inside one)."""
        return str(self.cgroup.path) if self.cgroup is not None and not self.inside else None

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
