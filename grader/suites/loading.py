"""Hidden suites on disk: ``builds/buildNN/hidden/`` holds ``probes.py`` (run in the child),
the judges (run here: pytest modules ``test_*.py``, one test ``test_<name>(observed)`` per
graded test) and ``mutants.toml`` (known bugs, as edits of the
solution's export).

None of it ships to learners. The fork server runs ``probes.py`` from its text, under a name of
its own (`module_name`), so a learner's code cannot import it by name; the judges are modules
of a package (``builds.buildNN.hidden``, each folder with an ``__init__.py``), so that they
import their probes' inputs by name, mypy checks them with the packages, and pytest collects
them (``pytest builds/buildNN/hidden --submission PATH``). A suite folder that is no package
(a test's own, written to a temporary folder) is loaded by path instead. Loading a suite twice
returns the same objects.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.suites.judging import Judges, judges_of
from grader.suites.observe import Probes
from workbook.shared.errors import WorkbookError
from workbook.shared.manifest import repo_root
from workbook.shared.modules import import_path

#: The folder of the build folders (``builds/buildNN/hidden`` is build NN's suite).
BUILDS = repo_root() / "builds"


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
class Equivalent:
    """A generic mutant (`grader.proofs.suitemutants`) recorded as behaving exactly like the
    solution under the spec: its stable id, its diff (for the reader: the id is a digest of it and
    the operator), and why no graded test can tell it apart. An unrelated edit of the solution keeps
    the id; an edit of the mutated line retires it, and the mutant is judged again."""

    id: str
    diff: str
    why: str


@dataclass(frozen=True)
class Suite:
    build: str
    folder: Path
    probes_path: Path
    probes: Probes
    judges: Judges
    mutants: tuple[Mutant, ...]
    equivalents: tuple[Equivalent, ...] = ()


def suite_dir(build: str, builds: Path | None = None) -> Path:
    """``<builds>/buildNN/hidden``: build `build`'s hidden suite (`builds`: default `BUILDS`)."""
    return (builds or BUILDS) / f"build{build}" / "hidden"


def judge_files(folder: Path) -> list[Path]:
    """A suite's judges modules: its ``test_*.py``, in name order (what pytest collects)."""
    return sorted(folder.glob("test_*.py"))


def has_suite(build: str, builds: Path | None = None) -> bool:
    return (suite_dir(build, builds) / "probes.py").exists()


def module_name(path: Path) -> str:
    """A name per file (the folder, plus a digest of the full path), so that two copies of
    a suite, say the repo's and a test's, never share a module."""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    return f"_hidden_{path.stem}_{path.parent.name}_{digest}"


def import_suite_file(path: Path) -> ModuleType:
    """The suite's module at `path` (its judges, or its probes as the parent reads them):
    imported as a submodule of its package when its folder is one (``builds/build03/hidden/
    test_sink.py`` is ``builds.build03.hidden.test_sink``; the parent packages are imported
    from their own ``__init__.py`` first, wherever the working directory is), else by path.
    Raises `SuiteError` when a package of that name was imported from another folder."""
    parts = [path.stem]
    top = path.parent
    while (top / "__init__.py").exists():
        parts.insert(0, top.name)
        top = top.parent
    if len(parts) == 1:
        return import_path(path, module_name(path))
    for depth in range(1, len(parts)):
        package = ".".join(parts[:depth])
        folder = top.joinpath(*parts[:depth])
        known = sys.modules.get(package)
        if known is None:
            import_path(folder / "__init__.py", package)
        elif folder.resolve() not in [Path(p).resolve() for p in getattr(known, "__path__", [])]:
            raise SuiteError(f"{path}: the package {package} is already imported from elsewhere")
    return importlib.import_module(".".join(parts))


@cache
def load_suite(build: str, builds: Path | None = None) -> Suite:
    """Build `build`'s suite from `builds` (default: the repo's ``builds/``)."""
    folder = suite_dir(build, builds)
    if not has_suite(build, builds):
        raise SuiteError(f"no hidden suite for build {build} (expected {folder}/probes.py)")
    try:
        probes = import_suite_file(folder / "probes.py").PROBES
        judges = judges_of(*(import_suite_file(path) for path in judge_files(folder)))
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
        equivalents=load_equivalents(folder / "mutants.toml"),
    )


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{path}: not valid TOML: {exc}") from None


def load_equivalents(path: Path) -> tuple[Equivalent, ...]:
    """The ``[[equivalent]]`` tables of `path` (``id``, ``diff``, ``why``). A reason that is
    blank, or an id recorded twice, is refused: an unexplained survivor is not equivalent."""
    found = []
    for i, raw in enumerate(_read_toml(path).get("equivalent", []), start=1):
        try:
            item = Equivalent(str(raw["id"]), str(raw["diff"]).strip("\n"), str(raw["why"]))
        except (KeyError, TypeError) as exc:
            raise SuiteError(f"{path}: equivalent #{i}: missing {exc}") from None
        if not item.why.strip():
            raise SuiteError(f"{path}: equivalent {item.id}: no reason given")
        found.append(item)
    if len({e.id for e in found}) != len(found):
        raise SuiteError(f"{path}: an equivalent id appears twice")
    return tuple(found)


def load_mutants(path: Path) -> tuple[Mutant, ...]:
    data = _read_toml(path)
    if not data:
        return ()
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
