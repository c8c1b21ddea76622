"""Hidden suites on disk: ``tests/hidden/buildNN/`` holds ``probes.py`` (run in the child),
``judges.py`` (run here) and ``mutants.toml`` (known bugs, as edits of the solution's export).

None of it ships to learners, and none of it is a Python package: the files are loaded by path,
so pytest never collects them and a learner's code cannot import them by name. Loading a suite
twice returns the same objects.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from grader.judging import Judges
from grader.observe import Probes
from workbook.errors import WorkbookError
from workbook.manifest import repo_root
from workbook.modules import import_path

HIDDEN = repo_root() / "tests" / "hidden"


class SuiteError(WorkbookError):
    """A hidden suite is missing, malformed, or a mutant no longer applies."""


@dataclass(frozen=True)
class Edit:
    old: str
    new: str


@dataclass(frozen=True)
class Mutant:
    """A known bug: a name, the bug in one line, and exact edits of the exported solution."""

    name: str
    bug: str
    edits: tuple[Edit, ...]

    def apply(self, source: str) -> str:
        """The source with every edit made. Raises `SuiteError` unless each `old` occurs
        exactly once (a mutant that silently stops applying would 'survive' as a no-op)."""
        for i, edit in enumerate(self.edits, start=1):
            count = source.count(edit.old)
            if count != 1:
                where = "not found" if count == 0 else f"found {count} times"
                raise SuiteError(
                    f"mutant {self.name}, edit {i}: the text to replace is {where} in the"
                    f" solution's export:\n{edit.old}"
                )
            source = source.replace(edit.old, edit.new)
        return source


@dataclass(frozen=True)
class Suite:
    build: str
    folder: Path
    probes_path: Path
    probes: Probes
    judges: Judges
    mutants: tuple[Mutant, ...]


def suite_dir(build: str, hidden: Path | None = None) -> Path:
    return (hidden or HIDDEN) / f"build{build}"


def has_suite(build: str, hidden: Path | None = None) -> bool:
    return (suite_dir(build, hidden) / "probes.py").exists()


def module_name(path: Path) -> str:
    """A name per file (the folder, plus a digest of the full path), so that two copies of
    a suite, say the repo's and a test's, never share a module."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return f"_hidden_{path.stem}_{path.parent.name}_{digest}"


def load_probes(path: Path) -> ModuleType:
    """The probes module at `path` (what a suite's judges import for the shared inputs)."""
    return import_path(path, module_name(path))


@cache
def load_suite(build: str, hidden: Path | None = None) -> Suite:
    """Build `build`'s suite from `hidden` (default: the repo's ``tests/hidden``)."""
    folder = suite_dir(build, hidden)
    if not has_suite(build, hidden):
        raise SuiteError(f"no hidden suite for build {build} (expected {folder}/probes.py)")
    try:
        probes = load_probes(folder / "probes.py").PROBES
        judges = import_path(folder / "judges.py", module_name(folder / "judges.py")).JUDGES
    except SuiteError:
        raise
    except Exception as exc:
        raise SuiteError(
            f"{folder}: the suite does not import: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(probes, Probes) or not isinstance(judges, Judges):
        raise SuiteError(f"{folder}: PROBES or JUDGES is not a registry")
    return Suite(
        build=build,
        folder=folder,
        probes_path=folder / "probes.py",
        probes=probes,
        judges=judges,
        mutants=load_mutants(folder / "mutants.toml"),
    )


def load_mutants(path: Path) -> tuple[Mutant, ...]:
    if not path.exists():
        return ()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: not valid TOML: {exc}") from None
    mutants = []
    for i, raw in enumerate(data.get("mutant", []), start=1):
        try:
            edits = tuple(Edit(e["old"], e["new"]) for e in raw["edit"])
            mutants.append(Mutant(raw["name"], raw["bug"], edits))
        except (KeyError, TypeError) as exc:
            raise SuiteError(f"{path}: mutant #{i}: missing {exc}") from None
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise SuiteError(f"{path}: a mutant name appears twice")
    return tuple(mutants)
