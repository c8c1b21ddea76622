"""The leak scan of the learner copy: nothing of the instructor's half may be in it, in any form.

`leaks(release)` lists every secret found in a built copy, as ``file: what (from where)``:

- secret text (`secrets`): a solution's answer cell whole, its lines and comments that nothing
  public shows, the hidden suites' lines;
- a copy of a secret definition in any code, however reformatted (`secret_definitions`);
- a secret value assigned anywhere (`secret_values`);
- a quiz answer as a JSON or Python literal, however spaced, anywhere in any text: code,
  docstrings, comments, markdown (`answer_forms`);
- a build's answer defined anywhere but the exercises and the concept notebooks that teach
  it (`answer_names`, `taught_names`).

Everything is computed from the repository's own solutions and hidden suites, so a new answer
is scanned for without a list to keep. Scanning twice gives the same list.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbook.shared import buildfolder
from workbook.shared.errors import ExportError
from workbook.shared.export import cell_source, cell_tags, read_notebook
from workbook.shared.manifest import Entry, load_manifest, repo_root
from workbook.shared.modules import parse

#: Instructor-only material: never copied, and scanned for leaks.
SECRET_DIRS = ("grader", "solutions")
#: And every file of ``builds/`` but the visible half (`workbook.shared.buildfolder.secret`).
#: A solution line shorter than this is too generic to call a leak (``return total``).
MIN_SECRET_LINE = 24

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
            for path in buildfolder.shipped(root)
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
            # A solution's comments explain its answer ("3 loads x 120"): secret text too.
            for line in (_lines(source) - _teachable_lines(source)) | _comments(source):
                if line not in given and line not in taught:
                    found[line] = where
    public = "\n".join(_public_sources(root))
    public_lines = _lines(public)
    for path in buildfolder.secret(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for line in (_lines(text) - public_lines) | _comments(text):
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
    for path in buildfolder.secret(root):
        if path.suffix != ".py":
            continue
        for tree, name in _definitions(path.read_text(encoding="utf-8", errors="replace")):
            if tree not in public:
                found.setdefault(tree, f"{path.relative_to(root)}: {name}")
    return found


def secret_values(root: Path | None = None) -> dict[str, str]:
    """The values the solutions' answer cells assign that the exercise does not (the quiz's
    answer key), as canonical JSON, mapped to where they come from; a dict's entries also one
    by one (``{"q99": 7}``), so that a part of the key copied elsewhere is found too."""
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
    for path in [p for f in ("etl", "workbook") for p in _files(root / f)] + buildfolder.shipped(
        root
    ):
        if path.suffix in (".py", ".toml", ".md", ".json"):
            yield path.read_text(encoding="utf-8", errors="replace")
    for name in ("workbook.toml", "README.md"):
        if (root / name).exists():
            yield (root / name).read_text(encoding="utf-8")


def _teachable_lines(source: str) -> set[str]:
    """The lines of `source` inside a `TEACHABLE` top-level definition."""
    tree = _parse(source)
    if tree is None:
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
    tree = _parse(source)
    if tree is None:
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
    """`node` dumped without docstrings: the bodies are swapped for the dump and put back
    (parsed trees are shared through `_parse`, and a deep copy of each costs seconds)."""
    swapped = []
    for part in ast.walk(node):
        if isinstance(part, _DEFS):
            swapped.append((part, part.body))
            part.body = _without_docstring(part.body) or [ast.Pass()]
    try:
        return ast.dump(node, annotate_fields=False, include_attributes=False)
    finally:
        for part, body in swapped:
            part.body = body


@functools.lru_cache(maxsize=8192)
def _parse(source: str) -> ast.Module | None:
    """`source`'s syntax tree, parsed once per text; None when it does not parse (a cell with
    shell magics, say). Callers must leave the tree as they found it."""
    try:
        return parse(source)
    except (SyntaxError, ValueError):
        return None


def _literals(source: str) -> set[str]:
    """Canonical JSON of each literal list, tuple or dict of three items or more assigned in
    `source`, and of each entry of such a dict (as a one-entry dict) whose value is set."""
    tree = _parse(source)
    if tree is None:
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


def answer_forms(root: Path | None = None) -> dict[str, str]:
    """Each answer of the quiz's solution (an entry of a literal dict its answer cells assign
    that the exercise does not) as the literals that could carry it, written without spaces,
    quotes as ``"``: ``"q05":360`` (a JSON or Python dict entry) and ``q05=360`` (a keyword),
    a list also as a tuple; mapped to where it comes from. `leaks` looks for them in every
    file's text with its whitespace removed: code, docstrings, comments, prose."""
    root = root or repo_root()
    found: dict[str, str] = {}
    for entry, exercise, solution in _graded_pairs(root):
        if entry.kind != "quiz":
            continue
        given = {v for cell in exercise for v in _literals(cell_source(cell))}
        for index, cell in enumerate(solution, start=1):
            if "answer" not in cell_tags(cell):
                continue
            for key, value in _dict_entries(cell_source(cell)):
                if value is None or json.dumps({key: value}, sort_keys=True) in given:
                    continue
                compact = json.dumps(value, separators=(",", ":"))
                values = [compact]
                if isinstance(value, list):
                    values.append(f"({compact[1:-1]}{',' if len(value) == 1 else ''})")
                for shown in values:
                    found[f'"{key}":{shown}'] = f"{entry.solution} cell {index}"
                    found[f"{key}={shown}"] = f"{entry.solution} cell {index}"
    return found


