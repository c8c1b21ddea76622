"""`make release`: the learner copy, and the proof that nothing secret is in it.

The copy holds the concept notebooks, the exercises (plus a pristine copy of each for
`make reset`), the visible tests, the packages, and a learner README and Makefile. It never
holds a solution, a hidden probe or judge, a mutant, a reference seam or a quiz answer:
`leaks` proves it three ways (secret text, copied definitions however reformatted, the quiz's
answer values). Building it twice into the same folder gives the same files: the folder is
replaced whole.

The manifest ships as it is, hidden tests included: their names, points and hints are the
grading's public contract (the feedback shows them too), and none holds code or an expected
value. `make progress` and the self-checks run the visible checks only.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbook.errors import ExportError
from workbook.export import cell_source, cell_tags, read_notebook
from workbook.manifest import Entry, load_manifest, repo_root
from workbook.reset import PRISTINE

#: What ships, relative to the repo root. Folders ship whole, minus `IGNORED`.
SHIP = (
    "README.md",
    "LICENSE",
    "Makefile",
    "requirements.txt",
    "runtime.txt",
    "pyproject.toml",
    "workbook.toml",
    ".gitignore",
    "notebooks",
    "exercises",
    "etl",
    "workbook",
    "scripts/make_launches.py",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/visible",
)
#: Instructor-only material: never copied, and scanned for leaks.
SECRET_DIRS = ("grader", "solutions", "tests/hidden")
IGNORED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info", ".backups"
)
MAKEFILE_CUT = "# ---- instructor only:"
README_CUT = re.compile(r"<!-- instructor -->.*?<!-- /instructor -->\n?", re.DOTALL)
#: A solution line shorter than this is too generic to call a leak (``return total``).
MIN_SECRET_LINE = 24


def build(out: Path, root: Path | None = None) -> list[Path]:
    """Write the learner copy into `out` (replacing it) and return the files written."""
    root = root or repo_root()
    _refuse_to_clobber(out, root)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in SHIP:
        src, dst = root / name, out / name
        if not src.exists():
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=IGNORED)
        else:
            shutil.copy2(src, dst)
    makefile = (out / "Makefile").read_text(encoding="utf-8")
    (out / "Makefile").write_text(learner_makefile(makefile))
    readme = (out / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(README_CUT.sub("", readme))
    for exercise in sorted((root / "exercises").glob("*.ipynb")):
        pristine = out / PRISTINE / "exercises" / exercise.name
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(exercise, pristine)
    return sorted(p for p in out.rglob("*") if p.is_file())


def learner_makefile(makefile: str) -> str:
    """The instructor's Makefile without its instructor-only part, and with `make check`
    described as what it is in the learner copy (no class grading there)."""
    text = makefile.split(MAKEFILE_CUT)[0].rstrip() + "\n"
    text = re.sub(r"^(\.PHONY:.*?) release\b", r"\1", text, flags=re.MULTILINE)
    return re.sub(
        r"^(check:[^#\n]*## ).*$",
        r"\1Check your own work: visible tests, every notebook runs, progress"
        " (passes once every build is done)",
        text,
        flags=re.MULTILINE,
    )


def _refuse_to_clobber(out: Path, root: Path) -> None:
    target, home = out.resolve(), root.resolve()
    if target == home or target in home.parents:
        raise SystemExit(f"refusing to replace {out}: it holds the repository")
    if home in target.parents:
        first = target.relative_to(home).parts[0]
        if first in {".git", *(p.split("/")[0] for p in (*SHIP, *SECRET_DIRS))}:
            raise SystemExit(f"refusing to replace {out}: it is part of the repository")


#: Definitions a concept notebook may show in full (ARC: seed 000 shows `content_id`, and
#: notebook 02 builds the FNV-1a toy). Every other definition of a solution is a seam, or part
#: of one, and is never excused by a concept notebook showing it.
TEACHABLE = frozenset({"fnv1a_64", "content_id"})


def secrets(root: Path | None = None) -> dict[str, str]:
    """Text that must never appear in the learner copy, each mapped to where it comes from.

    - every solution answer cell, whole, unless the exercise has it as it is;
    - every line (of some length) of a solution answer cell that the exercise does not show
      anywhere, no concept notebook teaches and no visible check or test gives as a hint,
      except the lines of a `TEACHABLE` definition;
    - every such line of the hidden suites (probes, judges, mutants, reference seams) that
      no public source of the repository (exercises, concept notebooks, visible tests, the
      packages, the manifest) shows anywhere, such as the imports they share.

    A whole copy of a seam is caught by `secret_definitions` whatever the concept notebooks
    teach; these lines catch a part of one.
    """
    root = root or repo_root()
    taught = "\n".join(
        [
            cell_source(cell)
            for notebook in sorted((root / "notebooks").glob("*.ipynb"))
            for cell in read_notebook(notebook)["cells"]
        ]
        + [
            path.read_text(encoding="utf-8")
            for folder in ("workbook/buildchecks", "tests/visible")
            for path in _files(root / folder)
            if path.suffix == ".py"
        ]
    )
    found: dict[str, str] = {}
    for entry, exercise, solution in _graded_pairs(root):
        given = "\n".join(cell_source(cell) for cell in exercise)
        for index, cell in enumerate(solution, start=1):
            if "answer" not in cell_tags(cell):
                continue
            source = cell_source(cell).strip()
            where = f"{entry.solution} cell {index}"
            if source and source not in given:
                found[source] = where
            for line in _lines(source) - _teachable_lines(source):
                if line not in given and line not in taught:
                    found[line] = where
    public = "\n".join(_public_sources(root))
    public_lines = _lines(public)
    for path in _files(root / "tests" / "hidden"):
        for line in _lines(path.read_text(encoding="utf-8", errors="replace")) - public_lines:
            if line not in public:
                found.setdefault(line, str(path.relative_to(root)))
    return found


def secret_definitions(root: Path | None = None) -> dict[str, str]:
    """Every function and class of the solutions' answer cells and of the hidden suites, as a
    normalised syntax tree (docstrings, comments and layout left out), mapped to where it
    comes from: a copy is found however it is reformatted or re-commented.

    Left out: the `TEACHABLE` ones, those the exercise gives as they are, and (for the hidden
    suites) those a public source of the repository also defines."""
    root = root or repo_root()
    found: dict[str, str] = {}
    for entry, exercise, solution in _graded_pairs(root):
        given = {d for cell in exercise for d, _ in _definitions(cell_source(cell), minimum=1)}
        for index, cell in enumerate(solution, start=1):
            if "answer" not in cell_tags(cell):
                continue
            for tree, name in _definitions(cell_source(cell), minimum=1):
                if name not in TEACHABLE and tree not in given:
                    found.setdefault(tree, f"{entry.solution} cell {index}: {name}")
    public = {tree for text in _public_sources(root) for tree, _ in _definitions(text)}
    for path in _files(root / "tests" / "hidden"):
        if path.suffix != ".py":
            continue
        for tree, name in _definitions(path.read_text(encoding="utf-8", errors="replace")):
            if tree not in public:
                found.setdefault(tree, f"{path.relative_to(root)}: {name}")
    return found


def secret_values(root: Path | None = None) -> dict[str, str]:
    """The values the solutions' answer cells assign that the exercise does not (the quiz's
    answer key), as canonical JSON, mapped to where they come from; a dict's entries also one
    by one (``{"q05": 360}``), so that a part of the key copied elsewhere is found too."""
    root = root or repo_root()
    found: dict[str, str] = {}
    for entry, exercise, solution in _graded_pairs(root):
        given = {v for cell in exercise for v in _literals(cell_source(cell))}
        for index, cell in enumerate(solution, start=1):
            if "answer" in cell_tags(cell):
                for value in _literals(cell_source(cell)) - given:
                    found.setdefault(value, f"{entry.solution} cell {index}")
    return found


def _graded_pairs(root: Path) -> Iterator[tuple[Entry, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(entry, exercise cells, solution cells) of every build with a solution on disk."""
    for entry in load_manifest(root / "workbook.toml").entries:
        if not entry.solution or not (root / entry.solution).exists():
            continue
        exercise = read_notebook(root / entry.path)["cells"] if (root / entry.path).exists() else []
        yield entry, exercise, read_notebook(root / entry.solution)["cells"]


