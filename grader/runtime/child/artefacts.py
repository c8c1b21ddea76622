"""Files a worker left behind, copied out with bounds.

Everything in a worker's scratch folder was made by the learner's code, so it is hostile input:
`copy_tree` copies regular files and folders only (never following a link, never opening a FIFO or a
device), at most `MAX_FILES` files, `MAX_BYTES` bytes and `MAX_DEPTH` levels, without recursion, and
counts what it left. The job's first process runs it once every other process of the job is gone, so
nothing changes under it; copying the same folder twice gives the same copy. (The parent removes
what is left with `grader.runtime.cleanup.remove_tree`.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

MAX_FILES = 256
MAX_BYTES = 64 * 2**20
MAX_DEPTH = 8
#: Entries looked at in all: a folder of a million empty files costs no more than this.
MAX_ENTRIES = 8192
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_folder(path: str, dir_fd: int | None = None) -> int:
    """A descriptor of the folder at `path` (never through a link)."""
    return os.open(path, _DIR, dir_fd=dir_fd)


def copy_tree(source: int, dest: int) -> tuple[int, int]:
    """Copy the folder open at `source` into the empty folder open at `dest`; returns the
    files kept and the entries dropped. Neither descriptor is closed."""
    kept = dropped = seen = total = 0
    stack = [(os.dup(source), os.dup(dest), 0)]
    while stack:
        src, dst, depth = stack.pop()
        try:
            with os.scandir(src) as entries:
                names = []
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        dropped += 1
                        continue
                    names.append(entry)
            for entry in names:
                if entry.is_dir(follow_symlinks=False) and depth < MAX_DEPTH:
                    child = _open_child(entry.name, src, _DIR, stat.S_ISDIR)
                    if child is None:
                        dropped += 1
                        continue
                    try:
                        os.mkdir(entry.name, 0o700, dir_fd=dst)
                        made = open_folder(entry.name, dst)
                    except OSError:
                        os.close(child)
                        dropped += 1
                        continue
                    stack.append((child, made, depth + 1))
                elif entry.is_file(follow_symlinks=False) and kept < MAX_FILES:
                    size = _copy_file(entry.name, src, dst, MAX_BYTES - total)
                    if size is None:
                        dropped += 1
                    else:
                        kept, total = kept + 1, total + size
                else:
                    dropped += 1
        finally:
            os.close(src)
            os.close(dst)
    return kept, dropped


def _open_child(name: str, folder: int, flags: int, kind: Callable[[int], bool]) -> int | None:
    try:
        fd = os.open(name, flags, dir_fd=folder)
    except OSError:
        return None
    if not kind(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _copy_file(name: str, src: int, dst: int, room: int) -> int | None:
    """Copy one regular file; None (nothing written) when it is not one or does not fit."""
    fd = _open_child(name, src, _FILE, stat.S_ISREG)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > room:
            return None
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dst)
        try:
            left = size
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                os.write(out, chunk)
                left -= len(chunk)
        finally:
            os.close(out)
        return size
    except OSError:
        return None
    finally:
        os.close(fd)
