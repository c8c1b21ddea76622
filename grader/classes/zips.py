"""Zips, read without trusting them and written so the same files give the same bytes.

`unpack(path, dest)` checks the archive as a whole first (`archive_problem`: member count,
total size, overall ratio), then extracts it member by member after checking each one
(`member_problem`: no absolute path, no ``..``, no backslash or control character, no link,
device or FIFO, nothing encrypted or 64 folders deep, at most 64 MiB unpacked, compressed at
most 200 to 1), so a zip bomb is refused with a reason before a byte is written; nothing is
ever written outside `dest` or through a link. A refused member is a note, a refused archive
`ZipRefused`.

`write_zip(path, files)` writes sorted members with fixed times and modes, at once (a reader
never sees half a zip): writing the same files again gives the same bytes.
"""

from __future__ import annotations

import os
import re
import stat
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from workbook.shared.errors import WorkbookError

#: Bounds on a zip, checked before anything is written.
MAX_MEMBER_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 2 * 2**30
MAX_MEMBERS = 50_000
#: Deeper than this, a folder chain is a trap (`shutil.rmtree` overflows near 1,500).
MAX_DEPTH = 64
#: Deflated JSON reaches about 20 to 1; a zip bomb reaches thousands.
MAX_RATIO = 200
#: Below this size a ratio says nothing (a run of spaces compresses a thousand to one).
RATIO_FLOOR = 2**20
#: Folders an archive tool adds that are nobody's work (macOS's resource forks).
TOOL_FOLDERS = frozenset({"__MACOSX"})
#: The time stamp of every member written here (the same files give the same bytes).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


#: The compression methods Python's zipfile reads (7-Zip's PPMd, for one, it does not).
READABLE_METHODS = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)


class ZipRefused(WorkbookError):
    """A zip that is not read at all: unreadable, or over the bounds as a whole."""


def open_zip(path: Path) -> zipfile.ZipFile:
    """The zip at `path`; `ZipRefused` when it cannot be read as one."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError, ValueError) as exc:
        raise ZipRefused(f"{path.name}: not a readable zip ({exc})") from None


def member_problem(info: zipfile.ZipInfo) -> str | None:
    """Why the member `info` must not be extracted, or None when it is safe."""
    name = info.filename
    parts = PurePosixPath(name).parts
    if "\x00" in name or "\\" in name or any(ord(c) < 32 for c in name):
        return "a name with a backslash or a control character"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in parts:
        return "a path outside the archive's folder"
    if len(parts) > MAX_DEPTH:
        return f"{len(parts)} folders deep (limit {MAX_DEPTH})"
    mode = info.external_attr >> 16
    # Unix zips keep the file type in the high bits (some tools write the permissions only).
    if info.create_system == 3 and stat.S_IFMT(mode):
        if stat.S_ISLNK(mode):
            return "a symbolic link"
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            return "not a regular file"
    if info.flag_bits & 0x1:
        return "encrypted"
    if info.compress_type not in READABLE_METHODS:
        return f"compression method {info.compress_type} (only stored, deflate, bzip2 and lzma)"
    if info.file_size > MAX_MEMBER_BYTES:
        return f"{info.file_size // 2**20} MiB unpacked (limit {MAX_MEMBER_BYTES // 2**20} MiB)"
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        return f"compressed {info.file_size // max(info.compress_size, 1)} to 1 (a zip bomb?)"
    return None


def archive_problem(infos: Sequence[zipfile.ZipInfo], packed: int) -> str | None:
    """Why the whole archive is refused (too many members, too large unpacked), or None."""
    total = sum(i.file_size for i in infos)
    if len(infos) > MAX_MEMBERS:
        return f"{len(infos)} members (limit {MAX_MEMBERS})"
    if total > MAX_TOTAL_BYTES:
        return f"{total // 2**20} MiB unpacked (limit {MAX_TOTAL_BYTES // 2**20} MiB)"
    if total > RATIO_FLOOR and total > MAX_RATIO * max(packed, 1):
        return f"compressed {total // max(packed, 1)} to 1 as a whole (a zip bomb?)"
    return None


def unpack(path: Path, dest: Path) -> list[str]:
    """Extract the zip at `path` into `dest`, member by member after checking each one;
    returns a note per member refused. Raises `ZipRefused` if the archive as a whole is."""
    notes = []
    with open_zip(path) as archive:
        infos = archive.infolist()
        problem = archive_problem(infos, path.stat().st_size)
        if problem:
            raise ZipRefused(f"{path.name}: refused: {problem}")
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        for info in infos:
            parts = PurePosixPath(info.filename).parts
            if parts and parts[0] in TOOL_FOLDERS:
                continue
            problem = member_problem(info)
            target = root.joinpath(*parts)
            if problem is None and root not in target.parents:
                problem = "a path outside the archive's folder"
            if problem is not None:
                notes.append(f"{info.filename[:120]}: not extracted: {problem}")
                continue
            try:
                _extract(archive, info, target)
            except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError, ValueError) as exc:
                notes.append(f"{info.filename[:120]}: not extracted: {exc}")
    return notes


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> None:
    if info.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL and O_NOFOLLOW: a member named twice keeps its first copy, and nothing is ever
    # written through a link.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out, archive.open(info) as data:
        while chunk := data.read(2**20):
            written += len(chunk)
            if written > info.file_size:  # the header lied: zipfile stops, but be sure
                raise OSError("longer than its header says")
            out.write(chunk)


def write_zip(
    path: Path, files: Mapping[str, str | bytes], *, executable: Iterable[str] = ()
) -> None:
    """Write `files` (name inside -> content) as the zip `path`, at once: sorted names, fixed
    times and modes, so the same files always give the same bytes."""
    runnable = set(executable)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, ZIP_TIME)
            info.create_system = 3  # Unix, so the modes below are read
            info.external_attr = (stat.S_IFREG | (0o755 if name in runnable else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    partial.replace(path)
