"""The self-check in a real kernel, driven as JupyterLab drives one (cell ids in each request).

One verdict everywhere: on a saved, re-run notebook the self-check, `make progress` and the visible
checks agree; an edit the kernel ran but the file does not hold is checked and warned about; a
helper left in an untagged cell fails here as at grading, and is named; after a restart a self-check
cell runs on its own; a demo's error reads as feedback, not a traceback. The kernels are real
ipykernels started by `workbook.commands.learner_check.kernel_for`, as `make check` does.
"""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from workbook.commands import progress
from workbook.commands.learner_check import execute_cell, kernel_for
from workbook.selfcheck import checks_for, last_runs, redefined
from workbook.shared.export import Cell, cell_source, cell_tags, exported_cells, read_notebook
from workbook.shared.manifest import copy_manifest, load_manifest

NOTEBOOK = "03_build_retry_and_sink.ipynb"
SUMMARY = re.compile(r"^(\d+) of (\d+) checks? pass\.", re.MULTILINE)
Step = Callable[[str, str | None], Awaitable[str]]


def repo_with(tmp_path: Path, cells: list[dict[str, Any]]) -> Path:
    """A folder holding the manifest and exercises/03 with `cells`; the notebook's path."""
    copy_manifest(ROOT, tmp_path)
    nb = read_notebook(ROOT / "solutions" / NOTEBOOK)
    nb["cells"] = cells
    path = tmp_path / "exercises" / NOTEBOOK
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def solution_cells() -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = read_notebook(ROOT / "solutions" / NOTEBOOK)["cells"]
    return cells


def mutant(name: str) -> tuple[str, str]:
    """(old, new) of build 03's known bug `name` (one edit)."""
    data = tomllib.loads((ROOT / "builds/build03/hidden/mutants.toml").read_text("utf-8"))
    found = next(m for m in data["mutant"] if m["name"] == name)
    edit = found["edit"][0]
    return edit["old"], edit["new"]


def in_kernel(path: Path, scenario: Callable[[Step], Awaitable[None]]) -> None:
    """Run `scenario` against a fresh kernel for `path`; it sends cells with ``step``."""

    async def main() -> None:
        async with kernel_for(path) as client:

            async def step(source: str, cell_id: str | None) -> str:
                outputs: list[str] = []
                reply = await execute_cell(client, source, cell_id, outputs)
                assert reply is not None, f"no reply to {source[:60]!r}"
                return "".join(outputs)

            await scenario(step)

    asyncio.run(main())


def summary(report: str) -> tuple[int, int]:
    found = SUMMARY.search(report)
    assert found, report
    return int(found[1]), int(found[2])


def first_failing(report: str) -> str:
    found = re.search(r"^  ✗ (\S+)", report, re.MULTILINE)
    assert found, report
    return found[1]


def build_report(path: Path) -> progress.BuildReport:
    manifest = load_manifest(path.parent.parent / "workbook.toml")
    return progress.build_report(manifest, manifest.entry("03"))


# ───────────────────────────────────────────────────────── in a real kernel


