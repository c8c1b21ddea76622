"""Acting as ``nobody`` (uid 65534) from a root process, wherever the repository sits.

`make check`'s ordinary-user part and a test or two run code as nobody through ``setpriv``.
Nobody must then reach an interpreter and this repository's code: a clone in a folder only root
can read (under ``/root``, or in a folder ``mktemp -d`` made) is out of its reach, and so is a
venv inside it. `interpreter` finds an interpreter of this Python's version that nobody can run
(not a hard-coded path); `stage` gives nobody a copy of what it needs, hard links where they
can be made, in a folder of the caller's (removed with it), or the original when nobody can
already read it. Staging twice gives the same tree.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import sysconfig
from pathlib import Path

NOBODY = 65534
#: The command prefix that runs the rest as nobody, with no supplementary groups.
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
#: What a staged copy of the repository leaves out: nobody grades from code, not history.
LEFT_OUT = (".venv", ".git", "artifacts", "grades", "release", "build", ".pytest_cache")


def reachable(path: Path) -> bool:
    """Whether others (nobody among them) can reach `path`: every folder on the way is
    searchable by others, and it is readable (a folder: and searchable) by others."""
    path = path.resolve()
    try:
        if any(not os.stat(parent).st_mode & stat.S_IXOTH for parent in path.parents):
            return False
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if not mode & stat.S_IROTH:
        return False
    return not stat.S_ISDIR(mode) or bool(mode & stat.S_IXOTH)


def interpreter() -> str | None:
    """An interpreter of this Python's major.minor that nobody can run, or None: this one's
    base, else ``pythonX.Y`` in the usual system folders."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base = getattr(sys, "_base_executable", sys.executable)
    candidates = [
        Path(base),
        *(Path(folder) / version for folder in ("/usr/local/bin", "/usr/bin", "/bin")),
    ]
    for candidate in candidates:
        real = candidate.resolve()
        if real.is_file() and reachable(real) and os.stat(real).st_mode & stat.S_IXOTH:
            return str(real)
    return None


def skip_reason() -> str | None:
    """Why nobody cannot be acted as here (None: it can), in one line."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "not root"
    if shutil.which("setpriv") is None:
        return "setpriv is missing"
    if interpreter() is None:
        return f"no python{sys.version_info.major}.{sys.version_info.minor} nobody can run"
    return None


def stage(source: Path, folder: Path, *, left_out: tuple[str, ...] = ()) -> Path:
    """`source` itself when nobody can read it; else a copy at ``folder / source.name`` that
    nobody can read (files hard-linked where the file system allows, else copied; folders
    0755), without the top-level entries named in `left_out`."""
    if reachable(source):
        return source
    copy = folder / source.name
    if source.is_file():
        copy.parent.mkdir(parents=True, exist_ok=True)
        _link(source, copy)
        return copy
    shutil.copytree(
        source,
        copy,
        symlinks=True,
        copy_function=_link,
        ignore=lambda where, names: [
            n for n in names if n == "__pycache__" or (Path(where) == source and n in left_out)
        ],
    )
    for here, _, _ in os.walk(copy):
        os.chmod(here, 0o755)
    return copy


def stage_packages(folder: Path) -> Path:
    """This venv's site-packages, staged for nobody (see `stage`)."""
    return stage(Path(sysconfig.get_paths()["purelib"]), folder / "packages")


def _link(src: str | Path, dst: str | Path) -> None:
    """A hard link when the file is readable by others already (a link shares the file's
    mode: changing it would change the original), else a copy made readable."""
    if os.stat(src).st_mode & stat.S_IROTH:
        try:
            os.link(src, dst)
            return
        except OSError:  # another file system, or links refused: a copy reads the same
            pass
    shutil.copy2(src, dst)
    os.chmod(dst, os.stat(dst).st_mode | stat.S_IROTH)
