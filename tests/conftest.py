"""Shared fixtures: the repo root, and a factory for small notebooks written to a temp dir.

Also the two options of the hidden suites (``tests/hidden``, see its ``conftest.py``):
``--submission PATH`` grades a notebook (or the build's notebook in a folder) and ``--mutant
NAME`` the solution with that known bug. Without either, ``tests/hidden`` is not collected:
the unit run never grades anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = ROOT / "tests" / "hidden"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hidden suites", "grading one submission with tests/hidden")
    group.addoption(
        "--submission",
        metavar="PATH",
        help="grade this notebook (or the build's notebook in this folder) with tests/hidden",
    )
    group.addoption(
        "--mutant", metavar="NAME", help="grade the solution with this known bug (mutants.toml)"
    )


def grading(config: pytest.Config) -> bool:
    return bool(config.getoption("submission") or config.getoption("mutant"))


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("submission") and config.getoption("mutant"):
        raise pytest.UsageError("give --submission or --mutant, not both")
    if not grading(config) and config.args:
        inside = [Path(a.split("::")[0]).resolve().is_relative_to(HIDDEN) for a in config.args]
        if all(inside):
            raise pytest.UsageError(
                "tests/hidden grades one submission: add --submission PATH (a notebook, or a"
                " folder holding the build's notebook) or --mutant NAME"
            )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave the hidden suites out unless a submission or a mutant is to be graded."""
    if not grading(config) and collection_path.resolve().is_relative_to(HIDDEN):
        return True
    return None


@pytest.fixture
def root() -> Path:
    return ROOT


NotebookFactory = Callable[..., Path]


@pytest.fixture
def make_notebook(tmp_path: Path) -> NotebookFactory:
    """Write a notebook whose cells are ``(tags, source)`` pairs (``"md"`` for markdown)."""

    def make(*cells: tuple[str | list[str], str], name: str = "nb.ipynb") -> Path:
        out = []
        for tags, source in cells:
            if tags == "md":
                out.append({"cell_type": "markdown", "metadata": {}, "source": source})
                continue
            tag_list = [tags] if isinstance(tags, str) and tags else list(tags or [])
            out.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": {"tags": tag_list},
                    "outputs": [],
                    "source": source,
                }
            )
        path = tmp_path / name
        path.write_text(
            json.dumps({"cells": out, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
        )
        return path

    return make
