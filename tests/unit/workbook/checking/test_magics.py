"""IPython lines in graded cells: run as the kernel would, untimed, or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbook.checking.magics import as_python
from workbook.shared.export import export_source
from workbook.shared.modules import execute, fresh_module


def _run(text: str) -> dict[str, object]:
    module = fresh_module("magic_cell")
    execute(module, text, "<cell>")
    return module.__dict__


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("%time x = sum(range(4))\n", {"x": 6}),
        # %timeit runs its statement in a function of its own: nothing of it stays.
        ("%timeit -n 10 -r 1 x = 2 ** 3\nx = 1\n", {"x": 1}),
        ("%%timeit\nx = 2\n", {"x": None}),
        ("%%time\nx = 1\ny = x + 1\n", {"x": 1, "y": 2}),
        ("%%capture out\nx = 5\n", {"x": 5}),
        ("%matplotlib inline\nx = 3\n", {"x": 3}),
        ("!pip install tenacity\nx = 4\n", {"x": 4}),
        ("files = !ls\nx = 7\n", {"x": 7}),
        ("def f():\n    %time return 1\n\nx = f()\n", {"x": 1}),
    ],
)
def test_an_ipython_line_runs_as_the_kernel_would_untimed(
    cell: str, expected: dict[str, object]
) -> None:
    text = as_python(cell)
    assert text is not None, f"as_python({cell!r}) gave None"
    assert text.count("\n") == cell.count("\n"), "every line keeps its number"
    namespace = _run(text)
    assert {k: namespace.get(k) for k in expected} == expected


def test_another_cell_magic_runs_nothing() -> None:
    text = as_python("%%bash\necho hi\nrm -rf /\n")
    assert text is not None and _run(text).keys() <= {"__name__", "__doc__", "__builtins__"} | {
        "__package__",
        "__loader__",
        "__spec__",
    }


@pytest.mark.parametrize(
    "cell",
    [
        "x = 1\n",  # valid Python: nothing to do
        "def f(:\n    pass\n",  # a syntax error that is not IPython's
        "%time def f(:\n",  # IPython, but what it times is not Python either
        "total = (1\n    % 2\n    +)\n",  # a line that starts with % in a broken expression
        "x = (1,\n%time 2\n)\n",  # inside brackets: the kernel refuses it too
    ],
)
def test_no_rewrite_for_python_or_for_errors_of_its_own(cell: str) -> None:
    assert as_python(cell) is None


def test_the_export_and_so_the_grader_read_the_magic_line(tmp_path: Path) -> None:
    cells = [
        {
            "cell_type": "code",
            "metadata": {"tags": ["answer"]},
            "source": "%time x = 41 + 1\n",
            "outputs": [],
            "execution_count": None,
        },
    ]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    assert _run(export_source(path))["x"] == 42


def test_a_string_that_looks_like_a_magic_stays_as_written() -> None:
    cell = 'template = """\n%d launches\n!done\n"""\n%time x = 1\n'
    text = as_python(cell)
    assert text is not None
    namespace = _run(text)
    assert namespace["template"] == "\n%d launches\n!done\n" and namespace["x"] == 1


def test_the_self_check_runs_a_cell_once_whatever_it_raises(tmp_path: Path) -> None:
    """A SyntaxError raised while a cell runs (`eval`) is the cell's own: it is not taken for
    IPython syntax and run a second time, rewritten (the export would refuse that rewrite)."""
    import builtins

    from workbook.selfcheck import build_module, last_runs
    from workbook.shared.errors import WorkbookError
    from workbook.shared.export import exported_cells, read_notebook

    source = (
        'import builtins\nQUERY = """\n%d rows\n"""\nbuiltins._magic_runs.append(1)\neval("1 +")\n'
    )
    cells = [
        {
            "cell_type": "code",
            "metadata": {"tags": ["answer"]},
            "source": source,
            "outputs": [],
            "execution_count": None,
        },
    ]
    path = tmp_path / "n.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}),
        encoding="utf-8",
    )
    builtins._magic_runs = []  # type: ignore[attr-defined]
    try:
        stored = read_notebook(path)["cells"]
        with pytest.raises(WorkbookError, match="SyntaxError"):
            build_module(path, last_runs(exported_cells(path), stored, []), stored)
        assert builtins._magic_runs == [1]  # type: ignore[attr-defined]
    finally:
        del builtins._magic_runs  # type: ignore[attr-defined]
