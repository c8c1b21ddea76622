"""Removing what grading leaves behind, whatever a learner put in it.

`remove_tree` deletes a folder tree without recursion and without following a symlink: it
works through directory descriptors (no path grows with the depth), moves every folder it
meets up into the top folder before emptying it (so a chain 100,000 deep costs two open
descriptors, not one per level), makes an unreadable or unwritable folder of ours usable
first, and stops after `MAX_ENTRIES` entries. It never raises for what it finds: it returns
what it could not remove. Removing the same tree again removes nothing and reports nothing.

`remove_stale_scratch` removes the scratch folders of grading processes that are gone (a
batch killed before its cleanup ran); `remove_partials` the half-written output files of such
a process. Both leave alone anything a live process, or another user, still owns.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: How many entries one `remove_tree` call removes at most (a learner's scratch folder holds
#: what one probe run could create in seconds; this bounds the work, not the depth).
MAX_ENTRIES = 2_000_000
#: Scratch folders of the grader: ``rit-<pid>-<what>-<random>``.
_SCRATCH = re.compile(r"rit-(\d+)-.+")
#: Half-written output files of the grader: ``.rit-<pid>-<thread>.tmp``.
PARTIAL = re.compile(r"\.rit-(\d+)-\d+\.tmp")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


@dataclass
class Removal:
    """What one `remove_tree` did: entries removed, and what is left with why."""

    removed: int = 0
    left: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.left


def remove_tree(path: str | Path, *, max_entries: int = MAX_ENTRIES) -> Removal:
    """Remove `path` (a folder tree, a file or a symlink; a missing path is already gone)."""
    path = Path(path)
    result = Removal()
    try:
        parent = os.open(path.parent, _DIR_FLAGS)
    except FileNotFoundError:
        return result
    except OSError as exc:
        result.left.append(f"{path.parent}: {exc.strerror}")
        return result
    try:
        _Remover(result, max_entries).remove(parent, path.name, str(path))
    finally:
        os.close(parent)
    return result


class _Remover:
    def __init__(self, result: Removal, budget: int) -> None:
        self.result = result
        self.budget = budget
        self.stopped = False
        self.fresh = itertools.count()

    def _spent(self) -> bool:
        """The budget is used up (and so the tree stays, said once in `left`)."""
        if self.result.removed >= self.budget and not self.stopped:
            self.stopped = True
            self.result.left.append(f"stopped after {self.budget} entries")
        return self.stopped

    def remove(self, parent: int, name: str, shown: str) -> None:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.result.left.append(f"{shown}: {exc.strerror}")
            return
        if not stat.S_ISDIR(info.st_mode):
            self._unlink(parent, name, shown)
            return
        top = self._open(parent, name, shown)
        if top is None:
            return
        try:
            # Folders still to empty, each moved up to be a direct child of `top`.
            queue = self._empty(top, top, shown)
            while queue and not self._spent():
                child = queue.pop()
                fd = self._open(top, child, shown)
                if fd is None:
                    continue
                try:
                    queue += self._empty(fd, top, shown)
                finally:
                    os.close(fd)
                self._rmdir(top, child, shown)
        finally:
            os.close(top)
        if not self.stopped:
            self._rmdir(parent, name, shown)

    def _empty(self, fd: int, top: int, shown: str) -> list[str]:
        """Unlink what `fd` holds; move its folders into `top` (their new names returned)."""
        found: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if self._spent():
                        break
                    if not entry.is_dir(follow_symlinks=False):
                        self._unlink(fd, entry.name, shown)
                    elif fd == top:
                        found.append(entry.name)
                    else:
                        moved = self._move_up(fd, entry.name, top, shown)
                        if moved is not None:
                            found.append(moved)
        except OSError as exc:
            self.result.left.append(f"{shown}: a folder could not be listed: {exc.strerror}")
        return found

    def _move_up(self, fd: int, name: str, top: int, shown: str) -> str | None:
        new = self._free_name(top)
        for attempt in range(2):
            try:
                os.rename(name, new, src_dir_fd=fd, dst_dir_fd=top)
                return new
            except PermissionError:
                if attempt:
                    break
                # Moving a folder rewrites its ``..``: it must be writable, and so its parent.
                _make_usable(fd, name)
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)
            except OSError as exc:
                self.result.left.append(f"{shown}: a folder could not be moved: {exc.strerror}")
                return None
        self.result.left.append(f"{shown}: a folder could not be moved: permission denied")
        return None

    def _free_name(self, top: int) -> str:
        while True:
            name = f".rm-{next(self.fresh)}"
            try:
                os.stat(name, dir_fd=top, follow_symlinks=False)
            except FileNotFoundError:
                return name
            except OSError:
                continue

    def _open(self, parent: int, name: str, shown: str) -> int | None:
        for attempt in range(2):
            try:
                return os.open(name, _DIR_FLAGS, dir_fd=parent)
            except PermissionError:
                if attempt:
                    break
                _make_usable(parent, name)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # became a link or a file
                    self._unlink(parent, name, shown)
                    return None
                self.result.left.append(f"{shown}: a folder could not be opened: {exc.strerror}")
                return None
        self.result.left.append(f"{shown}: a folder could not be opened: permission denied")
        return None

    def _unlink(self, fd: int, name: str, shown: str) -> None:
        for attempt in range(2):
            try:
                os.unlink(name, dir_fd=fd)
                self.result.removed += 1
                return
            except FileNotFoundError:
                return
            except PermissionError:
                if attempt:
                    break
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o700)
            except OSError as exc:
                self.result.left.append(f"{shown}: a file could not be removed: {exc.strerror}")
                return
        self.result.left.append(f"{shown}: a file could not be removed: permission denied")

    def _rmdir(self, fd: int, name: str, shown: str) -> None:
        try:
            os.rmdir(name, dir_fd=fd)
            self.result.removed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.result.left.append(f"{shown}: a folder could not be removed: {exc.strerror}")


def _make_usable(parent: int, name: str) -> None:
    """Give folder `name` (ours, not a symlink) rwx for its owner, without following links:
    through an ``O_PATH`` descriptor where there is one (Linux), so a folder swapped for a
    symlink meanwhile cannot point the change elsewhere."""
    o_path = getattr(os, "O_PATH", 0)
    if not o_path or not os.path.isdir("/proc/self/fd"):
        return
    try:
        fd = os.open(name, o_path | os.O_NOFOLLOW | os.O_DIRECTORY, dir_fd=parent)
    except OSError:
        return
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    except OSError:
        pass
    finally:
        os.close(fd)


def _gone(pid: int) -> bool:
    """No process `pid` exists (one of another user's still counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def remove_stale_scratch(root: str | Path | None = None) -> list[str]:
    """Remove the grader's scratch folders in `root` (default: the temp folder) whose process
    is gone and that belong to this user. Returns one line per folder left behind, and why;
    never raises."""
    folder = Path(root or tempfile.gettempdir())
    problems: list[str] = []
    try:
        with os.scandir(folder) as entries:
            stale = [
                e.name
                for e in entries
                if (match := _SCRATCH.fullmatch(e.name))
                and int(match[1]) != os.getpid()
                and _gone(int(match[1]))
                and _owned(e)
            ]
    except OSError as exc:
        return [f"{folder}: could not be listed: {exc.strerror}"]
    for name in sorted(stale):
        removal = remove_tree(folder / name)
        problems += removal.left[:3]
    return problems


def _owned(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.stat(follow_symlinks=False).st_uid == os.geteuid()
    except OSError:
        return False


def remove_partials(folder: Path) -> int:
    """Remove the grader's half-written files (`PARTIAL`) in `folder` whose process is gone."""
    removed = 0
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            match = PARTIAL.fullmatch(entry.name)
            if match and _gone(int(match[1])) and not entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed += 1
    return removed
