"""Build 03 in JupyterLab, as a learner meets it: Run All, then read the self-check reports.

The solution must pass every check of every self-check cell. The exercise, all stubs, must
run to the end without raising, and each report must call the stubs "not done" in words a
learner can act on, never a wall of traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.harness import WORK, OpenNotebook

NAME = "03_build_retry_and_sink.ipynb"
EXERCISE = WORK / "exercises" / NAME
SOLUTION = WORK / "solutions" / NAME

REPORT = re.compile(
    r"Self-check, build 03 \((?P<which>[^)]*)\):\n(?P<body>.*?)"
    r"^(?P<passed>\d+) of (?P<total>\d+) checks? pass\.",
    re.DOTALL | re.MULTILINE,
)
CHECK_LINE = re.compile(r"^  (?P<mark>\S) (?P<name>\S+)(?:  \[(?P<status>[^\]]+)\])?$")
TRACEBACK = "Traceback (most recent call last)"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    """"passed", or the bracketed status: "not done", "failed", "error"."""
    message: str


@dataclass(frozen=True)
class Report:
    cell: int
    which: str
    passed: int
    total: int
    checks: tuple[Check, ...]
    text: str


#: A test-writing step's self-check (`selfcheck("03", "test_...")`) reports on the learner's
#: own test, in its own form (workbook.checking.teststep): not one of the reports read here.
TEST_STEP = re.compile(r"""selfcheck\(\s*["']\d+["']\s*,\s*["']test_""")


def selfcheck_cells(path: Path) -> list[int]:
    """Indices (markdown included) of the untagged code cells that call `selfcheck(` on the
    visible checks (test-writing steps aside)."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        tags = set(cell.get("metadata", {}).get("tags", []))
        if (
            cell["cell_type"] == "code"
            and "selfcheck(" in source
            and not TEST_STEP.search(source)
            and not tags & {"answer"}
        ):
            found.append(index)
    return found


def parse_report(cell: int, text: str) -> Report:
    found = REPORT.search(text)
    assert found, f"cell {cell} printed no self-check report:\n{text}"
    checks: list[Check] = []
    for line in found["body"].splitlines():
        head = CHECK_LINE.match(line)
        if head:
            checks.append(Check(head["name"], head["status"] or "passed", ""))
        elif checks and line.startswith("      "):
            last = checks[-1]
            message = f"{last.message}\n{line.strip()}".strip()
            checks[-1] = Check(last.name, last.status, message)
    return Report(
        cell,
        found["which"],
        int(found["passed"]),
        int(found["total"]),
        tuple(checks),
        found.group(0),
    )


def run_as_learner(open_notebook: Callable[[Path], OpenNotebook], path: Path) -> OpenNotebook:
    if not path.exists():
        pytest.skip(f"{path.relative_to(WORK)} does not exist here")
    nb = open_notebook(path)
    nb.run_all()
    prompts = nb.prompts()
    assert all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), f"Run All stopped: {prompts}"
    everything = nb.all_output_text()
    assert TRACEBACK not in everything, f"a raw traceback reached the learner:\n{everything}"
    assert "Error displaying widget" not in everything
    return nb


def reports_of(nb: OpenNotebook, path: Path) -> list[Report]:
    cells = selfcheck_cells(path)
    assert cells, f"{path.name} has no self-check cells"
    return [parse_report(cell, nb.output_text(cell)) for cell in cells]


def show(nb: OpenNotebook, cell: int, name: str) -> None:
    nb.cells.nth(cell).scroll_into_view_if_needed()
    nb.screenshot(name)


def test_solution_passes_every_self_check(
    open_notebook: Callable[[Path], OpenNotebook],
) -> None:
    nb = run_as_learner(open_notebook, SOLUTION)
    assert nb.error_outputs() == [], "the solution wrote to stderr"
    reports = reports_of(nb, SOLUTION)
    for report in reports:
        assert report.total > 0, report.text
        assert report.passed == report.total, f"a check fails on the solution:\n{report.text}"
        assert all(c.status == "passed" for c in report.checks), report.text
    show(nb, reports[0].cell, "03_solution_first_selfcheck")
    show(nb, reports[-1].cell, "03_solution_last_selfcheck")


def test_exercise_reports_stubs_as_not_done(
    open_notebook: Callable[[Path], OpenNotebook],
) -> None:
    nb = run_as_learner(open_notebook, EXERCISE)
    assert nb.error_outputs() == [], "the exercise wrote to stderr (a traceback?)"
    reports = reports_of(nb, EXERCISE)
    for report in reports:
        assert report.checks, report.text
        assert report.passed == 0, f"a stub passes a check:\n{report.text}"
        for check in report.checks:
            assert check.status == "not done", f"{check.name} is {check.status!r}:\n{report.text}"
            # The learner is told, in a sentence, what is missing.
            assert re.search(r"not done yet|not defined yet", check.message), report.text
    show(nb, reports[0].cell, "03_exercise_first_selfcheck")
    show(nb, reports[-1].cell, "03_exercise_last_selfcheck")
