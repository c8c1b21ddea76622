"""Grades out where they go: the files an LMS imports, under ``OUT/lms/``.

- ``scores.csv``: ``learner,score`` for any gradebook that takes two columns;
- ``canvas_import.csv`` (with a roster: Canvas's own gradebook export): its ``Student``, ``ID``,
  ``SIS User ID``, ``SIS Login ID`` and ``Section`` columns and its "Points Possible" row,
  copied, plus the assignment's column with each learner's total. A learner is matched by the
  Canvas user id the Canvas layout carried, else by the SIS login, else by Canvas's name
  rule; a learner or a roster row left unmatched is listed in ``notes.txt``, never dropped
  in silence (an unmatched roster row keeps an empty cell: Canvas leaves its grade alone);
- ``feedback/`` and ``feedback.zip``: each learner's feedback named the way the LMS's bulk
  upload matches it to them (Canvas: the download's own prefix; Moodle: the download's
  folder per learner);
- ``notes.txt``: what matched, what did not, and why.

Every CSV cell goes through `grader.runtime.escape.csv_cell`: one a spreadsheet would read as a
formula (a leading ``=``, ``+``, ``-``, ``@``, tab or carriage return) gets a leading ``'``.
Writing again replaces ``OUT/lms/`` whole, byte for byte the same on the same grades.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.classes.cache import replace_file
from grader.classes.grades import ClassReport
from grader.classes.layouts import Staged
from grader.classes.zips import write_zip
from grader.runtime.escape import csv_cell
from workbook.shared.errors import WorkbookError

#: The identity columns of a Canvas gradebook export, in its order.
CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
#: The longest file name a file system takes, in bytes.
MAX_FILE_NAME = 255
#: The assignment column written when ``ASSIGNMENT=`` names none (Canvas makes it on import).
DEFAULT_ASSIGNMENT = "Run It Twice"


class LmsError(WorkbookError):
    """A roster that cannot be read as Canvas's gradebook export."""


@dataclass(frozen=True)
class Score:
    """One learner's row: what a gradebook takes, and the feedback an upload carries."""

    learner: str
    total: int
    max: int
    status: str
    feedback: str = ""


@dataclass(frozen=True)
class Exported:
    files: tuple[Path, ...]
    notes: tuple[str, ...]


def scores_from_report(report: ClassReport) -> list[Score]:
    """Each learner of `report`, with the feedback ``OUT/feedback/`` holds for them."""
    from grader.classes.reports import feedback_md

    full = report.full_feedback
    return [
        Score(g.learner, g.total, g.max, g.status, feedback_md(g, full=full))
        for g in report.learners
    ]


