"""Finding what a class handed in: one folder per learner, one notebook per build.

`scan_class` lists the submissions folder: every folder is a learner (dot-named ones too),
a zip is named and stands for the learner of its name when no folder has it, and anything
else is listed as not graded. `scan_learner` walks one learner's folder once, iteratively and
within bounds (`MAX_DEPTH`, `MAX_ENTRIES`), never following a symlink and reading no file's
contents; `find_notebook` then picks a build's notebook by its number (``03_*.ipynb``), hidden
folders (``.pristine/``, ``.backups/``, checkpoints) aside. Only a regular file counts as a
notebook: a symlink, a FIFO, a device or a folder with a notebook's name gets a reason instead.
Scanning the same folders twice gives the same answer.
"""

from __future__ import annotations

import itertools
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from workbook.shared.export import file_kind
from workbook.shared.manifest import Entry

#: Folders inside a learner's folder that never hold the notebook they hand in.
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules"})
#: Folders in the submissions folder that tools make, not learners.
NOT_LEARNERS = frozenset({".git", ".ipynb_checkpoints", "__MACOSX"})
#: How deep a learner's folder is searched, and how many entries at most.
MAX_DEPTH = 32
MAX_ENTRIES = 50_000
#: How many entries of the submissions folder are looked at, at most.
MAX_LEARNERS = 20_000
#: `Found.problem` of a build the learner did not hand in.
NOT_SUBMITTED = "not submitted"


def zip_reason(names: list[str]) -> str:
    listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"handed in as a zip ({listed}): unzip it, or ask the learner to hand in the"
        " notebooks themselves; zips are not read"
    )


@dataclass(frozen=True)
class Found:
    """A learner's notebook for one build, or why there is none to grade."""

    path: Path | None
    problem: str | None = None
    shown: str = ""
    """The path as the learner knows it (relative to their folder)."""


@dataclass
class LearnerFolder:
    """What one walk of a learner's folder found (paths relative to the folder)."""

    folder: Path
    notebooks: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    odd: dict[str, str] = field(default_factory=dict)
    """Entries named like a notebook that are not a regular file: path -> what they are."""
    zips: list[str] = field(default_factory=list)
    problem: str | None = None
    """Why the folder cannot be graded at all (not a folder, unreadable)."""
    notes: list[str] = field(default_factory=list)


@dataclass
class Learner:
    """One learner of the class: a folder, or a zip standing where the folder should be."""

    name: str
    folder: Path | None
    zips: list[str] = field(default_factory=list)
    """Zips in the submissions folder under this learner's name."""


@dataclass
class ClassFolder:
    learners: list[Learner]
    not_graded: list[tuple[str, str]] = field(default_factory=list)
    """Entries of the submissions folder that are no learner: (name, why)."""


def _mode(entry: os.DirEntry[str]) -> int:
    try:
        return entry.stat(follow_symlinks=False).st_mode
    except OSError:
        return 0


def _is_zip(name: str) -> bool:
    return len(name) > 4 and name[-4:].lower() == ".zip"


def scan_class(submissions: Path) -> ClassFolder:
    """Every learner of the submissions folder, sorted by name: each folder (a symlink to one
    too, to be refused later), and each zip with no folder of its name."""
    folders: dict[str, Path] = {}
    zips: dict[str, list[str]] = {}
    not_graded: list[tuple[str, str]] = []
    with os.scandir(submissions) as entries:
        for count, entry in enumerate(entries):
            if count >= MAX_LEARNERS:
                not_graded.append(("…", f"more than {MAX_LEARNERS} entries: the rest not read"))
                break
            mode = _mode(entry)
            linked_dir = stat.S_ISLNK(mode) and entry.is_dir(follow_symlinks=True)
            if entry.name in NOT_LEARNERS and stat.S_ISDIR(mode):
                not_graded.append((entry.name, "a tool's folder, not a learner's: skipped"))
            elif stat.S_ISDIR(mode) or linked_dir:
                folders[entry.name] = Path(entry.path)
            elif _is_zip(entry.name) and stat.S_ISREG(mode):
                zips.setdefault(entry.name[:-4], []).append(entry.name)
            else:
                kind = file_kind(mode)
                not_graded.append((entry.name, f"{kind}, not a learner's folder: not graded"))
    learners = [
        Learner(name, folders.get(name), sorted(zips.get(name, [])))
        for name in sorted({*folders, *zips})
    ]
    return ClassFolder(learners, sorted(not_graded))


