"""The walls around a learner's code, from the grader's side: what bubblewrap binds, whether
it can, and the pids cgroup.

Walls are an allowlist. Each fork server runs inside one bubblewrap sandbox (`server_command`) that
sees only the system's ``/usr`` (and its ``/bin``/``/lib`` links), the interpreter and the venv
read-only, the repository's ``etl/`` and ``workbook/`` folders, the visible half of ``builds/``
(`workbook.shared.buildfolder.shipped`: never a ``hidden/`` folder) and the probe-side runtime of
the grader (``grader/runtime/child/`` with ``protocol.py`` and ``observe.py``), in new user (where
the grader is not root), mount, IPC, PID, UTS, network and cgroup namespaces, with a cleared
environment (`environment`), a new session, and death with the grader (started from one long-lived
thread, `grader.runtime.forkclient`). A root server keeps root's privileges in there; any other
keeps CAP_SYS_ADMIN inside its own user namespace. Either way it is the grader's code alone: each
job is born into namespaces of its own and the learner's process locks itself out of those
privileges before any of its code runs (`grader.runtime.child.walls`). Nothing else of the machine
is there: not the rest of the grader, not the hidden suites, the solutions, git, another clone, the
class folder, the outputs, ``/run`` or the host's ``/tmp``.

`walls_problem` says, once per process, why no walls can be raised here (bubblewrap missing,
or the kernel refusing namespaces), by raising them once in a throwaway sandbox; `refusal` is
the paragraph class grading prints then. ``WALLS=off`` and ``WALLS=container`` are the
instructor's explicit choices to grade without them; every grade then says so
(`walls_identity` is in its cache key). What works on these machines is in the shared
isolation notes.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.runtime.protocol import WALLS_MODES, Limits, WallsMode
from workbook.shared import buildfolder

__all__ = [
    "WALLS_MODES",
    "Isolation",
    "Limits",
    "PidsCgroup",
    "WallsMode",
    "refusal",
    "server_command",
    "walls_identity",
    "walls_problem",
]

PIDS_ROOT = Path("/sys/fs/cgroup/pids")
#: The system folders bound read-only (a merged-/usr system has links for the others).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Single files of /etc the interpreter is faster with; nothing else of /etc is seen.
ETC = ("/etc/ld.so.cache",)
#: The grader's probe-side runtime: the only part of ``grader/`` bound into the walls.
CHILD_RUNTIME = (
    "__init__.py",
    "runtime/__init__.py",
    "runtime/protocol.py",
    "runtime/child",
    "suites/__init__.py",
    "suites/observe.py",
)
#: Folders inside SYSTEM where people keep source trees (a clone of this repository there would
#: hand out its solutions): covered by an empty tmpfs unless the interpreter lives in one.
SOURCE_FOLDERS = ("/usr/src", "/usr/local/src")
#: Where the worker's private folders are mounted (`grader.runtime.child.walls` mounts them).
MOUNTPOINTS = ("/scratch", "/reference")
#: Processes of a sandbox that are not the learner's: bwrap, its init, the server, the job's PID 1.
SANDBOX_PROCESSES = 4
#: The interpreter query, run once per interpreter with the servers' own flags.
_QUERY = """
import importlib.util, json, os, sys
packages = {}
for name in ("etl", "workbook", "grader", "builds"):
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin:
        packages[name] = os.path.dirname(spec.origin)
print(json.dumps({"prefix": sys.prefix, "base_prefix": sys.base_prefix, "path": sys.path,
                  "packages": packages}))
"""
_MISSING = "bubblewrap (bwrap) is not installed or not on PATH"


def environment(hashseed: str) -> dict[str, str]:
    """The whole environment of a fork server and its workers: nothing of the grader's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "PYTHONHASHSEED": hashseed,
        # glibc gives each thread a 64 MiB arena under RLIMIT_AS unless told otherwise.
        "MALLOC_ARENA_MAX": "2",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def bwrap() -> str | None:
    """The bubblewrap executable on PATH (a test hides it by changing PATH)."""
    return shutil.which("bwrap")


