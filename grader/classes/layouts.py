"""Class submissions in the layouts instructors get, staged as one folder per learner.

`detect(path)` names the layout of a folder or a ``.zip``; `stage(path, into=...)` turns it into
what `grader.classes.batch.grade_class` grades: one folder per learner, named by the id the layout
carries, with each learner's metadata and notes on everything refused and why.

- ``folders``: today's one folder per learner. A folder is graded in place, untouched; a zip
  of it is unpacked.
- ``canvas``: "Download Submissions", one flat folder of ``<name>[_late]_<userid>_<subid>_<file>``
  (``late`` in any case); a ``-N`` before ``.ipynb`` is a resubmission and the highest N wins.
  The learner is ``<name>``; two learners sharing a name become ``<name>_<userid>`` each.
- ``moodle``: a folder per learner, ``<Full Name>_<id>_assignsubmission_file_`` (the trailing
  ``_`` is gone since Moodle 4.1), or flat files with that prefix: the learner is
  ``<Full Name>_<id>``.
- ``git``: one clone per learner (GitHub Classroom), graded in place: the learner is the
  folder's name, and the commit graded is recorded.

A zip is read through `grader.classes.zips.unpack`, which checks every member and the archive as a
whole before writing anything (no ``..``, no absolute path, no link, bounded sizes: a zip bomb
is refused with a reason). A learner's own uploaded zip (Canvas, Moodle) is unpacked into
their folder under the same checks; a refused one is a note on that learner. Staging again
gives the same files: the staging folder is replaced whole.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal, get_args

from grader.classes.discovery import learner_folders
from grader.classes.zips import ZipRefused, member_problem, open_zip, unpack
from grader.runtime.escape import file_names, shown
from workbook.shared.errors import WorkbookError

Layout = Literal["folders", "canvas", "moodle", "git"]
LAYOUTS: tuple[Layout, ...] = get_args(Layout)

#: A learner's folder name stays well under the 255 bytes of a path component.
MAX_NAME_BYTES = 180
#: Names an archive tool adds that are nobody's submission.
JUNK = frozenset({"__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini"})
#: The file staging leaves in its folder, so that it never replaces a folder it did not make.
MARKER = ".staged-by-grader"
#: The class inside the staging folder: nothing but learners' folders, as `grade_class` wants.
CLASS = "class"
#: Folders of a learner's whole copy of the workbook: a zip's lone folder holding one of
#: these is that learner's copy, not a class.
COPY_FOLDERS = frozenset({"exercises", "notebooks", "solutions", "tests", "etl", "workbook"})
#: Where `stage` unpacks a zip first, beside the class.
UNPACKED = "unpacked"

CANVAS = re.compile(r"(?P<name>.+?)(?P<late>_late)?_(?P<user>\d+)_(?P<sub>\d+)_(?P<file>.+)", re.I)
MOODLE = re.compile(
    r"(?P<name>.+)_(?P<id>\d+)_(?P<plugin>assign(?:submission|feedback)_[a-z0-9]+)(?:_(?P<rest>.*))?",
    re.S,
)
#: Canvas's name for a resubmitted file: ``-N`` before the extension (none is N = 0).
RESUBMITTED = re.compile(r"(?P<stem>.+)-(?P<n>\d+)(?P<ext>\.(?:ipynb|zip))", re.I)


class LayoutError(WorkbookError):
    """The submissions cannot be staged at all (an unreadable or unsafe archive, a bad target)."""


@dataclass(frozen=True)
class Learner:
    """One learner as the layout names them; the fields a layout does not carry stay empty."""

    learner: str
    """The folder under `Staged.folder`, so the row in ``grades.csv``."""
    name: str = ""
    """The name as the LMS spells it (Canvas's ``smithjane``, Moodle's ``Jane Smith``)."""
    user_id: str = ""
    """Canvas's user id, Moodle's participant id."""
    submission_id: str = ""
    """Canvas's second number (of the file kept)."""
    late: bool = False
    prefix: str = ""
    """The LMS's own name prefix (Canvas ``smithjane_late_12_34``, Moodle's folder name), so
    feedback files can be named the way its bulk upload matches them."""
    commit: str = ""
    files: tuple[str, ...] = ()
    """What was staged, as the download named it."""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Staged:
    """A class ready for `grade_class(folder, ...)`."""

    layout: Layout
    folder: Path
    learners: tuple[Learner, ...]
    notes: tuple[str, ...] = ()
    in_place: bool = False

    def learner(self, name: str) -> Learner | None:
        return next((x for x in self.learners if x.learner == name), None)


