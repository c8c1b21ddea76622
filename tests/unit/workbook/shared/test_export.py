"""The export path: `python -m workbook export` and `workbook.load`, including every error."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import NotebookFactory
from workbook import ExportError, export_source, load
from workbook.shared.export import (
    MAX_FILE_BYTES,
    MAX_GRADED_BYTES,
    exported_sections,
    read_notebook,
    run_exported,
)
from workbook.shared.modules import registered


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


# ───────────────────────────────────────────── reading notebooks the way Jupyter does


def cells_of(*cells: tuple[str, str]) -> list[dict[str, object]]:
    return [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {"tags": [tag] if tag else []},
            "outputs": [],
            "source": source,
        }
        for tag, source in cells
    ]


def write_nb(path: Path, cells: list[dict[str, object]], *, bom: bool = False) -> Path:
    text = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode())
    return path


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    nb = write_nb(tmp_path / "bom.ipynb", cells_of(("answer", "NAME = 'Zoë'")), bom=True)
    assert load(nb).NAME == "Zoë"
    assert export_cli(str(nb)).returncode == 0


def nbformat3(text: str) -> str:
    """A v4 notebook's text written as nbformat 3, by nbformat's own downgrade."""
    import nbformat

    node = nbformat.reads(text, as_version=4)  # type: ignore[no-untyped-call]
    return str(nbformat.writes(nbformat.convert(node, 3), version=3))  # type: ignore[no-untyped-call]


def test_nbformat_3_is_upgraded_by_nbformat(tmp_path: Path) -> None:
    """A v3 notebook (worksheets, ``input``, tags in the metadata), written by nbformat's own
    downgrade, grades as its v4 twin."""
    cells = cells_of(("setup", "import math"), ("", "print('no')"), ("answer", "R = 2"))
    for number, cell in enumerate(cells):
        cell["id"] = f"c{number}"
    new = write_nb(tmp_path / "new.ipynb", cells)
    v3_text = nbformat3(new.read_text(encoding="utf-8"))
    assert '"worksheets"' in v3_text and '"input"' in v3_text
    old = tmp_path / "old.ipynb"
    old.write_text(v3_text, encoding="utf-8")
    assert load(old).R == 2
    assert export_source(old).split("\n", 1)[1] == export_source(new).split("\n", 1)[1]


def test_future_import_in_a_cell_applies_to_that_cell_alone(tmp_path: Path) -> None:
    """As in the kernel: cell 2's ``from __future__ import annotations`` makes its forward
    references fine; cell 3 has none, so its annotations are evaluated (and fail) at once.
    The exported text is still one importable module, line numbers unchanged."""
    nb = write_nb(
        tmp_path / "future.ipynb",
        cells_of(
            ("setup", "import dataclasses"),
            (
                "answer",
                '"""Rows."""\nfrom __future__ import annotations\n\n'
                "@dataclasses.dataclass\nclass Row:\n    next: Row | None = None",
            ),
            ("answer", "def later(x: Missing) -> None:\n    pass"),
        ),
    )
    with pytest.raises(ExportError, match=r"cell 3 \(answer.*raised NameError"):
        load(nb)
    text = export_source(nb)
    sections = exported_sections(text)
    assert len(sections) == 3
    for section in sections:
        assert len(section.split("\n")) <= len(text.split("\n"))
    module = types.ModuleType("graded_future")
    with registered(module), pytest.raises(NameError, match="Missing"):
        run_exported(module, text, "submission.py")
    assert module.Row().next is None  # cells 1 and 2 ran, each on its own terms
    whole: dict[str, object] = {}
    exec(compile(text, "exported.py", "exec"), whole)
    assert "later" in whole
    assert export_cli(str(nb)).stdout == text


def test_a_marker_inside_a_cell_does_not_split_it(tmp_path: Path) -> None:
    """A learner's own ``# %% cell`` comment stays in their cell: markers carry line counts."""
    body = "X = (1,\n# %% cell 9 [answer], 1 line\n2)\n"
    nb = write_nb(tmp_path / "m.ipynb", cells_of(("answer", body), ("answer", "Y = X")))
    module = types.ModuleType("graded")
    run_exported(module, export_source(nb), "submission.py")
    assert module.Y == (1, 2)