def learner_folders(submissions: Path) -> list[Path]:
    """The learners' folders, sorted by name (dot-named ones included)."""
    return [x.folder for x in scan_class(submissions).learners if x.folder is not None]


def scan_learner(
    folder: Path, *, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES
) -> LearnerFolder:
    """Walk `folder` breadth first, at most `max_depth` deep and `max_entries` entries, in
    name order: the notebooks it holds, and what looks like one but is not a regular file."""
    found = LearnerFolder(folder)
    try:
        top = os.lstat(folder)
    except OSError as exc:
        found.problem = f"the learner's folder cannot be read: {exc.strerror}"
        return found
    if not stat.S_ISDIR(top.st_mode):
        found.problem = f"the learner's folder is {file_kind(top.st_mode)}, not a folder"
        return found
    level: list[str] = [""]
    seen = 0
    unreadable = 0
    for depth in range(max_depth + 1):
        below: list[str] = []
        for relative in level:
            try:
                with os.scandir(folder / relative if relative else folder) as it:
                    # Never more than the budget left, however many a folder holds.
                    entries = sorted(
                        itertools.islice(it, max_entries - seen + 1), key=lambda e: e.name
                    )
            except OSError:
                if not relative:
                    found.problem = "the learner's folder cannot be read"
                    return found
                unreadable += 1
                continue
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    found.notes.append(
                        f"the folder holds more than {max_entries} files and folders:"
                        " only the first were searched for notebooks"
                    )
                    return _finish(found, unreadable)
                path = f"{relative}/{entry.name}" if relative else entry.name
                if _note_entry(found, path, entry.name, _mode(entry)):
                    below.append(path)
        if not below:
            break
        if depth == max_depth:
            found.notes.append(
                f"folders nested deeper than {max_depth} levels were not searched for notebooks"
            )
            break
        level = below
    return _finish(found, unreadable)


def _note_entry(found: LearnerFolder, path: str, name: str, mode: int) -> bool:
    """Put one entry of the walk where it belongs in `found` (a notebook, a link or odd file
    named like one, a zip); whether it is a folder to search next."""
    if name.endswith(".ipynb"):
        if stat.S_ISREG(mode):
            found.notebooks.append(path)
        elif stat.S_ISLNK(mode):
            found.links.append(path)
        else:
            found.odd[path] = file_kind(mode)
    elif _is_zip(name) and stat.S_ISREG(mode):
        found.zips.append(path)
    return stat.S_ISDIR(mode) and not (name.startswith(".") or name in SKIPPED_FOLDERS)


def _finish(found: LearnerFolder, unreadable: int) -> LearnerFolder:
    if unreadable:
        found.notes.append(f"{unreadable} folder(s) inside could not be read")
    return found


def find_notebook(folder: Path | LearnerFolder, entry: Entry) -> Found:
    """Build `entry`'s notebook in `folder` (a folder, or one `scan_learner` already walked).

    Several candidates: the one at the manifest's path wins, then the manifest's file name;
    otherwise the learner must keep just one. A symlink is never followed: it could point at
    the instructor's solution."""
    scanned = folder if isinstance(folder, LearnerFolder) else scan_learner(folder)
    if scanned.problem is not None:
        return Found(None, scanned.problem)
    prefix = f"{entry.number}_"
    candidates = [p for p in scanned.notebooks if p.rsplit("/", 1)[-1].startswith(prefix)]
    if not candidates:
        links = [p for p in scanned.links if p.rsplit("/", 1)[-1].startswith(prefix)]
        odd = {p: k for p, k in scanned.odd.items() if p.rsplit("/", 1)[-1].startswith(prefix)}
        if links:
            return Found(None, f"{links[0]} is a symlink, not a notebook file: hand in the file")
        if odd:
            path, kind = next(iter(odd.items()))
            return Found(None, f"{path} is {kind}, not a notebook file: hand in the notebook")
        if scanned.zips:
            return Found(None, zip_reason(scanned.zips))
        return Found(None, NOT_SUBMITTED)
    if len(candidates) > 1:
        exact = [p for p in candidates if p == entry.path]
        named = [p for p in candidates if p.rsplit("/", 1)[-1] == Path(entry.path).name]
        candidates = exact or named or candidates
    if len(candidates) > 1:
        listed = ", ".join(candidates)
        return Found(
            None,
            f"{len(candidates)} notebooks for build {entry.number} ({listed}): hand in one",
        )
    return Found(scanned.folder / candidates[0], None, candidates[0])