# ---------------------------------------------------------------------------------------
# Detection.


@dataclass
class _Listing:
    """The top of a class: its files, its folders and each folder's names."""

    files: list[str] = field(default_factory=list)
    dirs: dict[str, set[str]] = field(default_factory=dict)


def _visible(name: str) -> bool:
    return not name.startswith(".") and name not in JUNK


def _listing_of_folder(path: Path) -> _Listing:
    listing = _Listing()
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if not _visible(entry.name) or entry.is_symlink():
            continue
        if entry.is_dir():
            try:
                listing.dirs[entry.name] = {e.name for e in os.scandir(entry.path)}
            except OSError:
                listing.dirs[entry.name] = set()
        elif entry.is_file():
            listing.files.append(entry.name)
    return listing


def _listing_of_names(names: Iterable[str]) -> _Listing:
    listing = _Listing()
    for name in names:
        parts = PurePosixPath(name).parts
        if not parts or not _visible(parts[0]):
            continue
        if len(parts) == 1 and not name.endswith("/"):
            listing.files.append(parts[0])
        else:
            children = listing.dirs.setdefault(parts[0], set())
            if len(parts) > 1:
                children.add(parts[1])
    listing.files.sort()
    return listing


def _classify(listing: _Listing) -> Layout:
    moodle = sum(1 for n in [*listing.files, *listing.dirs] if MOODLE.fullmatch(n))
    canvas = sum(1 for n in listing.files if CANVAS.fullmatch(n))
    if moodle and moodle * 2 >= len(listing.files) + len(listing.dirs):
        return "moodle"
    if canvas and canvas >= len(listing.dirs):
        return "canvas"
    if listing.dirs and all(".git" in children for children in listing.dirs.values()):
        return "git"
    return "folders"


def _inside(names: Iterable[str], top: str | None) -> list[str]:
    return (
        list(names)
        if top is None
        else [n[len(top) + 1 :] for n in names if n.startswith(top + "/")]
    )


def _wrapper(names: Sequence[str]) -> str | None:
    """The one folder a zip wraps its class in, else None: a lone top folder holding Canvas
    or Moodle entries, or holding only folders, none of them a folder of the workbook's own
    (so a learner's whole copy, zipped, stays one learner)."""
    listing = _listing_of_names(names)
    if listing.files or len(listing.dirs) != 1:
        return None
    (only,) = listing.dirs
    inner = _inside(names, only)
    below = _listing_of_names(inner)
    if _classify(below) in ("canvas", "moodle"):
        return only
    if below.files or not below.dirs or set(below.dirs) & COPY_FOLDERS:
        return None
    return only if any(name.endswith(".ipynb") for name in inner) else None


def _zip_root(path: Path) -> tuple[str | None, list[str]]:
    """The folder of the zip at `path` that holds the class (None: its top), and its names."""
    try:
        with open_zip(path) as archive:
            # Only what `unpack` would extract counts: a hostile name shapes nothing.
            names = [i.filename for i in archive.infolist() if member_problem(i) is None]
    except ZipRefused as exc:
        raise LayoutError(str(exc)) from None
    return _wrapper(names), names


def detect(path: Path) -> Layout:
    """The layout of the folder or zip at `path` (what ``LAYOUT=auto`` picks)."""
    if path.is_file():
        top, names = _zip_root(path)
        return _classify(_listing_of_names(_inside(names, top)))
    if not path.is_dir():
        raise LayoutError(f"{path}: no such folder or zip")
    return _classify(_listing_of_folder(path))


# ---------------------------------------------------------------------------------------
# Staging.


