"""A class's grades as data: per learner (`LearnerGrade`), per build (`BuildGrade`), and the whole
run (`ClassReport`). `grader.classes.batch` fills them in; `grader.classes.reports` writes them
out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from grader.classes.discovery import NOT_SUBMITTED, Found
from grader.runtime.results import SubmissionResult
from grader.runtime.sandbox import Isolation
from workbook.shared.manifest import Entry

BuildStatus = Literal["graded", "partial", "error", "not submitted"]
LearnerStatus = Literal["graded", "partial", "error"]


def one_line(text: str, width: int) -> str:
    """`text` with its white space folded to single spaces, at most `width` characters."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass
class BuildGrade:
    """One learner's grade for one build."""

    entry: Entry
    found: Found
    result: SubmissionResult
    source_id: str | None = None
    cached: bool = False

    @property
    def status(self) -> BuildStatus:
        if self.found.problem == NOT_SUBMITTED:
            return "not submitted"
        return self.result.status

    @property
    def score(self) -> int:
        return self.result.score

    @property
    def max_score(self) -> int:
        return self.entry.max_points


@dataclass
class LearnerGrade:
    """One learner: `learner` is their folder's name, kept whole (outputs escape it)."""

    learner: str
    builds: list[BuildGrade] = field(default_factory=list)
    problem: str = ""
    """Why nothing of the folder could be graded (a zip where the folder should be, a
    symlink, an unreadable folder): the whole reason, and the status is ``error``."""
    notes: list[str] = field(default_factory=list)
    """What else was found and not read (a zip beside the folder, a search cut short)."""
    reteach: list[str] = field(default_factory=list)
    """The known bugs whose failures theirs match (`grader.classes.reteach`), each in its words."""

    @property
    def total(self) -> int:
        return sum(b.score for b in self.builds)

    @property
    def max(self) -> int:
        return sum(b.max_score for b in self.builds)

    @property
    def status(self) -> LearnerStatus:
        if self.problem:
            return "error"
        statuses = {b.status for b in self.builds}
        if statuses <= {"graded"}:
            return "graded"
        if statuses <= {"error", "not submitted"}:
            return "error"
        return "partial"

    @property
    def reason(self) -> str:
        parts = [one_line(self.problem, 300)] if self.problem else []
        for build in [] if self.problem else self.builds:
            if build.status == "graded":
                continue
            why = build.found.problem or build.result.reason or build.status
            parts.append(f"{build.entry.number}: {one_line(why, 200)}")
        parts += [one_line(note, 200) for note in self.notes]
        return "; ".join(parts)

    @property
    def needs_a_look(self) -> bool:
        """The instructor should read this learner's line: nothing graded, or notes."""
        return self.status == "error" or bool(self.notes)


@dataclass
class ClassReport:
    builds: list[Entry]
    learners: list[LearnerGrade]
    graded: int = 0
    from_cache: int = 0
    seconds: float = 0.0
    isolation: Isolation | None = None
    skipped_builds: list[str] = field(default_factory=list)
    stub_ids: dict[str, str] = field(default_factory=dict)
    walls: str = "bwrap"
    """How the learners' code was walled in (`grader.runtime.sandbox.WALLS_MODES`): every row says
    it."""
    not_graded: list[tuple[str, str]] = field(default_factory=list)
    """Entries of the submissions folder that are no learner's folder: (name, why)."""
    full_feedback: bool = False
    """``FEEDBACK=full``: feedback shows each hidden test's call and expected value too."""
    reteach: list[tuple[str, str, int]] = field(default_factory=list)
    """The "What to reteach" table: (build, the known bug in its words, learners matching)."""
    notes: list[str] = field(default_factory=list)
    """What the batch itself met (stale scratch it could not remove, cache writes that
    failed): printed and in the summary, never a reason to stop."""
