"""Shared fixtures: the repo root, and a factory for small notebooks written to a temp dir.

The hidden suites' options (``--submission``, ``--mutant``) live with them, in
``builds/conftest.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
