"""The walls a worker raises around the learner's code, from inside the sandbox.

bubblewrap gives the fork server its view (an allowlist of read-only folders), an empty
network, and namespaces of its own. Each job then adds, in three steps:

- `clone`, in the server: the job's first process is born in new mount, IPC and PID
  namespaces (`JOB_NAMESPACES`), as PID 1 (one system call; the server stays as it was);
- `raise_job_walls`, in that first process: a fresh ``/proc``; private, size-limited
  in-memory ``/scratch`` (the learner's working folder ``/scratch/work``), ``/tmp`` and
  ``/dev/shm``; and the reference seams it may load, read-only;
- `lock_in`, in the learner's process, last: a uid of its own where the server is root,
  rlimits, and a user and mount namespace of its own. Mounts copied into a less privileged
  namespace are locked, so the learner's code can neither unmount nor remount what was made
  for it, and it holds no privilege over anything outside its namespace.

Linux system calls through ctypes (Python 3.11 has no ``os.unshare``). Each step raises
`WallError` naming the wall that did not rise; the worker reports it out of band. Raising the
walls twice in one process is an error (a locked namespace may not mount ``/proc``).
``python -m grader.runtime.child.walls`` raises them once in a throwaway job and prints the verdict.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import json
import os
import resource
import signal
import socket
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from grader.runtime.protocol import Limits

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
#: The learner's private folders: where they are mounted in the worker.
SCRATCH, REFERENCE = "/scratch", "/reference"
#: The learner's working folder: a mount of its own in a read-only ``/scratch``, so that
#: removing ``..`` removes nothing of it, and walks no further than that.
WORK = "/scratch/work"
TEMP = ("/tmp", "/dev/shm")
#: Workers of a root server run as ``UID_BASE + n``: a uid no account uses, one per server.
UID_BASE = 2_000_000_000


class WallError(OSError):
    """A wall could not be raised: the job says nothing about the submission."""


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
    return libc


def _fail(what: str) -> WallError:
    err = ctypes.get_errno()
    return WallError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int, what: str) -> None:
    if _libc().unshare(flags) != 0:
        raise _fail(f"unshare({what})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    if _libc().mount(raw(source), raw(target), raw(fstype), flags, raw(data or None)) != 0:
        raise _fail(f"mount {target}")


def prctl(option: int, value: int) -> None:
    if _libc().prctl(option, value, 0, 0, 0) != 0:
        raise _fail(f"prctl({option})")


def map_ids(uid: int, gid: int) -> None:
    """In a user namespace this process just made: be `uid`/`gid` inside as outside."""
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError as exc:
        raise WallError(exc.errno, f"user namespace id maps: {exc.strerror}") from None


SYS_KEYCTL, KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING = 250, 0, 1
KEY_SPEC_SESSION_KEYRING = -3


def session_keyring() -> int:
    """The id of this process's session keyring (0 when keyrings are not there)."""
    libc = _libc()
    found = libc.syscall(SYS_KEYCTL, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
    return max(int(found), 0)


def new_session_keyring() -> None:
    """Join a new, anonymous session keyring. Keyrings belong to no namespace bwrap makes:
    without this, every learner would share the grader's session keyring (a login's), and one
    could leave a key there for another, in the same batch or a later one."""
    joined = _libc().syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None)
    # ENOSYS: no keyrings in this kernel, so nothing to share.
    if joined < 0 and ctypes.get_errno() != errno.ENOSYS:
        raise _fail("keyctl(JOIN_SESSION_KEYRING)")


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL when the parent thread ends. Set again after every change of credentials
    (the kernel forgets it then); with `parent`, leave at once if it is already gone."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def become_subreaper() -> None:
    """Orphans of this process's descendants become its children, so it can reap them."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def mapped_bytes() -> int:
    """This process's address space now (what a fork child inherits)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def apply_rlimits(limits: Limits, *, nproc: bool) -> None:
    """CPU, address space, file size, no core files; and processes when `nproc` (a uid or
    user namespace of the worker's own: under a shared uid, or for root, it would bind
    nothing or bind everyone)."""
    cpu = int(limits.cpu_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = mapped_bytes() + limits.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_pids, limits.max_pids))
    # Past the file-size limit a write fails with EFBIG instead of killing the child.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class _CloneArgs(ctypes.Structure):
    """``struct clone_args`` of clone3(2), whose number is the same on every architecture."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


SYS_CLONE3, CLONE_PIDFD = 435, 0x1000
#: What a walled job's first process is born into: its own mount, IPC and PID namespaces.
#: A network namespace per job too: in one shared by the server's jobs, a learner's process
#: could leave state for the next job (sockets in TIME_WAIT on chosen loopback ports carry
#: bits for a minute, so a test could pass on the wheat, which runs first, and fail on every
#: chaff; a build 05 worker could hand the reference build 03 to a build 03 stub).
JOB_NAMESPACES = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET


def clone(flags: int) -> tuple[int, int]:
    """fork(2) into new namespaces (`flags`), in one system call: ``(pid, pidfd)`` in the
    parent, ``(0, -1)`` in the child. The child of a new PID namespace is its PID 1, and
    the parent's own namespaces stay as they were (so the fork server does this per job).

    Like ``os.fork`` but without Python's at-fork hooks, so the child must stay simple (one
    thread, as the server is) and fork with ``os.fork`` before running anything else: glibc
    still holds the parent's thread id in the child (``raise`` would aim at that id)."""
    pidfd = ctypes.c_int(-1)
    args = _CloneArgs(
        flags=flags | CLONE_PIDFD, pidfd=ctypes.addressof(pidfd), exit_signal=signal.SIGCHLD
    )
    libc = _libc()
    pid = libc.syscall(SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
    if pid < 0:
        raise _fail("clone3 into new mount, IPC and PID namespaces")
    return (pid, pidfd.value) if pid else (0, -1)


SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring up ``lo`` in this process's new network namespace (it starts down), so that a
    learner's server on 127.0.0.1 works as on their machine; nothing else is reachable."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def raise_job_walls(
    privileged: bool,
    uid: int,
    limits: Limits,
    seams: Mapping[str, str],
    keep: Sequence[str] = (),
) -> None:
    """In the job's first process (PID 1 of its namespaces), once: a fresh ``/proc``; the
    private, size-limited ``/scratch`` (with the working folder ``work``, a mount of its
    own), ``/tmp`` and ``/dev/shm``; the seams, read-only. `keep`: what the sandbox binds
    below a temporary folder (a venv or a clone in /tmp), put back read-only."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing made here propagates out
    loopback_up()
    # Opened before the private folders cover them: the binds back come from these.
    held = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in keep}
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    size = f"size={limits.scratch_bytes},nr_inodes=4096"
    mount("rit-scratch", SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=755")
    os.mkdir(WORK, 0o700)
    if privileged:
        os.chown(WORK, uid, uid)
    mount(WORK, WORK, None, MS_BIND)
    mount(None, SCRATCH, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for temp in TEMP:
        mount("rit-tmp", temp, "tmpfs", MS_NOSUID | MS_NODEV, f"{size},mode=1777")
    for path, fd in held.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:  # a single file (the grader's runtime is bound file by file)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).touch()
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    if seams:
        mount("rit-seams", REFERENCE, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
        for build, text in seams.items():
            Path(REFERENCE, f"{build}.py").write_text(text, encoding="utf-8")
        flags = MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        mount(None, REFERENCE, None, flags, "mode=755")


def lock_in(privileged: bool, uid: int, limits: Limits) -> None:
    """In the learner's process, once, last: a uid of its own where the server is root, the
    rlimits, and a user and mount namespace of its own, in which every mount made for it is
    locked (and it holds no privilege over anything outside)."""
    if privileged:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError as exc:
            raise WallError(exc.errno, f"drop to uid {uid}: {exc.strerror}") from None
        # Back to dumpable, which a change of uid turned off: else /proc/self is root's
        # and the id maps below cannot be written.
        prctl(PR_SET_DUMPABLE, 1)
    apply_rlimits(limits, nproc=True)
    ids = os.getuid(), os.getgid()  # before the unshare: unmapped until the maps are written
    unshare(CLONE_NEWUSER | CLONE_NEWNS, "user, mount (the lock)")
    map_ids(*ids)
    new_session_keyring()


def self_test(privileged: bool, keep: Sequence[str] = ()) -> str | None:
    """Raise every wall in a throwaway job, as a fork server does, and look through them:
    None when they hold, else what failed, in words. This process is left as it was."""
    read_end, write_end = os.pipe()
    outer_keyring = session_keyring()
    try:
        first, pidfd = clone(JOB_NAMESPACES)
    except WallError as exc:
        return str(exc)
    if first == 0:
        verdict = "the walls did not report"
        try:
            uid = UID_BASE if privileged else os.getuid()
            raise_job_walls(privileged, uid, Limits(), {"00": "seams = 1\n"}, keep)
            learner = os.fork()
            if learner == 0:
                _look_through(write_end, privileged, uid, keep, outer_keyring)
            _, status = os.waitpid(learner, 0)
            verdict = "" if status == 0 else f"the test job ended with status {status}"
        except OSError as exc:
            verdict = str(exc)
        os.write(write_end, verdict.encode()[:4000])
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as report:
        said = report.read().decode(errors="replace")
    os.waitpid(first, 0)
    os.close(pidfd)
    return said or None


def _look_through(
    report: int, privileged: bool, uid: int, keep: Sequence[str], outer_keyring: int
) -> None:
    try:
        lock_in(privileged, uid, Limits())
        problems = []
        if outer_keyring and session_keyring() == outer_keyring:
            problems.append("the learner shares the grader's session keyring")
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
        problems += [f"{path} is gone" for path in keep if not os.path.exists(path)]
        for where in sorted({sys.prefix, sys.base_prefix}):
            if not os.access(where, os.R_OK | os.X_OK):
                problems.append(f"the interpreter's {where} cannot be read")
        if pids != ["1", "2"]:
            problems.append("/proc shows other processes than the job's")
        if os.access(REFERENCE, os.W_OK):
            problems.append("the seams are writable")
        if privileged and os.geteuid() == 0:
            problems.append("the uid is still root")
        if _libc().umount2(WORK.encode(), 2) == 0:
            problems.append("the learner could unmount its working folder")
        Path(WORK, "probe.txt").write_text("x")
        if problems:
            os.write(report, ("; ".join(problems) + "; ").encode())
            os._exit(3)
    except OSError as exc:
        os.write(report, str(exc).encode()[:4000])
        os._exit(2)
    os._exit(0)


def main(argv: list[str]) -> int:
    """``python -m grader.runtime.child.walls KEEP`` (KEEP: `raise_job_walls`'s `keep`, as JSON)."""
    privileged = os.geteuid() == 0
    problem = self_test(privileged, json.loads(argv[0]) if argv else [])
    print(json.dumps({"privileged": privileged, "problem": problem}))
    return 0 if problem is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