@functools.cache
def _version(executable: str) -> str:
    try:
        out = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except OSError:
        return "unknown"
    return out.split()[-1] if out.split() else "unknown"


def walls_identity(mode: WallsMode) -> str:
    """What of the walls goes into a grade's cache key: the mode, and bubblewrap's version
    for walled grades (a grade made without walls is never served to a walled run)."""
    found = bwrap()
    return f"bwrap {_version(found)}" if mode == "bwrap" and found else mode


@dataclass(frozen=True)
class Interpreter:
    """What a fork server's interpreter needs to see, found by asking it (cleared
    environment, the servers' flags), once per interpreter."""

    python: str
    prefix: str
    base_prefix: str
    path: tuple[str, ...]
    packages: dict[str, str]

    @property
    def repo(self) -> str | None:
        grader = self.packages.get("grader")
        return os.path.dirname(grader) if grader else None


@functools.cache
def interpreter(python: str) -> Interpreter:
    out = subprocess.run(
        [python, "-s", "-P", "-c", _QUERY],
        capture_output=True,
        text=True,
        env=environment("0"),
        timeout=60,
        check=True,
    ).stdout
    data = json.loads(out)
    return Interpreter(
        python, data["prefix"], data["base_prefix"], tuple(data["path"]), data["packages"]
    )


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _in_a_venv(path: str, repo: str) -> bool:
    """Whether `path`, inside the repository, is inside a virtual environment there."""
    folder = path
    while _under(folder, repo) and folder != repo:
        if os.path.exists(os.path.join(folder, "pyvenv.cfg")):
            return True
        folder = os.path.dirname(folder)
    return False


def read_only_roots(info: Interpreter) -> list[str]:
    """The folders bound read-only whole: the interpreter's prefixes and every import path,
    but never the repository (nor a folder holding it), whose editable install would
    otherwise bring in all of it; a venv inside it is fine."""
    repo = info.repo
    roots: list[str] = []
    for candidate in (info.base_prefix, info.prefix, *info.path):
        if not candidate:
            continue
        real = os.path.realpath(candidate)
        if not os.path.exists(real) or real == "/":
            continue
        if any(_under(real, root) for root in (*SYSTEM, *roots)):
            continue
        if repo and (_under(repo, real) or (_under(real, repo) and not _in_a_venv(real, repo))):
            continue
        roots = [r for r in roots if not _under(r, real)] + [real]
    return roots


def server_command(
    python: str, hashseed: str, argv: list[str], *, hide: tuple[str, ...] = (), module: str = ""
) -> list[str]:
    """bubblewrap around ``python -s -P -m MODULE ARGV KEEP`` (default: the fork server;
    KEEP, the JSON list of what the workers put back in their private temporary folders)."""
    found = bwrap()
    if found is None:
        raise FileNotFoundError(_MISSING)
    info = interpreter(python)
    root = os.geteuid() == 0
    # Root keeps the init user namespace, where each worker can drop to a uid of its own.
    # Anyone else gets a user namespace, in which the server keeps CAP_SYS_ADMIN: it makes
    # each job's namespaces and mounts (the learner's process locks itself out of it), and
    # CAP_NET_ADMIN, to bring up each job's loopback.
    command = [found, *_namespace_args(root)]
    command += ["--die-with-parent", "--new-session", "--clearenv"]
    for name, value in environment(hashseed).items():
        command += ["--setenv", name, value]
    # First, so that a bind below one of them (a venv or a clone in /tmp) is not covered.
    command += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    roots = read_only_roots(info)
    command += _system_args(info, roots)
    bound = [*SYSTEM, *roots]
    command += _package_args(info, bound)
    # What each worker puts back inside its private /tmp and /dev/shm (`walls.wall_in`).
    keep = [b for b in bound if any(_under(b, t) and b != t for t in ("/tmp", "/dev/shm"))]
    for secret in hide:  # only ever something inside a bound folder needs covering
        real = os.path.realpath(secret)
        if os.path.isdir(real) and any(_under(real, b) and real != b for b in bound):
            command += ["--tmpfs", real, "--remount-ro", real]
    for path in MOUNTPOINTS:
        command += ["--dir", path]
    command = _searchable_parents(command)
    command += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/"]
    module = module or "grader.runtime.child.forkserver"
    return [*command, python, "-s", "-P", "-m", module, *argv, json.dumps(keep)]


