"""The walls around a learner's code: limits, a pids cgroup, no network, a scratch folder.

What works on these machines was verified (see the shared isolation notes): everything runs
as root, so RLIMIT_NPROC binds nothing and the process-count limit comes from a cgroup v1
pids controller; the network goes away with ``unshare(CLONE_NEWNET)``; RLIMIT_AS, RLIMIT_CPU
and RLIMIT_FSIZE behave normally. Each wall that cannot be raised is reported in words, once,
never silently skipped. Applying the limits twice in one process changes nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

PIDS_ROOT = Path("/sys/fs/cgroup/pids")
CLONE_NEWNET = 0x40000000
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """Per-child limits. Times are seconds, sizes bytes."""

    probe_seconds: float = 1.0
    """Real time one probe may take before SIGALRM stops it inside the child."""
    grace_seconds: float = 1.0
    """Extra real time before the parent kills a child whose probe ignored the alarm."""
    load_seconds: float = 5.0
    """Real time for the learner's setup and answer cells to execute (imports included)."""
    budget_seconds: float = 20.0
    """Real time for one submission in all; probes not started by then are not run."""
    cpu_seconds: int = 20
    memory_bytes: int = 512 * 2**20
    """Address space a child may add on top of what the fork server already maps."""
    file_bytes: int = 8 * 2**20
    """Largest file the child may write (its captured output included)."""
    max_pids: int = 32
    """Processes and threads in the child's cgroup, the child included."""
    output_bytes: int = 64 * 2**10
    """Captured stdout+stderr kept per child; the rest is counted and dropped."""

    def as_json(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class Isolation:
    """Which walls this machine gives us, each with a sentence for the report."""

    pids: str
    network: str

    @property
    def complete(self) -> bool:
        return self.pids.startswith("pids cgroup") and self.network.startswith("no network")


class PidsCgroup:
    """One pids cgroup per fork server: its children join it, and `kill_all` empties it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A fresh cgroup under ``run-it-twice/``, or None where the controller is not ours."""
        if not (PIDS_ROOT / "cgroup.procs").exists():
            return None
        _remove_stale(PIDS_ROOT / "run-it-twice")
        path = PIDS_ROOT / "run-it-twice" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir(parents=True)
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, patience: float = 2.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty. True when it emptied."""
        deadline = time.monotonic() + patience
        while True:
            pids = self.pids()
            if not pids:
                return True
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(200):
            try:
                self.path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # killed processes not reaped yet
                time.sleep(0.005)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()  # only succeeds when no other runner uses it


def _remove_stale(parent: Path) -> None:
    """Empty and remove cgroups whose runner process is gone (killed before it cleaned up)."""
    try:
        children = list(parent.iterdir())
    except OSError:
        return
    for child in children:
        owner = child.name.split("-", 1)[0]
        if child.is_dir() and owner.isdigit() and not Path("/proc", owner).exists():
            PidsCgroup(child).remove()


def pids_wall(cgroup: PidsCgroup | None, max_pids: int) -> str:
    if cgroup is not None:
        return f"pids cgroup ({max_pids} processes and threads per submission)"
    why = (
        "as root RLIMIT_NPROC binds nothing"
        if os.geteuid() == 0
        else "RLIMIT_NPROC would be shared by every process of this user"
    )
    return (
        f"NO process-count limit: the pids cgroup at {PIDS_ROOT} is not writable and {why};"
        " a fork bomb is stopped only by the time limits"
    )


def leave_network() -> str:
    """Move this process into an empty network namespace. Returns the sentence for the report."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            return "no network (empty network namespace)"
        err = ctypes.get_errno()
        return f"network reachable: unshare(CLONE_NEWNET) failed ({os.strerror(err)})"
    except (OSError, AttributeError) as exc:
        return f"network reachable: unshare is unavailable ({exc})"


def become_subreaper() -> None:
    """Orphans of the learner's processes become our children, so we can reap them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def enter_cgroup(path: str | None) -> None:
    """Join the cgroup (in the child, before any learner code runs)."""
    if path:
        Path(path, "cgroup.procs").write_text(str(os.getpid()))


def mapped_bytes() -> int:
    """This process's address space now (what a fork child inherits)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def apply_rlimits(limits: Limits) -> None:
    """CPU, address space, file size, no core files (processes: see `pids_wall`)."""
    cpu = int(limits.cpu_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = mapped_bytes() + limits.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Past the file-size limit a write fails with EFBIG instead of killing the child.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
