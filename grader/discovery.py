"""Finding what a learner handed in: one folder per learner, one notebook per build.

A learner's folder may hold their whole copy of the workbook or just their build notebooks,
anywhere inside; a build is found by its number (``03_*.ipynb``), hidden folders
(``.pristine/``, ``.backups/``, checkpoints) aside. Symlinks are never followed, and nothing
here reads a notebook's contents.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from workbook.manifest import Entry

#: A notebook bigger than this is not read (a learner's notebook is a few hundred KiB).
MAX_NOTEBOOK_BYTES = 16 * 2**20
#: Folders inside a learner's folder that never hold the notebook they hand in.
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules"})
#: `Found.problem` of a build the learner did not hand in.
NOT_SUBMITTED = "not submitted"


@dataclass(frozen=True)
class Found:
    """A learner's notebook for one build, or why there is none to grade."""

    path: Path | None
    problem: str | None = None
    shown: str = ""
    """The path as the learner knows it (relative to their folder)."""


def learner_folders(submissions: Path) -> list[Path]:
    """One folder per learner, sorted by name; hidden entries and loose files are skipped."""
    return sorted(
        (p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.name,
    )


def find_notebook(folder: Path, entry: Entry) -> Found:
    """Build `entry`'s notebook in `folder` (searched recursively, hidden folders skipped).

    Several candidates: the one at the manifest's path wins, then the manifest's file name;
    otherwise the learner must keep just one. A symlink is never followed: it could point at
    the instructor's solution."""
    if folder.is_symlink():
        return Found(None, "the learner's folder is a symlink, not a folder")
    pattern = re.compile(rf"{re.escape(entry.number)}_.*\.ipynb")
    candidates: list[Path] = []
    links: list[Path] = []
    for here, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS)
        for name in sorted(files):
            if pattern.fullmatch(name):
                path = Path(here, name)
                (links if path.is_symlink() else candidates).append(path)
    if not candidates:
        if links:
            link = links[0].relative_to(folder).as_posix()
            return Found(None, f"{link} is a symlink, not a notebook file: hand in the file")
        return Found(None, NOT_SUBMITTED)
    if len(candidates) > 1:
        exact = [p for p in candidates if p.relative_to(folder).as_posix() == entry.path]
        named = [p for p in candidates if p.name == Path(entry.path).name]
        candidates = exact or named or candidates
    if len(candidates) > 1:
        listed = ", ".join(str(p.relative_to(folder)) for p in candidates)
        return Found(
            None,
            f"{len(candidates)} notebooks for build {entry.number} ({listed}): hand in one",
        )
    path = candidates[0]
    shown = path.relative_to(folder).as_posix()
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        return Found(
            None, f"{shown} is {size // 2**20} MiB: too large to be a notebook (limit 16 MiB)"
        )
    return Found(path, None, shown)