def _namespace_args(root: bool) -> list[str]:
    """The namespaces the server is unshared into: root's, or an unprivileged user's."""
    spaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    if root:
        return [*spaces, "--unshare-cgroup-try"]
    # CAP_NET_ADMIN: each job brings up the loopback of its own network namespace.
    return ["--unshare-all", "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_NET_ADMIN"]


def _system_args(info: Interpreter, roots: list[str]) -> list[str]:
    """The system's folders and files read-only (links as links), then the interpreter's
    `roots`; the source folders the interpreter does not need are covered."""
    command: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            command += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            command += ["--ro-bind", path, path]
    for path in ETC:
        command += ["--ro-bind-try", path, path]
    for path in roots:
        command += ["--ro-bind", path, path]
    needed = (info.base_prefix, info.prefix, *info.path)
    for path in SOURCE_FOLDERS:
        if os.path.isdir(path) and not any(p and _under(os.path.realpath(p), path) for p in needed):
            command += ["--tmpfs", path, "--remount-ro", path]
    return command


def _package_args(info: Interpreter, bound: list[str]) -> list[str]:
    """The project's packages the child imports, each bound unless `bound` already holds it
    (what is bound is added to `bound`); of the grader, only its child runtime."""
    command: list[str] = []
    for name in ("etl", "workbook"):
        folder = info.packages.get(name)
        if folder and not any(_under(folder, b) for b in bound):
            command += ["--ro-bind", folder, folder]
            bound.append(folder)
    builds = info.packages.get("builds")
    if builds:  # the visible half only: a worker never sees a build's hidden/ folder
        covered = any(_under(builds, b) for b in bound)  # installed: hide the rest of it
        parts = [str(p) for p in buildfolder.shipped(Path(builds).parent)]
        command += ["--tmpfs", builds] if covered else []
        for part in parts:
            command += ["--ro-bind", part, part]
        command += ["--remount-ro", builds] if covered else []
        bound += parts
    grader = info.packages.get("grader")
    if grader:
        inside = any(_under(grader, b) for b in bound)
        if inside:  # an installed grader: cover the rest of it
            command += ["--tmpfs", grader]
        for part in CHILD_RUNTIME:
            command += ["--ro-bind", os.path.join(grader, part), os.path.join(grader, part)]
            bound.append(os.path.join(grader, part))
        if inside:
            command += ["--remount-ro", grader]
    return command


def _searchable_parents(command: list[str]) -> list[str]:
    """`command` with the folders above each bind made first, mode 755: bubblewrap makes
    them 700, which a worker that dropped to a uid of its own could not pass through."""
    made = {"/", "/tmp", "/proc", "/dev"}
    out: list[str] = []
    i = 0
    while i < len(command):
        arg = command[i]
        if arg in ("--ro-bind", "--ro-bind-try", "--bind", "--symlink"):
            dest = command[i + 2]
            parents = []
            folder = os.path.dirname(dest)
            while folder not in made and folder != "/":
                parents.append(folder)
                folder = os.path.dirname(folder)
            for parent in reversed(parents):
                out += ["--perms", "0755", "--dir", parent]
                made.add(parent)
            made.add(dest)
            out += command[i : i + 3]
            i += 3
            continue
        out.append(arg)
        i += 1
    return out


@functools.cache
def walls_problem(python: str) -> str | None:
    """Why no walls can be raised here (None: they can), found once per process by raising
    them in a throwaway sandbox (`grader.runtime.child.walls`), as every fork server will."""
    if bwrap() is None:
        return _MISSING
    try:
        command = server_command(python, "0", [], module="grader.runtime.child.walls")
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {exc}"
    try:
        verdict = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = " ".join((done.stderr or done.stdout).split())[:300]
        return f"bubblewrap could not create the namespaces ({said or done.returncode})"
    problem = verdict.get("problem")
    return None if problem is None else f"a worker could not raise its walls ({problem})"


