"""`grader.shipping.leakscan`: the scan of a learner copy for secrets.

A concept notebook may show what it teaches (notebook 02 builds `content_id` as the lesson),
but the same definition elsewhere leaks; a solution's class, a hidden judge, a build's seam, a
quiz answer or a solution line is found however it is disguised (re-printed from its syntax
tree, in a markdown hint, in a docstring example or a comment).
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from grader.shipping import leakscan
from grader.suites.loading import judge_files
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import load_manifest, repo_root

# Kept with the learner-copy tests in `make check`: each reads every solution and hidden suite.
pytestmark = pytest.mark.slow

ROOT = repo_root()
MANIFEST = load_manifest()
BUILDS = [e for e in MANIFEST.entries if e.solution and (ROOT / e.solution).exists()]


def _definition(source: str, name: str) -> str:
    """`name`'s definition in `source`, re-printed from its syntax tree: no comments, no
    docstring layout, another formatting (what a learner-facing copy might look like)."""
    for node in ast.walk(ast.parse(source)):
        kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
        if isinstance(node, kinds) and node.name == name:
            return ast.unparse(node)
    raise LookupError(name)


def _solution_source(number: str) -> str:
    entry = MANIFEST.entry(number)
    cells = read_notebook(ROOT / str(entry.solution))["cells"]
    return "\n\n".join(cell_source(c) for c in cells if "answer" in cell_tags(c))


def _quiz_answers() -> dict[str, object]:
    """The quiz solution's answer dict, as its answer cell assigns it."""
    source = _solution_source("08")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            found: dict[str, object] = ast.literal_eval(node.value)
            return found
    raise LookupError("no answer dict in the quiz solution")


def test_a_concept_notebook_may_show_what_it_teaches(tmp_path: Path) -> None:
    """Notebook 02 builds `content_id` as the lesson; the same definition elsewhere leaks."""
    fake = tmp_path / "fake"
    (fake / "notebooks").mkdir(parents=True)
    taught = {name for path, name in leakscan.taught_names() if path.startswith("notebooks/02")}
    assert "content_id" in taught
    shutil.copy(ROOT / "notebooks" / "02_content_addressed_writes.ipynb", fake / "notebooks")
    assert leakscan.leaks(fake) == []
    shutil.copy(
        ROOT / "notebooks" / "02_content_addressed_writes.ipynb",
        fake / "notebooks" / "04_copy.ipynb",
    )
    assert any("04_copy.ipynb: defines build 03's answer" in p for p in leakscan.leaks(fake))


def _notebook(*cells: tuple[str, str]) -> str:
    return json.dumps(
        {
            "cells": [
                {"cell_type": kind, "metadata": {}, "source": text}
                | ({"outputs": [], "execution_count": None} if kind == "code" else {})
                for kind, text in cells
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    )


def test_the_scan_finds_secrets_in_every_disguise(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "workbook").mkdir(parents=True)
    (fake / "notebooks").mkdir()
    sink = _definition(_solution_source("03"), "IdempotentSink")
    judges = "\n".join(p.read_text() for p in judge_files(ROOT / "builds/build03/hidden"))
    judge = next(
        ast.unparse(node)
        for node in ast.parse(judges).body
        if isinstance(node, ast.FunctionDef) and len(node.body) > 3
    )
    (fake / "workbook" / "helpers.py").write_text(f"{sink}\n\n\n{judge}\n")
    planted = {"IdempotentSink": "a copy of IdempotentSink"}
    cells = []
    if any(e.number == "07" for e in BUILDS):
        # A concept notebook may teach ideas, never hand over a build's seam, however shown.
        cells.append(("code", _definition(_solution_source("07"), "ingest_page")))
        planted["ingest_page"] = "a copy of ingest_page"
    if any(e.number == "08" for e in BUILDS):
        cells.append(("code", 'worked_example = {"q05": 360, "q07": 12, "q01": None}'))
        planted["quiz"] = '{"q05": 360}'
    line = next(
        ln.strip()
        for ln in _definition(_solution_source("03"), "with_retry").splitlines()
        if "retry_after" in ln and len(ln.strip()) >= leakscan.MIN_SECRET_LINE
    )
    cells.append(("markdown", f"A hint, copied from somewhere:\n\n    {line}\n"))
    (fake / "notebooks" / "06_copy.ipynb").write_text(_notebook(*cells))
    # A build's answer, written anew, where no concept notebook teaches it.
    (fake / "workbook" / "digest.py").write_text(
        "import hashlib\n\n\ndef content_id(kind, canonical):\n"
        "    return hashlib.sha256(kind.encode() + b'\\0' + canonical.encode()).hexdigest()\n"
    )
    planted["content_id"] = "workbook/digest.py: defines build 03's answer `content_id`"
    if any(e.number == "08" for e in BUILDS):
        key, value = next(iter(_quiz_answers().items()))
        as_python = repr({key: value}).replace(": ", " :  ").replace(", ", ",\n    ")
        # In a docstring example, spaced and quoted another way, and in a comment.
        (fake / "workbook" / "grading_notes.py").write_text(
            f'"""How the key looks.\n\n    >>> check({as_python})\n"""\n'
            f"# e.g. {key} = {json.dumps(value)}\n"
        )
        planted["quiz in a docstring"] = "workbook/grading_notes.py: the quiz answer"
    problems = "\n".join(leakscan.leaks(fake))
    for what, words in planted.items():
        assert words in problems, f"{what} not found in:\n{problems}"
    assert "builds/build03/hidden/test_" in problems
    assert line[:40] in problems or repr(line[:60])[1:-1][:40] in problems, problems


def test_a_hidden_files_comments_are_secret_too() -> None:
    """A judge's or a probe's own comment (its reasoning about the answer) is secret text, as
    a solution's comments are; one that a public file also holds is not."""
    found = leakscan.secrets()
    for path in judge_files(ROOT / "builds" / "build03" / "hidden"):
        comments = leakscan._comments(path.read_text("utf-8"))
        public = "\n".join(leakscan._public_sources(ROOT))
        own = [c for c in comments if c not in public]
        assert own and all(c in found for c in own), path