def _public_sources(root: Path) -> Iterator[str]:
    """The text of everything public in the repository: what the learner copy is built from."""
    for folder in ("exercises", "notebooks"):
        for notebook in sorted((root / folder).glob("*.ipynb")):
            for cell in read_notebook(notebook)["cells"]:
                yield cell_source(cell)
    for folder in ("etl", "workbook", "tests/visible"):
        for path in _files(root / folder):
            if path.suffix in (".py", ".toml", ".md", ".json"):
                yield path.read_text(encoding="utf-8", errors="replace")
    for name in ("workbook.toml", "README.md"):
        if (root / name).exists():
            yield (root / name).read_text(encoding="utf-8")


def _teachable_lines(source: str) -> set[str]:
    """The lines of `source` inside a `TEACHABLE` top-level definition."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    rows = source.splitlines()
    lines: set[str] = set()
    for node in tree.body:
        if isinstance(node, _DEFS) and node.name in TEACHABLE and node.end_lineno:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines.update(_lines("\n".join(rows[start - 1 : node.end_lineno])))
    return lines


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _definitions(source: str, minimum: int = 3) -> list[tuple[str, str]]:
    """(normalised tree, name) of every function and class in `source`, at any depth, with at
    least `minimum` statements (a stub's lone ``raise`` never counts); empty when it does not
    parse (a notebook cell with shell magics, say)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, _DEFS) and _substantial(node, minimum):
            found.append((_normalised(node), node.name))
    return found