@pytest.mark.slow  # a real kernel, restarted: 3-10 s, in `make check` rather than `make test`
def test_one_verdict_from_restart_to_an_unsaved_edit(tmp_path: Path) -> None:
    cells = solution_cells()
    path = repo_with(tmp_path, cells)
    code = [(i, c) for i, c in enumerate(cells, 1) if c["cell_type"] == "code"]
    fnv_check = next(c for _, c in code if 'selfcheck("03", "fnv1a_64")' in cell_source(c))
    sink_check = next(c for _, c in code if 'selfcheck("03", "sink")' in cell_source(c))
    sink_cell = next(c for _, c in code if "class IdempotentSink" in cell_source(c))
    old, new = mutant("seen_set_filled_before_inner_write")
    buggy = cell_source(sink_cell).replace(old, new)
    assert buggy != cell_source(sink_cell)
    reports: dict[str, str] = {}

    async def scenario(step: Step) -> None:
        # A fresh kernel (a restart): the self-check cell alone, importing what it needs.
        reports["restart"] = await step(
            'from workbook import selfcheck\nselfcheck("03", "fnv1a_64")', fnv_check["id"]
        )
        # Run All on the saved notebook (the plot aside: it only costs time here).
        for _, cell in code:
            if "matplotlib" not in cell_source(cell):
                reports["last"] = await step(cell_source(cell), cell["id"])
        # The learner edits step 3, runs it, runs its self-check, and has not saved yet.
        await step(buggy, sink_cell["id"])
        reports["unsaved"] = await step(cell_source(sink_check), sink_check["id"])

    in_kernel(path, scenario)
    restart = reports["restart"]
    assert summary(restart) == (1, 1), restart
    assert "Not run in this kernel yet, so read from the saved file: the setup cell" in restart
    assert "Run the setup cell first" in restart
    # A saved, re-run notebook: the self-check, make progress and the visible checks agree.
    everything = reports["last"]
    passed, total = summary(everything)
    # Every visible check, and each test-writing step (the solution's tests earn full marks).
    assert passed == total == len(checks_for("03")) + 2, everything
    assert "differs from the saved" not in everything
    assert build_report(path).verdict == "done"
    # The unsaved edit is what the self-check checks, and it says the file holds another.
    unsaved = reports["unsaved"]
    assert summary(unsaved)[0] < summary(unsaved)[1], unsaved
    assert (
        "⚠ Not saved yet: the answer cell under 'Step 3' differs, as this kernel last ran it,"
        f" from {NOTEBOOK}, which `make progress` and the grader read. Save the notebook."
    ) in unsaved
    assert unsaved.count("Not saved yet") == 1 and "re-run" not in unsaved
    # Every tagged cell ran here: no footnote on how the report was made.
    assert "(Checked a fresh module" not in unsaved and "(Checked a fresh module" in restart
    assert build_report(path).done  # the file still holds the right answer
    # Saved: progress now says what the self-check said.
    sink_cell["source"] = buggy
    repo_with(tmp_path, cells)
    saved = build_report(path)
    assert saved.verdict.startswith("failing: ")
    failing = [r.name for r in saved.results if not r.passed]
    assert first_failing(unsaved) in failing


def test_a_helper_in_an_untagged_cell_and_a_demo_error(tmp_path: Path) -> None:
    cells = solution_cells()
    step2 = next(i for i, c in enumerate(cells) if "def content_key" in cell_source(c))
    helper: dict[str, Any] = {
        "cell_type": "code",
        "id": "helper",
        "metadata": {},
        "execution_count": None,
        "outputs": [],
        "source": "def canonical_json(row: Any) -> str:\n"
        "    return json.dumps(dataclasses.asdict(row), sort_keys=True, allow_nan=False)\n",
    }
    cells[step2]["source"] = (
        "# ✎ answer: step 2\ndef content_key(row: Any) -> str:\n"
        '    return content_id("row", canonical_json(row))\n'
    )
    cells.insert(step2, helper)
    path = repo_with(tmp_path, cells)
    reports: dict[str, str] = {}

    async def scenario(step: Step) -> None:
        for cell in cells[: step2 + 3]:
            if cell["cell_type"] == "code":
                reports["last"] = await step(cell_source(cell), cell["id"])
        reports["demo"] = await step(
            "from workbook.checks import demo\nwith demo():\n"
            '    keys = [content_key(Row("Alpha", math.nan))]\n',
            "demo",
        )

    in_kernel(path, scenario)
    named = (
        "`canonical_json` is defined in an untagged cell, the code cell under 'Step 2' that"
        f" starts `def canonical_json(row: Any) -> str:` (cell {step2 + 1}): tag it `answer`"
    )
    report = reports["last"]
    assert "content_key" in report and "[error]" in report and "NameError" in report, report
    assert named in report
    saved = build_report(path)  # make progress reads the file and names it too
    assert saved.verdict.startswith("failing: ") and named in saved.notes
    shown = reports["demo"]
    assert "called:   content_key(...), from this demo" in shown, shown
    assert "got:      raised ValueError(" in shown and "in your canonical_json, line 2" in shown
    assert "Traceback" not in shown and "contextlib" not in shown


