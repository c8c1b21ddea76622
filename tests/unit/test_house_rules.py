"""The layout's rules, proven on the tree as it is: no import cycle, no module too long to
read, no two modules sharing a file name, a graded test named in one build folder only, and
every ``workbook`` path a shipped notebook imports still importable.

Each rule reads the files themselves (ast, never an import of them but the surface's), so a
rule broken anywhere fails here with the file and what to do.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbook.shared.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("etl", "workbook", "grader", "builds")
#: Notebook exports kept as the learner writes them (mypy and these rules leave them out).
EXPORTS = ("seams.py", "wheat.py")
#: The house limit: a module longer than this is split at a seam. A build's probes are one
#: file on purpose: a worker receives exactly one probes text.
MAX_LINES = 600
#: File names several modules may share: package markers, entry points, pytest's plugins, the
#: error modules; and, inside builds/, a name each build has its own of.
SHARED_NAMES = {"__init__.py", "__main__.py", "errors.py", "conftest.py"}

#: Every ``workbook`` path a shipped notebook (concept, exercise or solution) imports or
#: reads an attribute of. A notebook handed in from an older copy runs these: each must stay
#: importable (a re-export or an alias module) whatever moves inside the package.
SURFACE = (
    "workbook",
    "workbook.load",
    "workbook.run",
    "workbook.run_timed",
    "workbook.selfcheck",
    "workbook.checks",
    "workbook.checks.demo",
    "workbook.selfcheck.checks_for",
    "workbook.siblings",
    "workbook.siblings.load_sibling",
    "workbook.contention",
    "workbook.contention.LABELS",
    "workbook.contention.at",
    "workbook.contention.plot",
    "workbook.contention.sweep",
    "workbook.contention.table",
    "workbook.explorer",
    "workbook.explorer.Settings",
    "workbook.explorer.crowd",
    "workbook.explorer.explore",
    "workbook.explorer.herd",
    "workbook.explorer.rolling",
    "workbook.explorer.schedule",
    "workbook.explorer.snapshot",
    "workbook.replay_explorer",
    "workbook.replay_explorer.explore",
    "workbook.vtime",
    "workbook.vtime.now",
    "workbook.vtime.run",
    "workbook.vtime.run_timed",
    "workbook.palette",
    "workbook.palette.BLUE",
    "workbook.palette.BLUISH_GREEN",
    "workbook.palette.DARK_GREY",
    "workbook.palette.GREY",
    "workbook.palette.VERMILLION",
    "workbook.palette.tint",
    "workbook.palette.BLACK",
    "workbook.palette.ORANGE",
    "workbook.pipeline_figure",
    "workbook.pipeline_figure.where_you_are",
)


def modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the packages (notebook exports aside)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name in EXPORTS or "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that `name` imports anywhere (function bodies too), but under
    ``if TYPE_CHECKING:``. ``from pkg import sub`` counts as importing ``pkg.sub``."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join([*here, *([node.module] if node.module else [])])
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found = set()
    for target in out:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_module_imports_itself_round_a_cycle() -> None:
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [], "split at a seam, or move the shared part into a module both use"


def test_the_cycle_finder_finds_a_cycle_through_a_function_body(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    from b import g\n")
    (tmp_path / "b.py").write_text("import a\n")
    (tmp_path / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
    )
    known = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "c": tmp_path / "c.py"}
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert graph["c"] == set() and cycles(graph) == [["a", "b"]]


def test_no_module_outgrows_the_house_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): n
        for path in modules().values()
        if path.name != "probes.py"
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"over {MAX_LINES} lines: split each at a seam"


def test_no_two_modules_share_a_file_name() -> None:
    """Outside builds/, every module's file name is its own; inside, a name may recur once
    per build (each build has its ``probes.py``), never twice in one build nor outside it."""
    places = [p.relative_to(ROOT).parts for p in modules().values() if p.name not in SHARED_NAMES]
    outside = Counter(parts[-1] for parts in places if parts[0] != "builds")
    inside = Counter((parts[1], parts[-1]) for parts in places if parts[0] == "builds")
    assert [n for n, count in outside.items() if count > 1] == [], "rename one of each"
    assert [n for n, count in inside.items() if count > 1] == [], "one name per build"
    clash = sorted({name for _, name in inside} & set(outside))
    assert clash == [], "a build's module shares a package module's name"


def _tracked_text() -> Iterator[tuple[str, str]]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        path = ROOT / name
        if path.suffix in (".ipynb", ".md") or name.startswith("tests/") or not path.is_file():
            continue
        yield name, path.read_text(encoding="utf-8", errors="replace")


#: Where in its build folder a graded test's name may be written.
HOME = r"(build\.toml|hidden/probes\.py|hidden/test_\w+\.py|visible/\w+\.py)$"


def _judges(name: str, text: str) -> bool:
    """Whether `text` defines the judge of `name`: a function, one a factory made, or a row of
    a table of judges (build 08's answer key)."""
    shapes = rf"^(def test_{name}\(|test_{name} = |\s*\(\"{name}\", )"
    return re.search(shapes, text, re.MULTILINE) is not None


def test_a_graded_tests_name_lives_in_its_build_folder_only() -> None:
    """A graded test's name is written in ``build.toml``, ``hidden/probes.py``, its judge
    module (``hidden/test_*.py``) and, when it is visible, its check (``visible/``); nowhere
    else but the notebooks (whose self-check output shows it), the docs that quote that output,
    and the tests that pin verdicts. So adding one touches one folder."""
    texts = dict(_tracked_text())
    builds = {spec.name: entry.number for entry in load_manifest().graded for spec in entry.tests}
    word = re.compile(r"\b(" + "|".join(sorted(builds, key=len, reverse=True)) + r")\b")
    elsewhere: dict[str, list[str]] = {}
    for name, text in texts.items():
        for found in sorted(set(word.findall(text))):
            folder = f"builds/build{builds[found]}/"
            allowed = (
                rf"^{folder}(build\.toml|hidden/probes\.py|hidden/test_\w+\.py|visible/\w+\.py)$"
            )
            if not re.match(allowed, name):
                elsewhere.setdefault(found, []).append(name)
    for entry in load_manifest().graded:
        folder = f"builds/build{entry.number}/"
        judges = [n for n in texts if re.match(rf"^{folder}hidden/test_\w+\.py$", n)]
        for spec in entry.tests:
            defined = [n for n in judges if _judges(spec.name, texts[n])]
            assert len(defined) == 1, f"{spec.name}: judged in {defined or 'no module'}"
    assert elsewhere == {}, "name each graded test only in its build's folder"


def _notebook_imports(path: Path) -> set[str]:
    """The ``workbook`` paths a notebook's code imports or reads an attribute of."""
    found: set[str] = set()
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    bound: dict[str, str] = {}  # a name imported in one cell is used in the cells after it
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "workbook":
                        found.add(alias.name)
                        bound[alias.asname or alias.name.split(".")[0]] = (
                            alias.name if alias.asname else "workbook"
                        )
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbook"):
                for alias in node.names:
                    found.add(f"{node.module}.{alias.name}")
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            name = node.value if isinstance(node, ast.Attribute) else None
            if isinstance(name, ast.Name) and name.id in bound:
                found.add(f"{bound[name.id]}.{node.attr}")  # type: ignore[attr-defined]
    return found


def _shipped_notebooks() -> list[Path]:
    return sorted(
        p for f in ("notebooks", "exercises", "solutions") for p in (ROOT / f).glob("*.ipynb")
    )


def test_every_workbook_path_a_notebook_uses_is_pinned() -> None:
    used = {p.name: _notebook_imports(p) for p in _shipped_notebooks()}
    unpinned = {name: sorted(paths - set(SURFACE)) for name, paths in used.items()}
    assert {n: p for n, p in unpinned.items() if p} == {}, "add each to SURFACE (and keep it)"
    assert "workbook.siblings.load_sibling" in used["05_build_paginated_source.ipynb"]


@pytest.mark.parametrize("dotted", SURFACE)
def test_each_pinned_path_imports(dotted: str) -> None:
    module, attribute = dotted, ""
    while True:
        try:
            found = importlib.import_module(module)
            break
        except ModuleNotFoundError:
            module, _, last = module.rpartition(".")
            attribute = f"{last}.{attribute}".rstrip(".")
            assert module, f"{dotted}: no module of it imports"
    for part in filter(None, attribute.split(".")):
        found = getattr(found, part)
    assert found is not None


#: Modules without a unit test file of their own, each with the reason.
NO_TEST_FILE = {
    "grader/bench.py": "a two-line `python -m` entry point; grader.proofs.class_bench is tested",
    "grader/validity.py": "a two-line `python -m` entry point; grader.proofs.suite_validity is",
}


def test_every_module_has_its_unit_test_file() -> None:
    """``<package>/<wing>/<module>.py`` is tested in ``tests/unit/<package>/<wing>/
    test_<module>.py``: a module's tests are found by its name."""
    missing = []
    for package in ("etl", "workbook", "grader"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if path.name in ("__init__.py", "__main__.py") or "__pycache__" in path.parts:
                continue
            if relative.as_posix() in NO_TEST_FILE:
                continue
            expected = ROOT / "tests" / "unit" / relative.parent / f"test_{path.name}"
            if not expected.exists():
                missing.append(f"{relative} -> {expected.relative_to(ROOT)}")
    assert missing == [], "write the missing test files"


def test_no_test_file_is_named_after_an_issue() -> None:
    named = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_issue*.py"))
    assert named == [], "name a test file after the module or behaviour it tests"