def stage(path: Path, layout: Layout | Literal["auto"] = "auto", *, into: Path) -> Staged:
    """One folder per learner from the submissions at `path`.

    A folder in the ``folders`` or ``git`` layout is graded where it is (nothing written);
    everything else is written into `into`, which is replaced whole on every call (and refused
    unless it is new or made by an earlier `stage`). Raises `LayoutError` when nothing can
    be staged; whatever is refused short of that is in the notes."""
    chosen = detect(path) if layout == "auto" else layout
    if chosen not in LAYOUTS:
        raise LayoutError(f"LAYOUT={layout}: not one of auto, {', '.join(LAYOUTS)}")
    if path.is_dir() and chosen in ("folders", "git"):
        return Staged(chosen, path, _in_place(path, chosen), in_place=True)
    _fresh(into, path)
    notes: list[str] = []
    source, folder = path, into / CLASS
    if path.is_file():
        top, _ = _zip_root(path)
        try:
            notes += unpack(path, into / UNPACKED)
        except ZipRefused as exc:
            raise LayoutError(str(exc)) from None
        source = into / UNPACKED / top if top else into / UNPACKED
    if chosen in ("folders", "git"):
        source.replace(folder)  # the class as it was packed: discovery says what is odd in it
        learners = list(_in_place(folder, chosen))
    elif chosen == "canvas":
        learners = _stage_canvas(source, folder, notes)
    else:
        learners = _stage_moodle(source, folder, notes)
    shutil.rmtree(into / UNPACKED, ignore_errors=True)
    return Staged(chosen, folder, tuple(sorted(learners, key=lambda x: x.learner)), tuple(notes))


def _fresh(into: Path, source: Path) -> None:
    """Empty `into` for staging; never a folder staging did not make, nor one holding or
    inside the submissions."""
    here, there = into.resolve(), source.resolve()
    if here == there or there in here.parents or here in there.parents:
        raise LayoutError(f"{into}: the staging folder must be apart from {source}")
    if into.exists():
        if not (into / MARKER).is_file():
            raise LayoutError(f"{into}: exists and was not made by staging: refusing to replace it")
        shutil.rmtree(into)
    (into / CLASS).mkdir(parents=True)
    (into / MARKER).write_text("Staged submissions: replaced whole by the next staging.\n")


def _in_place(path: Path, layout: Layout) -> tuple[Learner, ...]:
    learners = []
    for folder in learner_folders(path):
        commit = _head_commit(folder) if layout == "git" else ""
        notes = () if commit or layout != "git" else ("no git commit found in this folder",)
        learners.append(Learner(folder.name, commit=commit, notes=notes))
    return tuple(learners)


def _head_commit(folder: Path) -> str:
    """HEAD's commit, read from the files (no git runs on a learner's repository): each one a
    regular file opened without following a link or waiting on a FIFO, and small; anything
    else, or anything odd in them, gives no commit."""
    git = folder / ".git"
    try:
        if git.is_file():  # a worktree or submodule: ``gitdir: <path>``
            git = (folder / _small_text(git).split(":", 1)[1].strip()).resolve()
        head = _small_text(git / "HEAD").strip()
        commit = head
        if head.startswith("ref: "):
            ref = git / head[5:]
            if ref.is_file():
                commit = _small_text(ref).strip()
            else:
                packed = _small_text(git / "packed-refs", 2**20).splitlines()
                commit = next((ln.split()[0] for ln in packed if ln.endswith(" " + head[5:])), "")
    except (OSError, ValueError, IndexError):  # UnicodeDecodeError is a ValueError
        return ""
    # Only a commit id is believed: whatever else a learner's files say stays out of reports.
    return commit if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit) else ""


def _small_text(path: Path, limit: int = 4096) -> str:
    """The text of the regular file at `path`, at most `limit` bytes (ValueError past it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ValueError(f"{path.name}: not a small regular file")
        return handle.read(limit + 1)[:limit].decode("utf-8")


def _folder_name(learner: str, notes: list[str]) -> str:
    """`learner` as a folder name, bounded in bytes (`grader.runtime.escape.file_names` past
    that)."""
    if len(learner.encode(errors="surrogateescape")) <= MAX_NAME_BYTES:
        return learner
    name = file_names([learner])[learner]
    notes.append(f"{shown(learner[:80])}…: staged as {name} (a folder name must be short)")
    return name


@dataclass
class _Found:
    """One learner's entries on the way to a folder: staged name -> the file in the download."""

    name: str
    user_id: str
    entries: dict[str, Path] = field(default_factory=dict)
    submission_id: str = ""
    late: bool = False
    prefix: str = ""
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _stage_canvas(source: Path, into: Path, notes: list[str]) -> list[Learner]:
    found: dict[str, _Found] = {}
    kept: dict[str, dict[str, tuple[int, re.Match[str]]]] = defaultdict(dict)
    for entry in sorted(source.iterdir(), key=lambda p: p.name):
        match = CANVAS.fullmatch(entry.name)
        if not _visible(entry.name):
            continue
        if match is None or not entry.is_file() or entry.is_symlink():
            notes.append(f"{entry.name}: not a Canvas submission file, not graded")
            continue
        user = found.setdefault(match["user"], _Found(match["name"], match["user"]))
        user.files.append(entry.name)
        original, n = match["file"], 0
        again = RESUBMITTED.fullmatch(original)
        if again:
            original, n = again["stem"] + again["ext"], int(again["n"])
        rounds = kept[user.user_id]
        if original in rounds and rounds[original][0] >= n:
            user.notes.append(f"{entry.name}: an earlier submission of {original}, not graded")
            continue
        if original in rounds:
            older = rounds[original][1].string
            user.notes.append(f"{older}: an earlier submission of {original}, not graded")
        rounds[original] = (n, match)
        user.entries[original] = entry
    names: dict[str, int] = defaultdict(int)
    for user in found.values():
        names[user.name] += 1
        matches = [m for _, (_, m) in sorted(kept[user.user_id].items())]
        user.late = any(m["late"] for m in matches)
        user.submission_id = matches[0]["sub"]
        user.prefix = matches[0].string[: matches[0].start("file") - 1]
    return [
        _write(user, user.name if names[user.name] == 1 else f"{user.name}_{user.user_id}", into)
        for user in found.values()
    ]