# ───────────────────────────────────────────────────────── matching and naming


def exported(cells: list[dict[str, Any]]) -> list[Cell]:
    return [
        Cell(i, next(t for t in cell_tags(c) if t in ("setup", "answer")), cell_source(c))
        for i, c in enumerate(cells, 1)
        if {"setup", "answer"} & set(cell_tags(c))
    ]


def test_each_tagged_cell_is_matched_to_its_last_run() -> None:
    cells = solution_cells()
    tagged = exported(cells)
    sink = next(c for c in tagged if "class IdempotentSink" in c.source)
    sink_id = cells[sink.index - 1]["id"]
    edited = sink.source.replace("self._lock", "self._lock2")
    by_id = last_runs(tagged, cells, [(sink.source, sink_id), (edited, sink_id)])
    chosen = {t.index: t for t in by_id}
    assert chosen[sink.index].ran == edited and chosen[sink.index].differs
    assert all(t.ran is None for t in by_id if t.index != sink.index)
    # Without ids (history from before recording began): by text, marker or definitions.
    renamed = "\n".join(sink.source.splitlines()[1:])  # the marker line deleted
    by_text = last_runs(tagged, cells, [(sink.source, None), (renamed, None)])
    assert {t.index: t for t in by_text}[sink.index].ran == renamed
    other_cell = last_runs(tagged, cells, [(edited, "some-other-cell")])
    assert {t.index: t for t in other_cell}[sink.index].ran is None


def test_exported_cells_are_what_the_selfcheck_matches() -> None:
    path = ROOT / "solutions" / NOTEBOOK
    assert [(c.index, c.tag) for c in exported_cells(path)] == [
        (c.index, c.tag) for c in exported(read_notebook(path)["cells"])
    ]


@pytest.mark.parametrize("name", ["fnv1a_64", "content_id"])
def test_a_selfcheck_outside_a_kernel_checks_the_callers_names(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from workbook import selfcheck

    def fnv1a_64(data: bytes) -> str:
        raise NotImplementedError("not yet")

    namespace = {"fnv1a_64": fnv1a_64}
    exec(f'selfcheck("03", "{name}")', {"selfcheck": selfcheck, **namespace})
    out = capsys.readouterr().out
    assert out.startswith(f"Self-check, build 03 ({name}):")
    assert "not done" in out


@pytest.mark.slow
def test_the_grader_agrees_on_the_saved_notebook(tmp_path: Path) -> None:
    """The fourth reader: full marks where every visible check passes, points lost where a
    known bug makes one fail (`make progress` and `make check` share `build_report`)."""
    from grader.runtime.runner import grade_notebook

    cells = solution_cells()
    path = repo_with(tmp_path, cells)
    graded = grade_notebook("03", path)
    assert build_report(path).done and graded.score == graded.max_score, graded.reason
    sink = next(c for c in cells if "class IdempotentSink" in cell_source(c))
    old, new = mutant("seen_set_filled_before_inner_write")
    sink["source"] = cell_source(sink).replace(old, new)
    repo_with(tmp_path, cells)
    graded = grade_notebook("03", path)
    assert not build_report(path).done and graded.score < graded.max_score


def test_an_answer_redefined_in_another_cell_is_named() -> None:
    """The kernel's `content_key` came from a scratch cell: what is checked is the answer cell."""
    cells = solution_cells()
    tagged = exported(cells)
    key = next(c for c in tagged if "def content_key" in c.source)
    key_id = cells[key.index - 1]["id"]
    scratch = "def content_key(row):\n    return 'k'\n"
    runs = last_runs(tagged, cells, [(key.source, key_id), (scratch, "scratch")])
    assert redefined(runs, [(key.source, key_id), (scratch, "scratch")], cells) == [
        "`content_key` in this kernel comes from another cell, run after the answer cell under"
        " 'Step 2': the self-check and the grader use the answer cell under 'Step 2', so put"
        " your code there"
    ]
    rerun = [(scratch, "scratch"), (key.source, key_id)]  # the answer cell ran last: fine
    assert redefined(last_runs(tagged, cells, rerun), rerun, cells) == []
