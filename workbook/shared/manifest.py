"""The manifest, `workbook.toml`: the arc's order, each notebook's kind and title; and each
build's ``builds/buildNN/build.toml``: its graded tests' points and hints (rustlings'
`info.toml`, for notebooks, with each exercise's tables in its own folder).

Reading it twice gives equal objects; nothing here touches the notebooks themselves.
"""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from workbook.checking.fixedhypothesis import DEFAULT_EXAMPLES
from workbook.shared.errors import ManifestError, WorkbookError

Kind = Literal["concept", "build", "quiz"]
KINDS: tuple[Kind, ...] = ("concept", "build", "quiz")


@dataclass(frozen=True)
class TestSpec:
    """One graded test: its bare name (no ``test_``), points, hint, and whether learners see it."""

    name: str
    points: int
    hint: str
    visible: bool = False


@dataclass(frozen=True)
class LearnerTestSpec:
    """A test the learner writes (a `test` cell's ``test_<name>``), graded by the bugs it catches.

    `catches` names known bugs of the build's ``mutants.toml``; `gate` is the one that
    removes the key (a test that misses it earns nothing, however much else it catches)."""

    name: str
    """The function's own name, ``test_`` prefix included (never a graded test's bare name)."""
    points: int
    hint: str
    catches: tuple[str, ...]
    gate: str
    max_examples: int = DEFAULT_EXAMPLES
    """Hypothesis examples per run, fixed so that a grade is the same on every run."""
    visible: ClassVar[bool] = True
    """The learner wrote it: it is never a hidden test."""


@dataclass(frozen=True)
class Entry:
    """One notebook of the arc."""

    number: str
    kind: Kind
    title: str
    path: str
    """The notebook a learner opens, relative to the repo root."""
    outcome: str
    """What a learner can do after it (the README's arc table shows this)."""
    solution: str | None = None
    tests: tuple[TestSpec, ...] = ()
    learner_tests: tuple[LearnerTestSpec, ...] = ()

    @property
    def graded(self) -> bool:
        return bool(self.tests)

    @property
    def every_test(self) -> tuple[TestSpec | LearnerTestSpec, ...]:
        """The graded tests, then the learner tests: every line of the build's grade."""
        return (*self.tests, *self.learner_tests)

    @property
    def max_points(self) -> int:
        return sum(t.points for t in self.tests) + sum(t.points for t in self.learner_tests)

    def test(self, name: str) -> TestSpec:
        for spec in self.tests:
            if spec.name == name:
                return spec
        raise ManifestError(f"notebook {self.number} has no test named {name!r}")


@dataclass(frozen=True)
class Manifest:
    root: Path
    entries: tuple[Entry, ...] = field(default_factory=tuple)

    def entry(self, number: str) -> Entry:
        for entry in self.entries:
            if entry.number == number:
                return entry
        known = ", ".join(e.number for e in self.entries)
        raise ManifestError(f"no notebook {number!r} in the manifest (it has {known})")

    @property
    def builds(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.kind == "build")

    @property
    def graded(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.graded)

    def first_existing(self) -> Entry | None:
        """The first notebook of the arc that is on disk (what `make lab` opens)."""
        for entry in self.entries:
            if (self.root / entry.path).exists():
                return entry
        return None


class UnknownBuild(WorkbookError):
    """``BUILD=`` names a build that is not one of those that can be checked or graded here."""


def pick_builds(values: Sequence[str], valid: Sequence[str]) -> list[str]:
    """The builds ``BUILD=`` asks for, in the order of `valid` (the arc's): each value may hold
    several numbers separated by spaces or commas ("03 05", "3,5"). An unknown number raises
    `UnknownBuild` with one line listing the valid ones; nothing asked for means all of them."""
    tokens = [n for v in values for n in v.replace(",", " ").split()]
    asked = {t: str(int(t)).zfill(2) if t.isdigit() else t for t in tokens}
    unknown = [t for t, n in asked.items() if n not in valid]
    if unknown or (values and not tokens):
        which = f"build {', '.join(unknown)}" if unknown else "build number"
        raise UnknownBuild(
            f"BUILD={' '.join(values)}: no {which} here; the builds are {', '.join(valid)}."
        )
    return [n for n in valid if n in asked.values()] if tokens else list(valid)