def csv_text(rows: Iterable[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows([csv_cell(str(cell)) for cell in row] for row in rows)
    return buffer.getvalue()


def canvas_name(student: str) -> str:
    """Canvas's name rule for its download names, as read from its exports: the sortable
    name (``Smith, Jane``) in lower case, letters and digits only (``smithjane``)."""
    return re.sub(r"[\W_]+", "", student).lower()


def write_exports(
    out: Path,
    scores: Sequence[Score],
    *,
    staged: Staged | None = None,
    roster: Path | None = None,
    assignment: str | None = None,
) -> Exported:
    """Write ``OUT/lms/`` (replaced whole) and return the files written and the notes.
    Raises `LmsError` on a roster that is not Canvas's gradebook export."""
    lms = out / "lms"
    rows = _roster(roster) if roster is not None else None  # read before anything is removed
    if lms.exists():
        shutil.rmtree(lms)
    lms.mkdir(parents=True)
    files: list[Path] = []
    notes: list[str] = []
    ordered = sorted(scores, key=lambda s: s.learner)
    replace_file(lms / "scores.csv", csv_text([("learner", "score"), *_totals(ordered)]))
    files.append(lms / "scores.csv")
    if rows is not None:
        text, said = canvas_import(rows, ordered, staged, assignment)
        replace_file(lms / "canvas_import.csv", text)
        files.append(lms / "canvas_import.csv")
        notes += said
    if staged is not None and staged.layout in ("canvas", "moodle"):
        named, said = feedback_names(ordered, staged)
        notes += said
        for name, text in named.items():
            replace_file(lms / "feedback" / name, text)
        if named:
            write_zip(lms / "feedback.zip", named)
            files += [*(lms / "feedback" / n for n in sorted(named)), lms / "feedback.zip"]
    replace_file(lms / "notes.txt", "\n".join(notes or ["Every learner matched."]) + "\n")
    files.append(lms / "notes.txt")
    return Exported(tuple(files), tuple(notes))


def _totals(scores: Sequence[Score]) -> list[tuple[str, int]]:
    return [(s.learner, s.total) for s in scores]


def _roster(path: Path) -> list[list[str]]:
    try:
        # Canvas writes a byte order mark; a spreadsheet may have saved it in its own way.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            rows = [row for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LmsError(f"ROSTER={path}: cannot be read: {exc}") from None
    if not rows or not {"Student", "ID"} <= {c.strip() for c in rows[0]}:
        raise LmsError(
            f"ROSTER={path}: not a Canvas gradebook export (no Student and ID columns in its"
            " first row): export it from Canvas's Gradebook, Export, Export Entire Gradebook"
        )
    return rows


def _assignment_column(header: Sequence[str], assignment: str | None) -> tuple[int | None, str]:
    """The roster's column for `assignment` (exactly, or as Canvas writes it, with its id in
    brackets), or None and the name of the column to add."""
    wanted = assignment or DEFAULT_ASSIGNMENT
    with_id = re.compile(re.escape(wanted) + r" \(\d+\)")
    for i, name in enumerate(header):
        if name.strip() == wanted or with_id.fullmatch(name.strip()):
            return i, name.strip()
    return None, wanted


def canvas_import(
    rows: Sequence[Sequence[str]],
    scores: Sequence[Score],
    staged: Staged | None,
    assignment: str | None,
) -> tuple[str, list[str]]:
    """The gradebook import CSV from Canvas's export `rows`, and notes on every learner and
    roster row left unmatched."""
    header = [c.strip() for c in rows[0]]
    keep = [header.index(c) for c in CANVAS_IDENTITY if c in header]
    column, title = _assignment_column(header, assignment)
    notes = []
    if column is None:
        notes.append(f'ASSIGNMENT="{title}": no such column in the roster; Canvas adds it')
    points_row = next((r for r in rows[1:] if r and r[0].strip() == POINTS_POSSIBLE), None)
    students = [r for r in rows[1:] if r is not points_row]
    most = max((s.max for s in scores), default=0)
    possible = str(most)
    if points_row is not None and column is not None and column < len(points_row):
        possible = points_row[column].strip() or possible
        if possible != str(most):
            notes.append(
                f'"{title}" is worth {possible} points in Canvas; the workbook\'s total is'
                f" {most}: the totals are written as they are, in points"
            )
    matched = match_roster(students, header, scores, staged)
    out: list[list[object]] = [[*(header[i] for i in keep), title]]
    if points_row is not None or column is None:
        first = [points_row[i] if points_row and i < len(points_row) else "" for i in keep]
        out.append([f"    {POINTS_POSSIBLE}", *first[1:], possible])
    by_learner = {s.learner: s for s in scores}
    for i, row in enumerate(students):
        learner = matched.get(i)
        cells: list[object] = [row[j] if j < len(row) else "" for j in keep]
        out.append([*cells, by_learner[learner].total if learner else ""])
        if learner is None:
            who = row[header.index("Student")] if len(row) > header.index("Student") else "?"
            notes.append(f"roster row {who!r}: no learner matched, its cell left empty")
    for score in scores:
        if score.learner not in matched.values():
            notes.append(f"learner {score.learner!r}: not in the roster, not imported")
    return csv_text(out), notes


def match_roster(
    students: Sequence[Sequence[str]],
    header: Sequence[str],
    scores: Sequence[Score],
    staged: Staged | None,
) -> dict[int, str]:
    """Roster row index -> learner: by the Canvas user id the layout carried, then by the SIS
    login, then by Canvas's name rule where it names exactly one row and one learner."""

    def cell(row: Sequence[str], column: str) -> str:
        i = header.index(column) if column in header else -1
        return row[i].strip() if 0 <= i < len(row) else ""

    meta = {s.learner: staged.learner(s.learner) if staged else None for s in scores}
    canvas = staged is not None and staged.layout == "canvas"
    by_id = {m.user_id: name for name, m in meta.items() if canvas and m and m.user_id}
    keys = {name: canvas_name(m.name if m and m.name else name) for name, m in meta.items()}
    learner_keys = Counter(keys.values())
    by_name = {key: name for name, key in keys.items() if learner_keys[key] == 1}
    row_keys = Counter(canvas_name(cell(r, "Student")) for r in students)

    def by_rule(rule: str, row: Sequence[str]) -> str | None:
        if rule == "id":
            return by_id.get(cell(row, "ID"))
        if rule == "login":
            login = cell(row, "SIS Login ID")
            return login if login in meta else None
        key = canvas_name(cell(row, "Student"))
        return by_name.get(key) if row_keys[key] == 1 else None

    matched: dict[int, str] = {}
    for rule in ("id", "login", "name"):
        for i, row in enumerate(students):
            learner = None if i in matched else by_rule(rule, row)
            if learner and learner not in matched.values():
                matched[i] = learner
    return matched


def feedback_names(scores: Sequence[Score], staged: Staged) -> tuple[dict[str, str], list[str]]:
    """File name (inside the upload zip) -> feedback, named the way `staged`'s LMS matches
    an upload to a learner: Canvas by its download prefix, Moodle by its folder."""
    named: dict[str, str] = {}
    notes = []
    for score in scores:
        meta = staged.learner(score.learner)
        if meta is None or not meta.prefix:
            notes.append(f"learner {score.learner!r}: no {staged.layout} name to upload to")
            continue
        name = f"{meta.prefix}_feedback.md" if staged.layout == "canvas" else meta.prefix
        if len(name.encode(errors="surrogateescape")) > MAX_FILE_NAME:
            notes.append(f"learner {score.learner!r}: the upload name would be too long")
            continue
        named[name if staged.layout == "canvas" else f"{name}/feedback.md"] = score.feedback
    return named, notes
