"""Naming cells as the learner sees them, and the helpers an answer leans on in untagged cells."""

from __future__ import annotations

from tests.conftest import ROOT
from workbook.checking.notebook_cells import cell_name, step_heading, untagged_helpers
from workbook.shared.export import cell_source, cell_tags, read_notebook

NOTEBOOK = "03_build_retry_and_sink.ipynb"


def test_cells_are_named_as_the_learner_sees_them() -> None:
    cells = read_notebook(ROOT / "exercises" / NOTEBOOK)["cells"]
    names = {i: cell_name(cells, i) for i, c in enumerate(cells, 1) if c["cell_type"] == "code"}
    sink = next(i for i, c in enumerate(cells, 1) if "class IdempotentSink" in cell_source(c))
    assert names[sink] == "the answer cell under 'Step 3'"
    setup = next(i for i, c in enumerate(cells, 1) if "setup" in cell_tags(c))
    assert names[setup] == "the setup cell"
    demo = next(i for i, c in enumerate(cells, 1) if "class FailsOnce" in cell_source(c))
    assert names[demo] == (
        f"the code cell under 'Step 3' that starts `class FailsOnce(MemorySink):` (cell {demo})"
    )
    assert step_heading(cells, sink) == "Step 3"
    assert step_heading(cells, 1) is None


def test_untagged_helpers_are_named_and_imports_too() -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "## Step 1: key"},
        {"cell_type": "code", "metadata": {}, "source": "from etl import ParseError\n"},
        {"cell_type": "code", "metadata": {}, "source": "def helper(x):\n    return x\n"},
        {
            "cell_type": "code",
            "metadata": {"tags": ["answer"]},
            "source": "def key(x):\n    if not x:\n        raise ParseError('no')\n"
            "    return helper(len(x))\n",
        },
    ]
    lines = untagged_helpers(cells, [cell_source(cells[3])], {"helper": 1, "unsaved": 2})
    assert lines == [
        "`ParseError` is imported only in an untagged cell, the code cell under 'Step 1' that"
        " starts `from etl import ParseError` (cell 2): import it in your answer cell too",
        "`helper` is defined in an untagged cell, the code cell under 'Step 1' that starts"
        " `def helper(x):` (cell 3): tag it `answer`",
    ]
    tagged_too = [cell_source(c) for c in cells[1:]]
    assert untagged_helpers(cells, tagged_too) == []
    # A name only this kernel holds (a cell since deleted, or not saved): said so.
    unsaved = untagged_helpers(cells, ["def f():\n    return unsaved()\n"], {"unsaved": 1})
    assert unsaved and "in no setup or answer cell of the saved notebook" in unsaved[0]


def test_a_cell_above_every_heading_is_named_by_its_first_line() -> None:
    long_line = "x = " + "1 + " * 20 + "1"
    cells = [
        {"cell_type": "code", "metadata": {}, "source": "\n\nimport json\n"},
        {"cell_type": "code", "metadata": {}, "source": long_line},
        {"cell_type": "code", "metadata": {}, "source": ""},
    ]
    assert step_heading(cells, 1) is None
    assert cell_name(cells, 1) == "the code cell that starts `import json` (cell 1)"
    assert cell_name(cells, 2) == f"the code cell that starts `{long_line[:37]}...` (cell 2)"
    assert cell_name(cells, 3) == "the code cell (cell 3)"


def test_two_answer_cells_under_one_heading_are_told_apart_by_their_first_line() -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "## Step 2: `content_key`"},
        {"cell_type": "code", "metadata": {"tags": ["answer"]}, "source": "def a():\n    pass"},
        {"cell_type": "code", "metadata": {"tags": ["answer"]}, "source": "def b():\n    pass"},
        {"cell_type": "markdown", "metadata": {}, "source": "## Step 3"},
        {"cell_type": "code", "metadata": {"tags": ["answer"]}, "source": "def c():\n    pass"},
    ]
    assert step_heading(cells, 2) == "Step 2"
    assert cell_name(cells, 3) == (
        "the answer code cell under 'Step 2' that starts `def b():` (cell 3)"
    )
    assert cell_name(cells, 5) == "the answer cell under 'Step 3'"


def test_a_source_that_does_not_parse_names_no_helper() -> None:
    cells = [{"cell_type": "code", "metadata": {}, "source": "def helper(:\n"}]
    assert untagged_helpers(cells, ["def broken(:\n", "print(len('x'))\n"]) == []