def _dict_entries(source: str) -> list[tuple[str, Any]]:
    """(key, value) of every string-keyed entry of every literal dict assigned in `source`."""
    tree = _parse(source)
    if tree is None:
        return []
    entries: list[tuple[str, Any]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError, RecursionError):
                literal = ast.literal_eval(node.value)
                if isinstance(literal, dict):
                    entries.extend((k, v) for k, v in literal.items() if isinstance(k, str))
    return entries


def _flat(text: str) -> str:
    """`text` as `answer_forms` are written: no whitespace, one kind of quote, and JSON's
    escaped quotes (a notebook's raw text) unescaped."""
    return re.sub(r"\s+", "", text).replace('\\"', '"').replace("'", '"')


def answer_names(root: Path | None = None) -> dict[str, str]:
    """The functions and classes the solutions' answer cells define at their top level (a
    build's answers), each mapped to the build that asks for it."""
    root = root or repo_root()
    return {
        name: f"build {entry.number}'s answer `{name}`"
        for entry, _, solution in _graded_pairs(root)
        for cell in solution
        if "answer" in cell_tags(cell)
        for name in _top_level(cell_source(cell))
    }


def taught_names(root: Path | None = None) -> set[tuple[str, str]]:
    """(concept notebook, name) for every function or class a concept notebook of the
    repository defines: where showing a build's answer is the lesson, not a leak."""
    root = root or repo_root()
    return {
        (notebook.relative_to(root).as_posix(), name)
        for notebook in sorted((root / "notebooks").glob("*.ipynb"))
        for cell in read_notebook(notebook)["cells"]
        if cell.get("cell_type") == "code"
        for name in _top_level(cell_source(cell))
    }


def _top_level(source: str) -> set[str]:
    """Names of the functions and classes `source` defines at its top level, stubs aside."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {n.name for n in tree.body if isinstance(n, _DEFS) and _substantial(n, 1)}


def leaks(release: Path, root: Path | None = None) -> list[str]:
    """Every secret found in the release, as ``file: text (from where)``; empty is clean.

    Five scans: the secret text (`secrets`), a copy of a secret definition in any code
    (`secret_definitions`: Python files and notebook code cells, reformatted or not), a
    secret value assigned anywhere (`secret_values`), a quiz answer as a literal anywhere in
    any text (`answer_forms`), and a build's answer defined anywhere but the exercises and
    the concept notebooks that teach it (`answer_names`, `taught_names`)."""
    root = root or repo_root()
    hidden = secrets(root)
    definitions = secret_definitions(root)
    values = secret_values(root)
    forms = answer_forms(root)
    names, taught = answer_names(root), taught_names(root)
    problems = []
    for secret_dir in SECRET_DIRS:
        if (release / secret_dir).exists():
            problems.append(f"{secret_dir}/: shipped")
    problems += [f"{p.relative_to(release)}: shipped" for p in buildfolder.secret(release)]
    for path in _files(release):
        text, code = _texts(path)
        shown = path.relative_to(release)
        for secret, origin in hidden.items():
            if secret in text:
                first = secret.splitlines()[0][:60]
                problems.append(f"{shown}: {first!r} (from {origin})")
        flat = _flat(text)
        for form, origin in forms.items():
            if form in flat:
                problems.append(f"{shown}: the quiz answer {form} (from {origin})")
        exercise = "exercises" in shown.parts[:2]  # exercises/ and .pristine/exercises/
        for source in code:
            problems += _code_leaks(shown, source, definitions, values)
            if not exercise:
                problems += _answer_leaks(shown, source, names, taught)
    return problems


def _texts(path: Path) -> tuple[str, list[str]]:
    """A shipped file's text and the code in it: a Python file is all code; a notebook's
    JSON is followed by its decoded cell sources (JSON escapes quotes and newlines), and its
    code is its code cells."""
    text = path.read_text(encoding="utf-8", errors="replace")
    code: list[str] = [text] if path.suffix == ".py" else []
    if path.suffix == ".ipynb":
        with contextlib.suppress(ExportError):
            cells = read_notebook(path)["cells"]
            text += "\n" + "\n".join(cell_source(c) for c in cells)
            code = [cell_source(c) for c in cells if c.get("cell_type") == "code"]
    return text, code


def _code_leaks(
    shown: Path, source: str, definitions: dict[str, str], values: dict[str, str]
) -> list[str]:
    """A secret definition copied into `source`, or a secret value assigned in it."""
    problems = [
        f"{shown}: a copy of {name} (from {definitions[tree]})"
        for tree, name in _definitions(source, minimum=1)
        if tree in definitions
    ]
    for value in _literals(source) & values.keys():
        problems.append(f"{shown}: the value {value[:60]} (from {values[value]})")
    return problems


def _answer_leaks(
    shown: Path, source: str, names: dict[str, str], taught: set[tuple[str, str]]
) -> list[str]:
    """A build's answer defined in `source` of a file that is not the exercise, unless it is
    a concept notebook that teaches it."""
    return [
        f"{shown}: defines {names[name]} (only the exercise, or a concept"
        " notebook that teaches it, may)"
        for name in sorted(_top_level(source) & names.keys())
        if (shown.as_posix(), name) not in taught
    ]


def _comments(source: str) -> set[str]:
    """The text of each comment in `source` of at least `MIN_SECRET_LINE` characters."""
    found = set()
    for line in source.splitlines():
        _, hash_, comment = line.partition("#")
        if hash_ and len(comment.strip()) >= MIN_SECRET_LINE:
            found.add(comment.strip())
    return found


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
