"""The export path: `python -m workbook export` and `workbook.load`, including every error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NotebookFactory
from workbook import ExportError, export_source, load


def export_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbook", "export", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_exports_setup_and_answer_cells_in_order(make_notebook: NotebookFactory) -> None:
    """Untagged and markdown cells are left out; the rest keep notebook order."""
    nb = make_notebook(
        ("md", "# Title"),
        ("setup", "import math"),
        ("", "print('self-check, never exported')"),
        ("answer", "def area(r):\n    return math.pi * r * r"),
        (["answer", "other"], "TWO = 2"),
    )
    source = export_source(nb)
    assert "self-check" not in source
    assert source.index("import math") < source.index("def area") < source.index("TWO = 2")
    assert "# %% cell 2 [setup]" in source and "# %% cell 4 [answer]" in source
    namespace: dict[str, object] = {}
    exec(compile(source, "exported", "exec"), namespace)
    assert namespace["TWO"] == 2


def test_cli_writes_stdout_or_file(make_notebook: NotebookFactory, tmp_path: Path) -> None:
    nb = make_notebook(("answer", "X = 1"))
    shown = export_cli(str(nb))
    assert shown.returncode == 0 and "X = 1" in shown.stdout
    out = tmp_path / "answers.py"
    written = export_cli(str(nb), "-o", str(out))
    assert written.returncode == 0 and written.stdout == ""
    assert out.read_text() == shown.stdout


def test_load_gives_a_fresh_module_each_time(make_notebook: NotebookFactory) -> None:
    """Two loads are two modules; neither stays in sys.modules."""
    nb = make_notebook(("answer", "STATE = []\ndef add(x):\n    STATE.append(x)"))
    first, second = load(nb), load(nb)
    first.add(1)
    assert first.STATE == [1] and second.STATE == []
    assert first.__name__ not in sys.modules and first is not second


def test_load_supports_dataclasses_and_future_annotations(make_notebook: NotebookFactory) -> None:
    nb = make_notebook(
        ("setup", "from __future__ import annotations\nfrom dataclasses import dataclass"),
        ("answer", "@dataclass(frozen=True)\nclass Row:\n    name: str\n    alt: float"),
    )
    assert load(nb).Row("ISS", 420.0).name == "ISS"


def broken_notebooks(make_notebook: NotebookFactory, tmp_path: Path) -> dict[str, Path]:
    not_json = tmp_path / "broken.ipynb"
    not_json.write_text('{"cells": [')
    return {
        "not valid JSON": not_json,
        "no cell tagged 'answer'": make_notebook(("setup", "X = 1"), name="none.ipynb"),
        "SyntaxError": make_notebook(
            ("setup", "import os"), ("answer", "def f(:\n    pass"), name="syntax.ipynb"
        ),
    }


@pytest.mark.parametrize("problem", ["not valid JSON", "no cell tagged 'answer'", "SyntaxError"])
def test_cli_error_is_one_line_and_exit_2(
    problem: str, make_notebook: NotebookFactory, tmp_path: Path
) -> None:
    """A bad notebook: one line on stderr naming it (and the cell), exit code 2."""
    nb = broken_notebooks(make_notebook, tmp_path)[problem]
    result = export_cli(str(nb))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(nb) in lines[0] and problem.split()[-1].strip("'") in lines[0]


def test_syntax_error_names_the_cell(make_notebook: NotebookFactory, tmp_path: Path) -> None:
    nb = broken_notebooks(make_notebook, tmp_path)["SyntaxError"]
    with pytest.raises(ExportError, match=r"cell 2 \(answer, starts 'def f\(:'\).*line 1"):
        load(nb)


@pytest.mark.parametrize("problem", ["not valid JSON", "no cell tagged 'answer'", "SyntaxError"])
def test_load_raises_the_same_message(
    problem: str, make_notebook: NotebookFactory, tmp_path: Path
) -> None:
    nb = broken_notebooks(make_notebook, tmp_path)[problem]
    with pytest.raises(ExportError) as raised:
        load(nb)
    assert str(raised.value) == export_cli(str(nb)).stderr.strip()


def test_answer_cell_that_raises_at_import(make_notebook: NotebookFactory) -> None:
    """Export succeeds (it only compiles); load names the cell and keeps the cause."""
    nb = make_notebook(("setup", "X = 1"), ("answer", "Y = X / 0"))
    assert "Y = X / 0" in export_source(nb)
    with pytest.raises(ExportError, match=r"cell 2 \(answer.*raised ZeroDivisionError") as raised:
        load(nb)
    assert isinstance(raised.value.__cause__, ZeroDivisionError)


def test_missing_notebook(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no such notebook"):
        load(tmp_path / "absent.ipynb")


def test_json_that_is_not_a_notebook(tmp_path: Path) -> None:
    path = tmp_path / "list.ipynb"
    path.write_text("[1, 2]")
    with pytest.raises(ExportError, match="no list of cells"):
        export_source(path)
