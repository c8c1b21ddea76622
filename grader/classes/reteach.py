"""What to reteach: a learner's failures matched to the known bug they look like.

Each known bug of a build (a ``[[mutant]]`` of its ``mutants.toml``) has a *signature*: the set
of graded tests it fails when laid into the solution. A learner's failures (the tests their code
ran and got wrong, or hung on; stubs and notebooks that did not load are left out: they say
nothing of a misconception) match the bug whose signature overlaps them most by Jaccard,
|A ∩ B| / |A ∪ B|, if that is at least `THRESHOLD`; a tie names every tied bug.

Signatures are graded once per grader digest (the suite, the solution, the packages: what can change
them) and kept under ``.check-cache/signatures/`` of the repository, where
`grader.proofs.suite_validity` also leaves the ones it computes; a repeat reads them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.classes.cache import grader_digest, replace_file
from grader.classes.grades import LearnerGrade
from grader.proofs.known_bugs import mutant_lines
from grader.runtime.pool import RunnerPool
from grader.runtime.protocol import WallsMode
from grader.runtime.results import Outcome, SubmissionResult
from grader.runtime.sandbox import Limits
from grader.suites.loading import load_mutants, load_suite, suite_dir
from workbook.shared.export import export_source
from workbook.shared.manifest import Entry

THRESHOLD = 0.5
#: The outcomes that say the learner's code ran and was wrong.
WRONG = frozenset({Outcome.WRONG, Outcome.UNFINISHED})


@dataclass(frozen=True)
class Bug:
    name: str
    words: str
    fails: frozenset[str]


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def failures(entry: Entry, result: SubmissionResult) -> frozenset[str]:
    """The graded tests (not the learner's own) `result` got wrong or hung on."""
    graded = {t.name for t in entry.tests}
    return frozenset(
        t.name for t in result.tests if t.name in graded and not t.passed and t.kind in WRONG
    )


def match(failed: frozenset[str], bugs: Sequence[Bug]) -> list[Bug]:
    """The bugs whose signature overlaps `failed` most, at least `THRESHOLD`; none for none."""
    if not failed:
        return []
    scored = [(jaccard(failed, bug.fails), bug) for bug in bugs if bug.fails]
    best = max((score for score, _ in scored), default=0.0)
    return [bug for score, bug in scored if score == best] if best >= THRESHOLD else []


def as_graded(source: str) -> str:
    """An export as class grading grades it: its first line without the notebook's name."""
    from grader.learner_tests.wheats import HEADER

    return HEADER.sub("# Exported", source, count=1)


def signature_path(root: Path, entry: Entry, builds: Path) -> Path:
    digest = grader_digest(entry.number, root, builds, Limits())
    return root / ".check-cache" / "signatures" / f"{entry.number}-{digest[:40]}.json"


def store(root: Path, entry: Entry, builds: Path, fails: dict[str, set[str]]) -> None:
    """Keep the signatures (bug name -> failing tests); a folder that cannot be written keeps
    nothing, and the next run grades them again."""
    text = json.dumps({name: sorted(tests) for name, tests in sorted(fails.items())}, indent=1)
    with contextlib.suppress(OSError):
        replace_file(signature_path(root, entry, builds), text + "\n")


def _read(path: Path) -> dict[str, list[str]] | None:
    """Kept signatures: a JSON object of lists of test names, or None (missing, unreadable or
    of another shape: graded again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data:
        return None
    for tests in data.values():
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            return None
    return data


def signatures(entry: Entry, root: Path, builds: Path, pool: RunnerPool | None) -> list[Bug]:
    """Every known bug of `entry` with its signature: read back (its words from
    ``mutants.toml`` alone: no suite is imported), or graded on `pool` (None: what is kept,
    or nothing)."""
    mutants = load_mutants(suite_dir(entry.number, builds) / "mutants.toml")
    words = {m.name: m.bug for m in mutants}
    path = signature_path(root, entry, builds)
    kept = _read(path)
    if kept is None:
        if pool is None or entry.solution is None:
            return []

        suite = load_suite(entry.number, builds)
        source = as_graded(export_source(root / entry.solution))
        fails: dict[str, set[str]] = {}
        lines = mutant_lines(suite, source, pool, entry.number, entry, fails)
        if all(line.ok for line in lines):  # every bug killed, as validity requires
            store(root, entry, builds, fails)
        kept = {name: sorted(tests) for name, tests in fails.items()}
    graded = {t.name for t in entry.tests}
    return [Bug(n, words[n], frozenset(kept[n]) & graded) for n in words if n in kept]


def name_matches(
    learners: Sequence[LearnerGrade],
    entries: Sequence[Entry],
    root: Path,
    builds: Path,
    pool: Callable[[], RunnerPool],
) -> list[tuple[str, str, int]]:
    """Set each learner's `reteach` lines and return the class table: (build, the bug's words,
    how many learners match it), most learners first. Signatures are graded (on `pool()`,
    started only then) just for builds where some learner got a test wrong."""
    table: list[tuple[str, str, int]] = []
    started: RunnerPool | None = None
    try:
        for entry in entries:
            failed = {
                learner.learner: failures(entry, build.result)
                for learner in learners
                for build in learner.builds
                if build.entry.number == entry.number and build.found.path is not None
            }
            if not any(failed.values()):
                continue
            bugs = signatures(entry, root, builds, None)
            if not bugs:
                started = started or pool()
                bugs = signatures(entry, root, builds, started)
            counts: dict[str, int] = {}
            for learner in learners:
                for bug in match(failed.get(learner.learner, frozenset()), bugs):
                    learner.reteach.append(f"build {entry.number}: {bug.words}")
                    counts[bug.name] = counts.get(bug.name, 0) + 1
            words = {bug.name: bug.words for bug in bugs}
            ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            table += [(entry.number, words[name], n) for name, n in ranked]
    finally:
        if started is not None:
            started.close()
    return table


def keep_signatures(entries: Sequence[Entry], root: Path, builds: Path, walls: WallsMode) -> int:
    """Grade and keep the signatures of each of `entries` not kept yet (what a class grading
    would do on its first wrong answer); how many builds needed it."""
    missing = [e for e in entries if not signatures(e, root, builds, None)]
    if missing:
        with RunnerPool(2, Limits(), hide=(), walls=walls, learner_tests=False) as pool:
            for entry in missing:
                signatures(entry, root, builds, pool)
    return len(missing)