def test_hand_written_text_runs_whole(tmp_path: Path) -> None:
    module = types.ModuleType("graded")
    run_exported(module, "# %% cell 2 [answer]\nA = 1\n# %% cell 3 [answer]\nB = A + 1\n", "s.py")
    assert module.B == 2


def test_large_outputs_do_not_count_against_the_limit(tmp_path: Path) -> None:
    """A demo cell's stored outputs may fill a notebook; only the graded cells are limited."""
    cells = cells_of(("setup", "import math"), ("", "print('x')"), ("answer", "N = 3"))
    cells[1]["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": "x" * (MAX_GRADED_BYTES + 2**20)}
    ]
    nb = write_nb(tmp_path / "big_outputs.ipynb", cells)
    assert nb.stat().st_size > MAX_GRADED_BYTES
    assert load(nb).N == 3


def test_graded_cells_over_the_limit_are_refused(tmp_path: Path) -> None:
    filler = "# " + "x" * (MAX_GRADED_BYTES // 2)
    nb = write_nb(tmp_path / "huge.ipynb", cells_of(("setup", filler), ("answer", filler)))
    with pytest.raises(ExportError, match="hold more than 16 MiB of code"):
        export_source(nb)


def test_a_file_over_64_mib_is_refused_unread(tmp_path: Path) -> None:
    nb = tmp_path / "sparse.ipynb"
    with nb.open("wb") as handle:  # sparse: no 64 MiB written, and nothing read back
        handle.truncate(MAX_FILE_BYTES + 1)
    with pytest.raises(ExportError, match="too large to be a notebook"):
        read_notebook(nb)


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    """A symlink (to a real notebook), a FIFO (would block a reader forever), a folder and,
    where this user may make one, a device node (would be read without end) are refused by
    their type, each in one line."""
    real = write_nb(tmp_path / "real.ipynb", cells_of(("answer", "X = 1")))
    link = tmp_path / "03_link.ipynb"
    link.symlink_to(real)
    fifo = tmp_path / "03_fifo.ipynb"
    os.mkfifo(fifo)
    folder = tmp_path / "03_folder.ipynb"
    folder.mkdir()
    expected = {link: "a symlink", fifo: "a FIFO", folder: "a folder"}
    device = tmp_path / "03_device.ipynb"
    try:
        os.mknod(device, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        expected[device] = "a device"
    except PermissionError:
        pass
    for path, kind in expected.items():
        with pytest.raises(ExportError, match=f"not a notebook file: it is {kind}"):
            load(path)
        result = export_cli(str(path))
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[" * 100_000, "not a notebook"),
        ('{"cells": [], "n": ' + "1" * 5000 + "}", "not a notebook"),
        ('{"cells": [{"cell_type": "code", "metadata": [], "source": 5}]}', "no cell tagged"),
    ],
    ids=["deep nesting", "huge number", "odd cell fields"],
)
def test_hostile_json_is_one_clear_error(tmp_path: Path, text: str, words: str) -> None:
    nb = tmp_path / "hostile.ipynb"
    nb.write_text(text, encoding="utf-8")
    with pytest.raises(ExportError, match=words):
        export_source(nb)


def test_an_odd_file_name_stays_in_the_header_comment(tmp_path: Path) -> None:
    """A line break (or a byte that is not UTF-8) in the notebook's name cannot start code."""
    for name in ("03_x\nRAISED = 1\n.ipynb", "03_caf\udce9.ipynb"):
        nb = write_nb(tmp_path / name, cells_of(("answer", "X = 1")))
        text = export_source(nb)
        assert text.splitlines()[0].startswith("# Exported from '03_")
        text.encode("utf-8")  # writable as the grader writes it
        module = types.ModuleType("odd_name")
        run_exported(module, text, "submission.py")
        assert module.X == 1 and not hasattr(module, "RAISED")
        assert [s.strip() for s in exported_sections(text)] == ["X = 1"]
