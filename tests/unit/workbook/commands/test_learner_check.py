"""The learner's `make check`: a verdict line per build, then their notebooks run, one exit code.

Each test lays out a small repository (the manifest and a build notebook) in a temp folder and runs
`workbook.commands.learner_check` on it in this process; notebooks run in real kernels, as `make
check` runs them, and a failing cell is named as JupyterLab shows it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, NotebookFactory
from workbook.commands import learner_check as verify
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import Manifest, copy_manifest, load_manifest

NOTEBOOK = "03_build_retry_and_sink.ipynb"


def repo(tmp_path: Path, edit: str | None = None) -> Manifest:
    """A repository holding build 03 only, solved (with `edit` applied to its answers:
    ``"ValueError"`` raises ValueError where ParseError is due)."""
    copy_manifest(ROOT, tmp_path)
    nb = read_notebook(ROOT / "solutions" / NOTEBOOK)
    for cell in nb["cells"]:
        if edit and "answer" in cell_tags(cell):
            cell["source"] = cell_source(cell).replace("raise ParseError(", f"raise {edit}(")
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / NOTEBOOK).write_text(json.dumps(nb), encoding="utf-8")
    return load_manifest(tmp_path / "workbook.toml")


def run(path: Path) -> verify.NotebookRun:
    return asyncio.run(verify.run_notebook(path))


def test_a_failing_cell_is_named_by_its_step_and_position(
    make_notebook: NotebookFactory,
) -> None:
    path = make_notebook(
        ("md", "# Build 99\n\n## Step 1: `double`"),
        ("", "x = 2"),
        (["raises-exception"], "raise KeyError('allowed: tagged raises-exception')"),
        ("", "from workbook.checks import demo\nwith demo('twice x'):\n    x + 'a'"),
        ("", "print('never reached')"),
    )
    done = run(path)
    assert done.problem.startswith(
        "the code cell under 'Step 1' that starts `from workbook.checks import demo` (cell 4)"
        " raised called:   this demo, on what your answers returned"
    ), done.problem
    assert "expected: twice x" in done.problem
    clean = make_notebook(("md", "## Step 1"), ("", "y = 1"), name="clean.ipynb")
    assert run(clean).problem == ""


def test_a_cell_that_never_ends_is_stopped(
    make_notebook: NotebookFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verify, "CELL_SECONDS", 1)
    path = make_notebook(("md", "## Step 2: loop"), ("", "while True:\n    pass"))
    assert run(path).problem == (
        "the code cell under 'Step 2' that starts `while True:` (cell 2) was still running"
        " after 1 s: a loop that never ends?"
    )


@pytest.mark.slow
def test_a_finished_build_passes_and_says_what_it_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = repo(tmp_path)
    assert verify.learner_check(manifest=manifest) == 0
    out = capsys.readouterr().out
    assert "Read from the saved notebooks in exercises/" in out
    assert "\n03  done\n" in out
    assert f"✓ exercises/{NOTEBOOK} runs to the end" in out
    assert out.rstrip().endswith("make check passed: every build is done.")
    assert verify.learner_check(["05"], manifest=manifest) == 2
    assert "BUILD=05: no build 05 here; the builds are 03." in capsys.readouterr().out


@pytest.mark.slow
def test_a_failing_build_names_its_first_failing_check_and_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = repo(tmp_path, "ValueError")
    assert verify.learner_check(["03"], manifest=manifest) == 1
    out = capsys.readouterr().out
    assert "\n03  failing: content_key_is_stable_and_distinguishes_rows\n" in out
    assert "expected: raises ParseError" in out
    assert (
        f"✗ exercises/{NOTEBOOK}: the code cell under 'Step 2' that starts `def key_or_default"
    ) in out
    assert "Not done yet: 03 failing: content_key_is_stable_and_distinguishes_rows." in out
    assert "Traceback" not in out
