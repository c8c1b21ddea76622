"""The walls around a learner's code: limits, a pids cgroup, no network, a scratch folder.

What works on these machines was verified (see the shared isolation notes): everything runs
as root, so RLIMIT_NPROC binds nothing and the process-count limit comes from a cgroup v1
pids controller; the network goes away with ``unshare(CLONE_NEWNET)``; RLIMIT_AS, RLIMIT_CPU
and RLIMIT_FSIZE behave normally. Each wall that cannot be raised is reported in words, once,
never silently skipped. Applying the limits twice in one process changes nothing.

Root can undo any wall it stands behind (leave the cgroup, unmount a mask, kill the grader),
so the worker also gets a private mount namespace in which the instructor's secrets (hidden
suites, solutions, git history, the grading outputs, the other learners' submissions, the
folders beside the repository) are covered by empty read-only tmpfs mounts, and then drops to
a uid of its own (`wall_in`). The interpreter, the packages and the scratch folder are mounted
back where a mask or an untraversable folder (``/root`` is mode 700) would hide them, so an
honest ``import fractions`` still works. Reference seams registered with
`workbook.siblings.use_reference` when the probes are imported stay readable.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import stat
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grader.protocol import ServerWalls

PIDS_ROOT = Path("/sys/fs/cgroup/pids")
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
#: Workers run as ``UID_BASE + the fork server's pid``: a uid no account uses, and a different
#: one per server, so a worker can signal or read nothing of another runner's worker, and
#: RLIMIT_NPROC counts only its own processes.
UID_BASE = 2_000_000_000


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
class Isolation(ServerWalls):
    """Which walls are up around every worker on this machine, each with its sentence for the
    report (``*_text``): the fork server's, and the pids cgroup."""

    pids: bool
    """A pids cgroup caps processes and threads."""
    pids_text: str

    @property
    def complete(self) -> bool:
        return self.pids and self.network and self.filesystem and self.user


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

    def kill_all(self, patience: float = 2.0, keep: int | None = None) -> bool:
        """SIGKILL every process in the cgroup but `keep` (the fork server, which lives in
        it) until none is left. True when it emptied."""
        deadline = time.monotonic() + patience
        while True:
            pids = [pid for pid in self.pids() if pid != keep]
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


def leave_network() -> tuple[bool, str]:
    """Move this process into an empty network namespace. Returns whether it worked, and the
    sentence for the report."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            return True, "no network (empty network namespace)"
        err = ctypes.get_errno()
        return False, f"network reachable: unshare(CLONE_NEWNET) failed ({os.strerror(err)})"
    except (OSError, AttributeError) as exc:
        return False, f"network reachable: unshare is unavailable ({exc})"


def become_subreaper() -> None:
    """Orphans of the learner's processes become our children, so we can reap them."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def enter_cgroup(path: str | None, pid: int | None = None) -> None:
    """Move `pid` (default: this process) into the cgroup. The fork server joins its own once,
    so every worker is born inside: moving a process between v1 cgroups waits for the
    kernel's RCU grace period, 10 to 20 ms each time."""
    if path:
        Path(path, "cgroup.procs").write_text(str(pid or os.getpid()))


