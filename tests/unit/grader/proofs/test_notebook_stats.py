"""The reading budgets: what counts, which bars fail, and that `make check` holds them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.proofs import notebook_stats
from grader.proofs.notebook_stats import Stats, problems, stats
from grader.proofs.soundness import instructor_parts

PNG = {"output_type": "display_data", "data": {"image/png": "iVBOR"}, "metadata": {}}
TEXT = {"output_type": "stream", "name": "stdout", "text": "3\n"}


def code(source: str, *outputs: dict[str, Any], tags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "source": source,
        "outputs": list(outputs),
        "metadata": {"tags": list(tags)},
    }


def markdown(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "source": source, "metadata": {}}


def notebook(*cells: dict[str, Any]) -> dict[str, Any]:
    return {"cells": list(cells)}


def test_a_silent_stretch_runs_over_markdown_until_an_output_and_skips_comments() -> None:
    counted = stats(
        notebook(
            code("a = 1\n# why\n\nb = 2"),
            markdown("Between them."),
            code("c = 3", TEXT),
            code("d = 4"),
        )
    )
    assert counted.longest_silent == 3


def test_the_main_path_ends_at_going_further() -> None:
    counted = stats(
        notebook(
            markdown("Two words."),
            markdown("## Going further\n\nMany more words here."),
            code("\n".join(f"x{i} = {i}" for i in range(40))),
        )
    )
    assert (counted.words, counted.longest_silent, counted.code_lines_total) == (2, 0, 40)


def test_a_figure_needs_one_figure_line_after_it_anywhere_in_the_notebook() -> None:
    described = notebook(code("plot()", PNG), markdown("Figure: two lines, the cap at 2 s."))
    missing = notebook(code("plot()", PNG), markdown("Some prose."))
    two_lines = notebook(code("plot()", PNG), markdown("Figure: one.\nAnd another."))
    after_further = notebook(markdown("## Going further"), code("plot()", PNG))
    assert stats(described).undescribed == 0
    assert [stats(n).undescribed for n in (missing, two_lines, after_further)] == [1, 1, 1]


def test_an_explorer_carries_its_own_line() -> None:
    assert stats(notebook(code("explore()", PNG, tags=("explorer",)))).undescribed == 0


BARS_MET = Stats(
    words=3_000,
    code_lines=10,
    code_lines_total=10,
    figures=3,
    your_turn=3,
    longest_code_cell=5,
    longest_silent=25,
    seconds=14.9,
)


def test_every_bar_at_its_limit_passes_and_each_one_past_it_fails() -> None:
    assert problems("01_x", BARS_MET) == []
    past = {
        "words": 3_501,
        "figures": 2,
        "your_turn": 2,
        "longest_silent": 26,
        "undescribed": 1,
        "seconds": 15.1,
    }
    for field, value in past.items():
        worse = Stats(**{**BARS_MET.__dict__, field: value})
        assert len(problems("01_x", worse)) == 1, field


def test_notebook_06_has_its_own_word_bar() -> None:
    assert problems("06_y", Stats(**{**BARS_MET.__dict__, "words": 3_001})) != []
    assert problems("04_y", Stats(**{**BARS_MET.__dict__, "words": 3_001})) == []


@pytest.mark.slow  # hashes every tracked file for the parts' keys
def test_the_nbval_part_of_make_check_loads_the_plugin() -> None:
    (part,) = [p for p in instructor_parts(cores=2) if p.name.startswith("concept notebooks")]
    assert "grader.proofs.notebook_stats" in part.commands[0]


@pytest.mark.slow  # starts a kernel: 2 s
def test_as_a_plugin_it_fails_a_passing_run_over_a_bar(tmp_path: Path) -> None:
    """A notebook whose cells all pass nbval fails the run over a bar (a 26-line silent
    stretch), named."""
    over = notebook(code("\n".join(f"x{i} = {i}" for i in range(25))), code("print(3)", TEXT))
    for count, cell in enumerate(over["cells"], start=1):
        cell["execution_count"] = count
    over |= {"metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "09_over.ipynb"
    path.write_text(json.dumps(over), encoding="utf-8")
    plugins = ["-p", notebook_stats.__name__, "-p", "no:randomly", "-p", "no:cacheprovider"]
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--nbval-lax", str(path), *plugins],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "2 passed" in ran.stdout
    assert "09_over: 26 lines of code before an output, over 25" in ran.stdout


@pytest.mark.slow  # a process each
@pytest.mark.parametrize("argv", [["--check"], []])
def test_the_command_reads_the_stored_notebooks(argv: list[str]) -> None:
    ran = subprocess.run(
        [sys.executable, "scripts/notebook_stats.py", *argv],
        capture_output=True,
        text=True,
        cwd=notebook_stats.ROOT,
        timeout=60,
    )
    assert "| 01_retry_with_backoff |" in ran.stdout
    assert ran.returncode in (0, 1) and (ran.returncode == 0 or "--check" in argv)