def _substantial(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, minimum: int) -> bool:
    """At least `minimum` statements, and more than a stub's lone ``raise``."""
    body = _without_docstring(node.body)
    statements = sum(isinstance(n, ast.stmt) for stmt in body for n in ast.walk(stmt))
    if statements < minimum or all(isinstance(s, ast.Pass) for s in body):
        return False
    raises = [s for s in body if isinstance(s, ast.Raise)]
    return not (len(body) == 1 and raises)


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return body[1:]
    return body


def _normalised(node: ast.AST) -> str:
    node = copy.deepcopy(node)
    for part in ast.walk(node):
        if isinstance(part, _DEFS):
            part.body = _without_docstring(part.body) or [ast.Pass()]
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _literals(source: str) -> set[str]:
    """Canonical JSON of each literal list, tuple or dict of three items or more assigned in
    `source`, and of each entry of such a dict (as a one-entry dict) whose value is set."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if value is None:
            continue
        try:
            literal = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(literal, dict | list | tuple) and len(literal) >= 3:
            found.add(json.dumps(literal, sort_keys=True, default=repr))
        if isinstance(literal, dict):
            found.update(
                json.dumps({key: item}, sort_keys=True, default=repr)
                for key, item in literal.items()
                if item is not None
            )
    return found


def leaks(release: Path, root: Path | None = None) -> list[str]:
    """Every secret found in the release, as ``file: text (from where)``; empty is clean.

    Three scans: the secret text (`secrets`), a copy of a secret definition in any code
    (`secret_definitions`: Python files and notebook code cells, reformatted or not), and a
    secret value assigned anywhere (`secret_values`: the quiz's answer key)."""
    root = root or repo_root()
    hidden = secrets(root)
    definitions = secret_definitions(root)
    values = secret_values(root)
    problems = []
    for secret_dir in SECRET_DIRS:
        if (release / secret_dir).exists():
            problems.append(f"{secret_dir}/: shipped")
    for path in _files(release):
        text = path.read_text(encoding="utf-8", errors="replace")
        code: list[str] = [text] if path.suffix == ".py" else []
        if path.suffix == ".ipynb":
            # Notebook JSON escapes quotes and newlines; compare the decoded sources too.
            with contextlib.suppress(ExportError):
                cells = read_notebook(path)["cells"]
                text += "\n" + "\n".join(cell_source(c) for c in cells)
                code = [cell_source(c) for c in cells if c.get("cell_type") == "code"]
        shown = path.relative_to(release)
        for secret, origin in hidden.items():
            if secret in text:
                first = secret.splitlines()[0][:60]
                problems.append(f"{shown}: {first!r} (from {origin})")
        for source in code:
            for tree, name in _definitions(source, minimum=1):
                if tree in definitions:
                    problems.append(f"{shown}: a copy of {name} (from {definitions[tree]})")
            for value in _literals(source) & values.keys():
                problems.append(f"{shown}: the value {value[:60]} (from {values[value]})")
    return problems


def _lines(text: str) -> set[str]:
    return {
        line.strip()
        for line in text.splitlines()
        if len(line.strip()) >= MIN_SECRET_LINE and not line.strip().startswith("#")
    }


def _files(folder: Path) -> Iterator[Path]:
    if not folder.exists():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.release")
    parser.add_argument("--out", type=Path, default=Path("release"))
    args = parser.parse_args(argv)
    files = build(args.out)
    print(f"Wrote the learner copy to {args.out}/ ({len(files)} files).")
    problems = leaks(args.out)
    if problems:
        print(f"LEAK: {len(problems)} secret(s) in the release:")
        for problem in problems:
            print(f"  {problem}")
        return 1
    counts = (len(secrets()), len(secret_definitions()), len(secret_values()))
    print(
        "Checked for leaks: no solution, hidden test or answer in it"
        f" ({counts[0]} secret texts, {counts[1]} definitions, {counts[2]} answer values)."
    )
    print(f"Hand it out: cd {args.out} && make lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