def mapped_bytes() -> int:
    """This process's address space now (what a fork child inherits)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def apply_rlimits(limits: Limits) -> None:
    """CPU, address space, file size, no core files; processes too once the worker has a uid
    of its own (see `pids_wall` for the cgroup)."""
    cpu = int(limits.cpu_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = mapped_bytes() + limits.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if os.geteuid() >= UID_BASE:
        # Under a uid of its own the kernel's per-user count is this worker's alone: a second
        # wall behind the cgroup (for root, or any shared uid, it would be none or unfair).
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_pids, limits.max_pids))
    # Past the file-size limit a write fails with EFBIG instead of killing the child.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


# ---------------------------------------------------------------------------------------
# Walls against root: a private view of the filesystem, then a uid of the worker's own.


class WallError(OSError):
    """A wall the self-test said works could not be raised in a worker."""


@dataclass(frozen=True)
class Walls:
    """Which of the walls against root this machine allows, found once per fork server by
    `probe_walls`, each with the sentence for the report."""

    filesystem: bool
    """A private mount namespace per worker can cover the secrets."""
    user: bool
    """A worker can drop to a uid of its own."""
    filesystem_text: str
    user_text: str

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_ulong,
        ctypes.c_char_p,
    ]
    return libc


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    libc = _libc()

    def raw(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    if libc.mount(raw(source), raw(target), raw(fstype), flags, raw(data or None)) != 0:
        err = ctypes.get_errno()
        raise WallError(err, f"mount {target}: {os.strerror(err)}")


def _private_namespace() -> None:
    if _libc().unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise WallError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    # Without this the masks would propagate back into the grader's own namespace.
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def _mask(path: str) -> None:
    """An empty tmpfs over `path` (a folder), writable by root until `_seal`."""
    _mount("rit-mask", path, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")


def _seal(path: str) -> None:
    _mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _under(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip("/") + "/")


def _blocked_ancestor(path: str, uid: int) -> str | None:
    """The shallowest folder above `path` that `uid` may not search (``/root``, mode 700)."""
    parts = Path(path).parts
    for depth in range(1, len(parts)):
        folder = str(Path(*parts[:depth]))
        try:
            info = os.stat(folder)
        except OSError:
            return None
        if info.st_uid != uid and not info.st_mode & stat.S_IXOTH:
            return folder
    return None


def needed_paths(extra: Iterable[str] = ()) -> list[str]:
    """What the worker must still reach behind the masks: the interpreter and its libraries,
    every import path, the folder each imported top-level module came from (editable
    installs, such as this repository's packages, live outside site-packages), and `extra`.

    The part that depends on what is imported is worked out once per set of modules (the
    fork server does it before forking, so a worker pays nothing for it)."""
    key = (len(sys.modules), tuple(sys.path))
    if _needed_memo.get("key") != key:
        candidates = [
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            sys.base_exec_prefix,
            os.path.dirname(os.path.realpath(sys.executable)),
            *(p for p in sys.path if p),
        ]
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if "." in name or not isinstance(file, str):
                continue
            folder = os.path.dirname(file)
            if os.path.basename(file) == "__init__.py":
                folder = os.path.dirname(folder)
            candidates.append(folder)
        _needed_memo.update(key=key, paths=_existing(candidates))
    base: list[str] = _needed_memo["paths"]
    return base + [p for p in _existing(extra) if p not in base]


_needed_memo: dict[str, Any] = {}


def _existing(paths: Iterable[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in found:
            found.append(real)
    return found


#: Folders every program may write to: each worker gets empty private ones.
TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")


@dataclass(frozen=True)
class Mask:
    """A folder covered by an empty tmpfs in the worker's namespace.

    ``secret``: nothing under it comes back but the kept files; ``cover``: the needed paths
    under it come back, nothing else; ``temp``: the same, but writable by everyone (a private
    /tmp)."""

    path: str
    kind: str


def plan_masks(
    secrets: Sequence[str], around: str | None, needed: Sequence[str], uid: int | None
) -> list[Mask]:
    """The folders to cover, shallowest first.

    `around` (the folder holding the repository) is covered, so nothing beside the repository
    is visible; so are the shared temporary folders, and every folder the uid could not search
    on the way to a needed path (``/root``, mode 700, above a pyenv interpreter)."""
    masks: dict[str, str] = {}
    for path in TEMP_FOLDERS:
        if os.path.isdir(path) and not os.path.islink(path):
            masks[os.path.realpath(path)] = "temp"
    if around and os.path.realpath(around) != "/":
        # A repository cloned straight into /tmp: that /tmp stays a writable private one.
        masks.setdefault(os.path.realpath(around), "cover")
    if uid is not None:
        for path in needed:
            blocked = _blocked_ancestor(path, uid)
            if blocked:
                masks.setdefault(blocked, "cover")
    # A cover over a needed path itself would hide it.
    masks = {m: kind for m, kind in masks.items() if m not in needed}
    for path in secrets:
        if os.path.isdir(path):
            masks[os.path.realpath(path)] = "secret"
    ordered = sorted(masks, key=lambda m: (m.count("/"), m))
    return [Mask(m, masks[m]) for m in ordered]


def wall_in(
    *,
    secrets: Sequence[str],
    around: str | None,
    keep: Sequence[str],
    workdir: str,
    walls: Walls,
    uid: int,
) -> None:
    """In a freshly forked worker, as root: hide `secrets` and what is beside `around`, keep
    the `keep` files readable, then become `uid`. Raises `WallError` when a wall that
    `walls` says works cannot be raised. Calling it twice in one process is an error
    (the second time the process is no longer root)."""
    if walls.filesystem:
        _build_view(secrets, around, keep, workdir, uid if walls.user else None)
    if walls.user:
        os.chown(workdir, uid, uid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        # No setuid binary (su, mount, ...) can hand root back.
        _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _build_view(
    secrets: Sequence[str], around: str | None, keep: Sequence[str], workdir: str, uid: int | None
) -> None:
    needed = needed_paths([os.path.dirname(workdir)])
    masks = plan_masks(secrets, around, needed, uid)
    secret = [m.path for m in masks if m.kind == "secret"]
    kept = [os.path.realpath(k) for k in keep if os.path.isfile(k)]
    _private_namespace()
    # Opened after the unshare (a bind mount must come from this namespace's mounts) and
    # before anything is covered: the mounts back come from these descriptors.
    handles = {path: os.open(path, os.O_PATH) for path in {*needed, *kept}}
    umask = os.umask(0o022)  # the worker's 077 would make the folders made here unsearchable
    try:
        for mask in masks:
            if not os.path.isdir(mask.path):
                continue
            if mask.kind == "temp":
                _mount("rit-tmp", mask.path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
            else:
                _mask(mask.path)
            if mask.kind == "secret":
                continue
            inside = [n for n in needed if _under(n, mask.path)]
            # Mount back only the outermost needed paths; the ones below come with them.
            for path in inside:
                if any(_under(path, other) for other in inside):
                    continue
                if any(path == s or _under(path, s) for s in secret):
                    continue
                os.makedirs(path, exist_ok=True)
                _mount(f"/proc/self/fd/{handles[path]}", path, None, MS_BIND | MS_REC)
        for path in kept:
            if not any(_under(path, m.path) for m in masks):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).touch()
            _mount(f"/proc/self/fd/{handles[path]}", path, None, MS_BIND)
        for mask in masks:
            if mask.kind != "temp" and os.path.isdir(mask.path):
                _seal(mask.path)
    finally:
        os.umask(umask)
        for handle in handles.values():
            os.close(handle)


def probe_walls(scratch: str) -> Walls:
    """Try the walls in a throwaway child (this process stays as it is) and describe them."""
    if os.geteuid() != 0:
        user = os.environ.get("USER") or str(os.geteuid())
        return Walls(
            False,
            False,
            "secrets NOT hidden: the grader is not root, so it cannot give the learner's code"
            " a view of its own; that code can read whatever this user can read",
            f"runs as {user}, the grader's own user (switching users needs root)",
        )
    uid = UID_BASE + os.getpid()
    target = os.path.join(scratch, "wall-probe")
    os.makedirs(target, exist_ok=True)
    Path(target, "secret").write_text("x")
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports each wall in one line, then leaves
        os.close(read_fd)
        lines = []
        try:
            _private_namespace()
            _mask(target)
            _seal(target)
            hidden = not os.path.exists(os.path.join(target, "secret"))
            lines.append("mounts ok" if hidden else "mounts: the mask did not hide the file")
        except OSError as exc:
            lines.append(f"mounts: {exc.strerror or exc}")
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            lines.append("user ok" if os.getuid() == uid else "user: setuid did not stick")
        except OSError as exc:
            lines.append(f"user: {exc.strerror or exc}")
        os.write(write_fd, "\n".join(lines).encode())
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as report:
        text = report.read().decode()
    os.waitpid(pid, 0)
    mounts_line, user_line = [*text.splitlines(), "mounts: no report", "user: no report"][:2]
    mounts_ok, user_ok = mounts_line == "mounts ok", user_line == "user ok"
    filesystem = (
        "secrets hidden (a private mount namespace per worker: hidden suites, solutions, git"
        " history, grading outputs, submissions and the folders beside the repository are"
        " covered by empty read-only mounts)"
        if mounts_ok
        else f"secrets NOT hidden: {mounts_line.removeprefix('mounts: ')}"
    )
    user_text = (
        "own uid per worker (not root: cannot undo the walls, write the outputs, or signal"
        " another worker)"
        if user_ok
        else f"runs as root: dropping to another uid failed ({user_line.removeprefix('user: ')})"
    )
    return Walls(mounts_ok, user_ok, filesystem, user_text)