def default_walls(python: str) -> WallsMode:
    """For the instructor's own checks (solutions, stubs, mutants): walls where they can be
    raised, else none (those notebooks are the instructor's own)."""
    return "bwrap" if walls_problem(python) is None else "off"


def refusal(problem: str) -> str:
    """The one paragraph class grading prints instead of grading without walls."""
    return (
        f"Not grading: no walls can be raised around the learners' code here: {problem}."
        " The grader runs each submission behind bubblewrap (bwrap), so that it sees only"
        " the interpreter, the packages and a scratch folder of its own, and cannot read the"
        " solutions, the hidden tests or another learner's work. Install it (Debian/Ubuntu:"
        " `apt-get install bubblewrap`; Fedora: `dnf install bubblewrap`; Arch: `pacman -S"
        " bubblewrap`); on macOS, or where the kernel forbids user namespaces, grade inside"
        " a Linux VM or container. To grade anyway, without walls (every grade then says so"
        " and is cached apart): `make check SUBMISSIONS=... WALLS=off` (command line:"
        " `--walls off`), or `WALLS=container` when each submission runs in a disposable"
        " container of its own."
    )


@dataclass(frozen=True)
class Isolation:
    """Which walls are up around every worker, each with its sentence for the report."""

    mode: WallsMode
    pids: bool
    """The number of processes and threads of a worker is capped."""
    pids_text: str
    network: bool
    network_text: str
    filesystem: bool
    """The worker sees an allowlist of folders, nothing else."""
    filesystem_text: str
    user: bool
    """The worker cannot act as the grader's user or as root outside its namespaces."""
    user_text: str

    @property
    def complete(self) -> bool:
        return self.pids and self.network and self.filesystem and self.user

    @property
    def summary(self) -> str:
        """One line: the mode, and what it means."""
        if self.mode == "bwrap":
            return f"walls: bwrap ({walls_identity('bwrap')}, an allowlist per worker)"
        if self.mode == "container":
            return "walls: container (none raised here: the disposable container is trusted)"
        return "walls: OFF (learners' code can read and write whatever this user can)"

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def isolation(mode: WallsMode, privileged: bool, cgroup: bool, limits: Limits) -> Isolation:
    """The walls a fork server in `mode` raises, in words."""
    who = "root" if privileged else "your uid"
    if mode != "bwrap":
        why = "WALLS=container: the container holds them" if mode == "container" else "WALLS=off"
        return Isolation(
            mode,
            cgroup,
            f"pids cgroup ({limits.max_pids} processes and threads per submission)"
            if cgroup
            else f"NO process-count limit ({why}): a fork bomb is stopped only by the time limits",
            False,
            f"network reachable ({why})",
            False,
            f"NO walls ({why}): the learner's code can read whatever this user can",
            False,
            f"runs as {who}, the grader's own user ({why})",
        )
    own = "a uid of its own per server" if privileged else "a user namespace of its own"
    pids = f"RLIMIT_NPROC ({limits.max_pids} per worker, {own})"
    if cgroup:
        pids = f"pids cgroup and {pids}"
    user = (
        "not root: a uid of its own per server, in a user namespace of its own per worker"
        if privileged
        else "your uid, in a user namespace of its own per worker"
    )
    return Isolation(
        mode,
        True,
        f"{pids}; a PID namespace per worker: nothing it starts outlives it",
        True,
        "no network (an empty network namespace)",
        True,
        f"an allowlist ({walls_identity('bwrap')}): the interpreter, the packages, etl/ and"
        " workbook/ read-only, and a private scratch folder, /tmp and /dev/shm per worker",
        True,
        f"{user}, whose mounts it cannot undo and which reaches nothing outside",
    )


class PidsCgroup:
    """One pids cgroup per fork server, entered from birth: `kill_all` empties it."""

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

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, patience: float = 2.0, keep: int | None = None) -> bool:
        """SIGKILL every process in the cgroup but `keep` until none is left. True when it
        emptied."""
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
