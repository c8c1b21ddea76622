"""Loading an earlier build next to a later one, and the grader's reference seams in its place.

A later build's setup cell calls ``load_sibling("03")``: a learner's build 05 runs on their own
build 03 (the notebook beside it), while the grader, which runs exported text with no notebook
behind it, gets the reference seams registered by the hidden suite, so an unfinished build 03
does not zero build 05.
"""

from __future__ import annotations

import ast
import json
import shutil
import types
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbook import ExportError, export_source, load, siblings
from workbook.siblings import (
    load_sibling,
    reference_for,
    reference_seams,
    references,
    sibling_path,
)

SETUP = "from workbook.siblings import load_sibling\nbuild03 = load_sibling('03')"


@pytest.fixture(autouse=True)
def no_references(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start each test with nothing registered: importing a hidden suite's probes earlier in
    this process (the grading tests do) registers the real reference seams."""
    monkeypatch.setattr(siblings, "_references", {})


def notebook(path: Path, *cells: tuple[str, str]) -> Path:
    """Write a notebook of ``(tag, source)`` code cells at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"c{i}",
            "metadata": {"tags": [tag] if tag else []},
            "outputs": [],
            "source": source,
        }
        for i, (tag, source) in enumerate(cells)
    ]
    path.write_text(json.dumps({"cells": body, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


def pair(folder: Path, value: str) -> Path:
    """A build 03 defining VALUE and a build 05 that loads it, in `folder`; returns 05."""
    notebook(folder / "03_build_retry_and_sink.ipynb", ("answer", f"VALUE = {value!r}"))
    return notebook(
        folder / "05_build_paginated_source.ipynb",
        ("setup", SETUP),
        ("answer", "SEEN = build03.VALUE"),
    )


def run_exported(path: Path) -> types.ModuleType:
    """Execute a notebook's export as the grader does: text, with no notebook behind it."""
    module = types.ModuleType("submission")
    exec(compile(export_source(path), "submission.py", "exec"), module.__dict__)
    return module


def test_each_folder_loads_its_own_sibling(tmp_path: Path) -> None:
    """exercises/05 loads exercises/03; solutions/05 loads solutions/03."""
    exercise = pair(tmp_path / "exercises", "the learner's")
    solution = pair(tmp_path / "solutions", "the solution's")
    assert load(exercise).SEEN == "the learner's"
    assert load(solution).SEEN == "the solution's"


def test_every_load_is_fresh_and_reads_the_saved_file(tmp_path: Path) -> None:
    later = pair(tmp_path, "first")
    first = load(later)
    notebook(tmp_path / "03_build_retry_and_sink.ipynb", ("answer", "VALUE = 'edited'"))
    second = load(later)
    assert (first.SEEN, second.SEEN) == ("first", "edited")
    assert first.build03 is not second.build03


def test_a_kernel_loads_from_its_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Jupyter kernel runs in its notebook's folder and has no __notebook__."""
    pair(tmp_path, "beside the kernel")
    monkeypatch.chdir(tmp_path)
    kernel: dict[str, object] = {"__name__": "__main__"}
    exec(compile(SETUP, "<cell>", "exec"), kernel)
    assert isinstance(kernel["build03"], types.ModuleType)
    assert kernel["build03"].VALUE == "beside the kernel"  # type: ignore[attr-defined]


def test_exported_text_gets_the_reference_and_notebooks_never_do(tmp_path: Path) -> None:
    later = pair(tmp_path / "learner", "the learner's unfinished 03")
    reference = tmp_path / "hidden" / "03.py"
    reference.parent.mkdir()
    reference.write_text("VALUE = 'the reference'\n")
    assert reference_for("03") is None
    with reference_seams("03", reference):
        assert references()["03"] == reference.resolve()
        assert run_exported(later).SEEN == "the reference"
        # A notebook still runs on its own earlier build, registered reference or not.
        assert load(later).SEEN == "the learner's unfinished 03"
    with pytest.raises(ExportError, match="no build 03 notebook"):
        run_exported(later)  # nothing registered: the grader's scratch folder has no 03


def test_a_notebook_can_be_the_reference(tmp_path: Path) -> None:
    later = pair(tmp_path / "learner", "unused")
    reference = notebook(tmp_path / "ref" / "03_anything.ipynb", ("answer", "VALUE = 'nb'"))
    with reference_seams("03", reference):
        assert run_exported(later).SEEN == "nb"


def test_near_points_at_another_folder(tmp_path: Path) -> None:
    pair(tmp_path / "elsewhere", "over there")
    module = load_sibling("03", near=tmp_path / "elsewhere" / "05_build_paginated_source.ipynb")
    assert module.VALUE == "over there"
    assert load_sibling("03", near=tmp_path / "elsewhere").VALUE == "over there"


def test_the_manifest_name_wins_over_a_copy_and_one_copy_is_enough(tmp_path: Path) -> None:
    pair(tmp_path, "the real one")
    notebook(tmp_path / "03_build_retry_and_sink-Copy1.ipynb", ("answer", "VALUE = 'copy'"))
    assert load_sibling("03", near=tmp_path).VALUE == "the real one"
    (tmp_path / "03_build_retry_and_sink.ipynb").unlink()
    assert load_sibling("03", near=tmp_path).VALUE == "copy"


def test_problems_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="no build 03 notebook here"):
        load_sibling("03", near=tmp_path)
    notebook(tmp_path / "03_a.ipynb", ("answer", "VALUE = 1"))
    notebook(tmp_path / "03_b.ipynb", ("answer", "VALUE = 2"))
    with pytest.raises(ExportError, match=r"2 build 03 notebooks \(03_a.ipynb, 03_b.ipynb\)"):
        sibling_path(tmp_path, "03")
    broken = tmp_path / "broken"
    notebook(broken / "03_build_retry_and_sink.ipynb", ("answer", "1 / 0"))
    with pytest.raises(ExportError, match=r"loading build 03 from .*ZeroDivisionError") as info:
        load_sibling("03", near=broken)
    assert "\n" not in str(info.value)


def test_a_notebook_that_loads_itself_is_stopped(tmp_path: Path) -> None:
    own = notebook(
        tmp_path / "05_loop.ipynb", ("setup", SETUP.replace("'03'", "'05'")), ("answer", "X = 1")
    )
    with pytest.raises(ExportError, match=r"loads itself in a loop: 05_loop\.ipynb -> 05_loop"):
        load(own)


def test_reference_seams_of_03_have_the_solutions_code() -> None:
    """The copy kept with the hidden suites is the solution's export (comments and layout
    aside), so grading build 05 never runs on a stale build 03."""
    solution = ROOT / "solutions" / "03_build_retry_and_sink.ipynb"
    seams = ROOT / "builds" / "build03" / "hidden" / "seams.py"
    if not solution.exists() or not seams.exists():
        pytest.skip("the instructor's copy only")
    same = ast.dump(ast.parse(seams.read_text())) == ast.dump(ast.parse(export_source(solution)))
    assert same, (
        "builds/build03/hidden/seams.py no longer has the code of solutions/03: refresh it with"
        " python -m workbook export solutions/03_build_retry_and_sink.ipynb"
        " -o builds/build03/hidden/seams.py && ruff format builds/build03/hidden/seams.py"
    )


@pytest.mark.skipif(not (ROOT / "solutions").exists(), reason="the instructor's copy only")
def test_the_grader_grades_build_05_alone(tmp_path: Path) -> None:
    """A learner who left build 03 as stubs and solved build 05: their own notebook runs on
    their stubs, and the grader gives build 05 full marks on the reference seams."""
    from grader import grade_notebook

    for folder, name in (
        ("exercises", "03_build_retry_and_sink.ipynb"),
        ("solutions", "05_build_paginated_source.ipynb"),
    ):
        shutil.copy(ROOT / folder / name, tmp_path / name)
    mine = load(tmp_path / "05_build_paginated_source.ipynb")
    with pytest.raises(NotImplementedError):
        mine.build03.RetryPolicy()
    # Importing build 05's probes registers the reference once per process (the suite is
    # cached); tests before this one may have reset the registry, so register it here.
    with siblings.reference_seams("03", ROOT / "builds" / "build03" / "hidden" / "seams.py"):
        result = grade_notebook("05", tmp_path / "05_build_paginated_source.ipynb")
    assert (result.status, result.score) == ("graded", result.max_score), [
        (t.name, t.message) for t in result.tests if not t.passed
    ]