def repo_root() -> Path:
    """The folder holding `workbook.toml` (this package is installed from there, editable)."""
    return Path(__file__).resolve().parents[2]


def build_toml(root: Path, number: str) -> Path:
    """Where build `number` keeps its tables: ``builds/buildNN/build.toml`` beside the manifest."""
    return root / "builds" / f"build{number}" / "build.toml"


def manifest_files(root: Path) -> list[Path]:
    """Every file the manifest is read from: ``workbook.toml`` and each build's ``build.toml``
    (what to copy, with the same layout, for a manifest of one's own)."""
    return [root / "workbook.toml", *sorted((root / "builds").glob("build*/build.toml"))]


def copy_manifest(root: Path, to: Path) -> Path:
    """Copy `root`'s `manifest_files` into `to`, laid out the same; returns the copy's
    ``workbook.toml``. Copying twice leaves the same files."""
    for path in manifest_files(root):
        (to / path.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, to / path.relative_to(root))
    return to / "workbook.toml"


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: not there") from None
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None


def build_tables(root: Path, number: str) -> dict[str, Any]:
    """The tables of build `number`'s ``build.toml`` (``test``, ``learner_test``,
    ``left_to_graders``); raises `ManifestError` when the file is missing or not TOML."""
    return _read(build_toml(root, number))


def _tests(raw: dict[str, Any]) -> tuple[tuple[TestSpec, ...], tuple[LearnerTestSpec, ...]]:
    tests = tuple(
        TestSpec(
            name=t["name"],
            points=int(t["points"]),
            hint=t["hint"],
            visible=bool(t.get("visible", False)),
        )
        for t in raw.get("test", [])
    )
    learner_tests = tuple(
        LearnerTestSpec(
            name=t["name"],
            points=int(t["points"]),
            hint=t["hint"],
            catches=tuple(t["catches"]),
            gate=t["gate"],
            max_examples=int(t.get("max_examples", DEFAULT_EXAMPLES)),
        )
        for t in raw.get("learner_test", [])
    )
    return tests, learner_tests


@cache
def load_manifest(path: Path | None = None) -> Manifest:
    """Parse `workbook.toml` and, for each build or quiz, its ``builds/buildNN/build.toml``.
    Raises `ManifestError` with the file and the offending entry."""
    path = path or repo_root() / "workbook.toml"
    if not path.exists():
        raise ManifestError(f"{path}: no manifest here")
    data = _read(path)
    entries = []
    numbers = set()
    for i, raw in enumerate(data.get("notebook", []), start=1):
        where = f"{path.name}: notebook #{i}"
        try:
            kind = raw["kind"]
            if kind not in KINDS:
                raise ManifestError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
            number = str(raw["number"])
            if kind != "concept":
                where = f"{build_toml(path.parent, number).relative_to(path.parent)}"
            tables = build_tables(path.parent, number) if kind != "concept" else {}
            tests, learner_tests = _tests(tables)
            entry = Entry(
                number=number,
                kind=kind,
                title=raw["title"],
                path=raw["path"],
                outcome=raw["outcome"],
                solution=raw.get("solution"),
                tests=tests,
                learner_tests=learner_tests,
            )
        except KeyError as exc:
            raise ManifestError(f"{where}: missing key {exc}") from None
        if entry.number in numbers:
            raise ManifestError(f"{where}: number {entry.number} appears twice")
        names = [t.name for t in tests] + [t.name for t in learner_tests]
        if len(set(names)) != len(names):
            raise ManifestError(f"{where}: a test name appears twice")
        for spec in learner_tests:
            if not spec.name.startswith("test_"):
                raise ManifestError(f"{where}: learner test {spec.name!r} must start with test_")
            if spec.gate not in spec.catches:
                raise ManifestError(f"{where}: {spec.name}'s gate {spec.gate!r} is not in catches")
        numbers.add(entry.number)
        entries.append(entry)
    return Manifest(root=path.parent, entries=tuple(entries))
