"""The notebooks as files: stored as this venv's JupyterLab saves them (so opening one changes
nothing; the browser suite proves the round trip itself), and each ending with a relative link
to the next notebook of the arc."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path, PurePosixPath
from types import ModuleType

import pytest

from tests.conftest import ROOT
from workbook.shared.manifest import load_manifest


def _normaliser() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "normalize_notebooks", ROOT / "scripts" / "normalize_notebooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


normalize = _normaliser()
NOTEBOOKS = [p.relative_to(ROOT).as_posix() for p in normalize.arc_notebooks(ROOT)]


def test_what_jupyterlab_would_change_is_changed_once(tmp_path: Path) -> None:
    cell = {
        "cell_type": "code",
        "execution_count": 1,
        "id": "c1",
        "metadata": {"execution": {"iopub.status.busy": "2026-01-01T00:00:00Z"}, "tags": ["x"]},
        "outputs": [],
        "source": "x = 1\ny = 2",
    }
    widget = {"value": 5.0, "step": 0.5, "min": -0.0, "max": 1e22, "count": 3}
    notebook = {
        "cells": [cell],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}, "w": widget},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    once = normalize.normalized(json.dumps(notebook))
    assert normalize.normalized(once) == once
    stored = json.loads(once)
    assert stored["cells"][0]["metadata"] == {"tags": ["x"]}
    assert stored["cells"][0]["source"] == ["x = 1\n", "y = 2"]
    # As a browser's JSON gives numbers back: whole floats become ints, unless huge.
    assert stored["metadata"]["w"] == {"value": 5, "step": 0.5, "min": 0, "max": 1e22, "count": 3}
    assert '"value": 5\n' in once
    assert stored["metadata"]["kernelspec"] == normalize.kernel_metadata()["kernelspec"]
    info = stored["metadata"]["language_info"]
    assert info["version"] == ".".join(map(str, sys.version_info[:3]))
    assert once.endswith("}\n") and once.startswith('{\n "cells": [\n  {\n')


def test_check_mode_changes_nothing_and_says_what_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "stale.ipynb"
    text = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    stale.write_text(text, encoding="utf-8")
    assert normalize.main(["--check", str(stale)]) == 1
    assert stale.read_text(encoding="utf-8") == text
    assert "not stored as JupyterLab saves it" in capsys.readouterr().out
    assert normalize.main([str(stale)]) == 0
    assert normalize.main(["--check", str(stale)]) == 0


@pytest.mark.parametrize("relative", NOTEBOOKS)
def test_stored_as_jupyterlab_saves_it(relative: str) -> None:
    text = (ROOT / relative).read_text(encoding="utf-8")
    assert normalize.normalized(text) == text, (
        f"{relative} would change when opened and saved in JupyterLab;"
        " fix: .venv/bin/python scripts/normalize_notebooks.py"
    )


LINK = re.compile(r"\[[^\]]+\]\((?P<target>[^)\s]+\.ipynb)\)")


def next_in_arc(relative: str) -> str | None:
    """The next notebook of `workbook.toml` as seen from `relative`'s folder (a solution's next
    build is that build's solution)."""
    entries = load_manifest(ROOT / "workbook.toml").entries
    for i, entry in enumerate(entries):
        if relative in (entry.path, entry.solution):
            if i + 1 == len(entries):
                return None
            following = entries[i + 1]
            if relative == entry.solution and following.solution:
                return following.solution
            return following.path
    raise AssertionError(f"{relative} is not in workbook.toml")


def resolved(folder: PurePosixPath, link: str) -> str:
    parts = list(folder.parts)
    for part in PurePosixPath(link).parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


@pytest.mark.parametrize("relative", NOTEBOOKS)
def test_ends_with_a_link_to_the_next_notebook(relative: str) -> None:
    target = next_in_arc(relative)
    if target is None:
        pytest.skip(f"{relative} is the last notebook of the arc")
    last = json.loads((ROOT / relative).read_text(encoding="utf-8"))["cells"][-1]
    source = "".join(last["source"])
    links = [m["target"] for m in LINK.finditer(source)] if last["cell_type"] == "markdown" else []
    folder = PurePosixPath(relative).parent
    assert target in [resolved(folder, link) for link in links], (
        f"the last cell of {relative} should be markdown with a relative link to {target}"
        f" (found: {links or 'none'})"
    )