def _stage_moodle(source: Path, into: Path, notes: list[str]) -> list[Learner]:
    found: dict[str, _Found] = {}
    for entry in sorted(source.iterdir(), key=lambda p: p.name):
        match = MOODLE.fullmatch(entry.name)
        if not _visible(entry.name):
            continue
        if match is None or entry.is_symlink():
            notes.append(f"{entry.name}: not a Moodle submission, not graded")
            continue
        user = found.setdefault(match["id"], _Found(match["name"], match["id"]))
        if entry.is_dir():
            if not user.prefix or match["plugin"] == "assignsubmission_file":
                user.prefix = entry.name
            for path in sorted(entry.rglob("*")):
                relative = path.relative_to(entry).as_posix()
                if path.is_symlink():
                    user.notes.append(f"{entry.name}/{relative}: a link, not graded")
                elif path.is_file() and all(_visible(p) for p in PurePosixPath(relative).parts):
                    user.entries.setdefault(relative, path)
                    user.files.append(f"{entry.name}/{relative}")
        elif entry.is_file() and match["rest"]:
            user.prefix = user.prefix or entry.name[: -len(match["rest"])]
            user.entries.setdefault(match["rest"], entry)
            user.files.append(entry.name)
    return [_write(user, f"{user.name}_{user.user_id}", into) for user in found.values()]


def _write(user: _Found, learner: str, into: Path) -> Learner:
    """Copy (or unpack) `user`'s entries into their folder."""
    notes = user.notes
    folder = into / _folder_name(learner, notes)
    folder.mkdir()
    for relative, path in sorted(user.entries.items()):
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if relative.lower().endswith(".zip"):
            try:
                notes += [f"{relative}: {note}" for note in unpack(path, target.with_suffix(""))]
            except ZipRefused as exc:
                notes.append(str(exc))
        else:
            shutil.copyfile(path, target, follow_symlinks=False)
    return Learner(
        learner=folder.name,
        name=user.name,
        user_id=user.user_id,
        submission_id=user.submission_id,
        late=user.late,
        prefix=user.prefix,
        files=tuple(sorted(user.files)),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------
# Command line: what a layout would stage, before grading it.


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.classes.layouts", description=__doc__)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--layout", default="auto", choices=("auto", *LAYOUTS))
    parser.add_argument("--into", type=Path, default=Path("grades/.staged"))
    args = parser.parse_args(argv)
    try:
        staged = stage(args.submissions, args.layout, into=args.into)
    except LayoutError as exc:
        print(exc)
        return 2
    where = "in place" if staged.in_place else f"into {staged.folder}"
    print(f"{staged.layout}: {len(staged.learners)} learner(s), staged {where}")
    for learner in staged.learners:
        extra = ["late" if learner.late else "", learner.user_id, learner.commit[:12]]
        print(f"  {learner.learner}  {' '.join(x for x in extra if x)}".rstrip())
        for note in learner.notes:
            print(f"    {note}")
    for note in staged.notes:
        print(f"  note: {note}")
    return 0


__all__ = [
    "LAYOUTS",
    "Layout",
    "LayoutError",
    "Learner",
    "Staged",
    "detect",
    "stage",
]

if __name__ == "__main__":
    sys.exit(main())
