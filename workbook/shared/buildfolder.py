"""A graded build's folder, found by number: ``builds/buildNN/`` (see `builds`).

The one place that turns "03" into a module or a path of that folder: the self-check cells,
`make progress`, the learner-test steps and the grader all ask here. Asking twice returns the
same module (Python keeps it imported).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from workbook.shared.manifest import repo_root

if TYPE_CHECKING:
    from workbook.checks import Checks


def folder(build: str, root: Path | None = None) -> Path:
    """``builds/buildNN`` of `root` (default: this repository or learner copy)."""
    return (root or repo_root()) / "builds" / f"build{build}"


def visible(build: str, module: str) -> ModuleType:
    """``builds.buildNN.visible.<module>`` (``answer_checks`` or ``written_tests``)."""
    return importlib.import_module(f"builds.build{build}.visible.{module}")


def answer_checks(build: str) -> Checks:
    """The visible checks of `build`'s answers: what its self-check cells run."""
    checks: Checks = visible(build, "answer_checks").CHECKS
    return checks


def has_answer_checks(build: str) -> bool:
    return (folder(build) / "visible" / "answer_checks.py").exists()


def written_tests(build: str) -> ModuleType:
    """`build`'s test-writing steps (``LEARNER_TESTS``, ``LAID_OVER``, ``CONTRACT_VARIANTS``)."""
    return visible(build, "written_tests")


def has_written_tests(build: str) -> bool:
    """Whether `build` asks the learner to write tests."""
    return (folder(build) / "visible" / "written_tests.py").exists()


def hidden(build: str, root: Path | None = None) -> Path:
    """``builds/buildNN/hidden``: the hidden suite (instructor only)."""
    return folder(build, root) / "hidden"


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        # A link is never followed: one in visible/ could point into hidden/.
        if p.is_file()
        and not p.is_symlink()
        and "__pycache__" not in p.parts
        and ".ipynb_checkpoints" not in p.parts
    )


def shipped(root: Path) -> list[Path]:
    """The files of ``root/builds`` that ship to learners and that the walls bind: the
    packages' ``__init__.py``, each build's ``build.toml`` and its ``visible/`` folder."""
    builds = root / "builds"
    found = [p for p in (builds / "__init__.py",) if p.exists()]
    for build in sorted(builds.glob("build*/")):
        found += [p for p in (build / "__init__.py", build / "build.toml") if p.exists()]
        found += _files(build / "visible")
    return found


def secret(root: Path) -> list[Path]:
    """Every other file of ``root/builds``: the hidden suites, their references and pytest
    plugin, the threat model. Never shipped, never bound into the walls."""
    keep = set(shipped(root))
    return [p for p in _files(root / "builds") if p not in keep]


def hidden_folders(root: Path) -> list[Path]:
    """Each build's ``hidden/`` folder under `root`."""
    return sorted(p for p in (root / "builds").glob("build*/hidden") if p.is_dir())
