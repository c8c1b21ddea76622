"""Mutants of Python source: small, plausible bugs made on purpose, one at a time.

A test that still passes when the code it tests is broken is not testing that code. `mutants`
breaks source text in the ways real code goes wrong, each mutant a single change on the
syntax tree, so that a learner's test (or a hidden suite) can be run against every one:

- ``delete``: a statement replaced by ``pass`` (a forgotten line);
- ``compare``: a comparison flipped (``==``/``!=``, ``<``/``>=``, ``in``/``not in``, ...);
- ``boolean``: ``True``/``False`` swapped, ``and``/``or`` swapped, a ``not`` dropped;
- ``constant``: a number moved by one (``0`` to ``1``, ``n`` to ``n + 1``), a string emptied;
- ``slice``: a slice bound dropped (``xs[1:]`` to ``xs[:]``);
- ``arguments``: the first two positional arguments of a call swapped;
- ``await``: an ``await`` removed (the coroutine is never run);
- ``except``: an ``except`` clause widened to ``BaseException`` or narrowed to ``KeyError``.

The same source always gives the same mutants, in the same order, with the same ids; each
mutant's `Mutant.source` parses. Comments and layout are not kept (`ast.unparse`), so a
mutant's `diff` is taken against the unparsed original and shows only the changed lines.
"""

from __future__ import annotations

import ast
import copy
import difflib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from workbook.shared.modules import parse

OPERATORS = ("delete", "compare", "boolean", "constant", "slice", "arguments", "await", "except")

_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    """One deliberate bug: which operator, where (1-based line of the original), what changed."""

    id: str
    operator: str
    line: int
    description: str
    source: str
    original: str

    @property
    def diff(self) -> str:
        """The changed lines, ``-`` the original and ``+`` the mutant (no file headers)."""
        lines = difflib.unified_diff(
            self.original.splitlines(), self.source.splitlines(), lineterm="", n=0
        )
        return "\n".join(ln for ln in lines if not ln.startswith(("---", "+++", "@@")))


# A site is a node that can be changed, and a function that changes (a copy of) it in place.
_Change = Callable[[ast.AST], str]
_Site = tuple[str, ast.AST, _Change, int]


def _sites(tree: ast.AST, operators: Sequence[str]) -> Iterator[_Site]:
    for operator, node, change in _raw_sites(tree, operators):
        line: int = getattr(change, "line", 0) or getattr(node, "lineno", 0)
        yield operator, node, change, line


def _raw_sites(tree: ast.AST, operators: Sequence[str]) -> Iterator[tuple[str, ast.AST, _Change]]:
    docstrings = {
        id(body[0].value)
        for parent in ast.walk(tree)
        if isinstance(body := getattr(parent, "body", None), list)
        and body
        and _is_docstring(body[0], 0, parent)
    }
    for node in ast.walk(tree):
        if "delete" in operators:
            yield from _delete_sites(node)
        if "compare" in operators:
            yield from _compare_sites(node)
        if "boolean" in operators:
            yield from _boolean_sites(node)
        if (
            "constant" in operators
            and isinstance(node, ast.Constant)
            and id(node) not in docstrings
        ):
            yield from _constant_sites(node)
        if "slice" in operators:
            yield from _slice_sites(node)
        if (
            "arguments" in operators
            and isinstance(node, ast.Call)
            and len(node.args) >= 2
            and not any(isinstance(a, ast.Starred) for a in node.args[:2])
        ):
            yield "arguments", node, _swap_arguments
        if "await" in operators and isinstance(node, ast.Await):
            yield "await", node, _mark_unawait
        if "except" in operators and isinstance(node, ast.ExceptHandler):
            yield "except", node, _widen
            yield "except", node, _narrow


def _compare_sites(node: ast.AST) -> Iterator[tuple[str, ast.AST, _Change]]:
    """Each comparison operator of `node` that has a flip."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _FLIP:
                yield "compare", node, _flip_compare(i)


def _slice_sites(node: ast.AST) -> Iterator[tuple[str, ast.AST, _Change]]:
    """Each bound a slice `node` gives, to drop."""
    if isinstance(node, ast.Slice):
        for bound in ("lower", "upper", "step"):
            if getattr(node, bound) is not None:
                yield "slice", node, _drop_bound(bound)


def _delete_sites(node: ast.AST) -> Iterator[tuple[str, ast.AST, _Change]]:
    for field in ("body", "orelse", "finalbody"):
        body = getattr(node, field, None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            if isinstance(stmt, ast.Pass) or _is_docstring(stmt, i, node):
                continue
            change = _delete(field, i)
            change.line = stmt.lineno  # type: ignore[attr-defined]  # where the line was
            yield "delete", node, change


def _is_docstring(stmt: ast.stmt, index: int, parent: ast.AST) -> bool:
    return (
        index == 0
        and isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
        and isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _delete(field: str, index: int) -> _Change:
    def change(node: ast.AST) -> str:
        body: list[ast.stmt] = getattr(node, field)
        stmt = body[index]
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            what = f"{'class' if isinstance(stmt, ast.ClassDef) else 'def'} {stmt.name}"
        else:
            what = ast.unparse(stmt).splitlines()[0]
        body[index] = ast.copy_location(ast.Pass(), body[index])
        return f"deleted `{_short(what)}`"

    return change


def _flip_compare(index: int) -> _Change:
    def change(node: ast.AST) -> str:
        assert isinstance(node, ast.Compare)
        before = ast.unparse(node)
        node.ops[index] = _FLIP[type(node.ops[index])]()
        return f"`{_short(before)}` became `{_short(ast.unparse(node))}`"

    return change


def _boolean_sites(node: ast.AST) -> Iterator[tuple[str, ast.AST, _Change]]:
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "boolean", node, _negate_constant
    if isinstance(node, ast.BoolOp):
        yield "boolean", node, _swap_boolop
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "boolean", node, _drop_not


def _negate_constant(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant)
    node.value = not node.value
    return f"`{not node.value}` became `{node.value}`"


def _swap_boolop(node: ast.AST) -> str:
    assert isinstance(node, ast.BoolOp)
    before = ast.unparse(node)
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    return f"`{_short(before)}` became `{_short(ast.unparse(node))}`"


def _drop_not(node: ast.AST) -> str:
    assert isinstance(node, ast.UnaryOp)
    before = ast.unparse(node)
    node.__dict__["_drop_not"] = True  # `_Finish` puts the operand in its place
    return f"`{_short(before)}` lost its `not`"


def _constant_sites(node: ast.Constant) -> Iterator[tuple[str, ast.AST, _Change]]:
    value = node.value
    if type(value) is int or type(value) is float:
        yield "constant", node, _bump
    elif type(value) is str and value and not value.isspace():
        yield "constant", node, _empty_string


def _bump(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant)
    before = node.value
    assert type(before) is int or type(before) is float
    node.value = 1 if before == 0 else before + 1
    return f"`{before!r}` became `{node.value!r}`"


def _empty_string(node: ast.AST) -> str:
    assert isinstance(node, ast.Constant)
    before = node.value
    node.value = ""
    return f"`{_short(repr(before))}` became `''`"


def _drop_bound(bound: str) -> _Change:
    def change(node: ast.AST) -> str:
        assert isinstance(node, ast.Slice)
        before = ast.unparse(node)
        setattr(node, bound, None)
        return f"slice `{before}` became `{ast.unparse(node) or ':'}`"

    return change


def _swap_arguments(node: ast.AST) -> str:
    assert isinstance(node, ast.Call)
    before = ast.unparse(node)
    node.args[0], node.args[1] = node.args[1], node.args[0]
    return f"`{_short(before)}` became `{_short(ast.unparse(node))}`"


def _mark_unawait(node: ast.AST) -> str:
    assert isinstance(node, ast.Await)
    node.__dict__["_unawait"] = True
    return f"`{_short(ast.unparse(node))}` lost its `await`"


def _widen(node: ast.AST) -> str:
    assert isinstance(node, ast.ExceptHandler)
    before = ast.unparse(node.type) if node.type is not None else "everything"
    node.type = ast.Name("BaseException", ast.Load())
    return f"`except {before}` widened to `except BaseException`"


def _narrow(node: ast.AST) -> str:
    assert isinstance(node, ast.ExceptHandler)
    before = ast.unparse(node.type) if node.type is not None else "everything"
    node.type = ast.Name("KeyError", ast.Load())
    return f"`except {before}` narrowed to `except KeyError`"


class _Finish(ast.NodeTransformer):
    """Replace the marks the changes left (a dropped ``not``, a removed ``await``)."""

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        return node.operand if node.__dict__.get("_drop_not") else node

    def visit_Await(self, node: ast.Await) -> ast.AST:
        self.generic_visit(node)
        return node.value if node.__dict__.get("_unawait") else node


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def mutants(
    source: str,
    *,
    operators: Sequence[str] = OPERATORS,
    within: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Mutant]:
    """Every single-change mutant of `source` (optionally only inside the top-level
    functions and classes named in `within`), in a fixed order, at most `limit`.

    Mutants identical in text to the original (or to an earlier mutant) are left out."""
    for op in operators:
        if op not in OPERATORS:
            raise ValueError(f"unknown mutation operator {op!r} (known: {', '.join(OPERATORS)})")
    tree = parse(source)
    original = ast.unparse(tree)
    roots: list[ast.AST] = (
        [tree]
        if within is None
        else [
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and n.name in within
        ]
    )
    found: list[Mutant] = []
    seen = {original}
    for root in roots:
        for index, (operator, node, change, line) in enumerate(_sites(root, operators)):
            mutated = copy.deepcopy(tree)
            target = _same_node(tree, mutated, node)
            description = change(target)
            text = ast.unparse(ast.fix_missing_locations(_Finish().visit(mutated)))
            if text in seen:
                continue
            seen.add(text)
            name = getattr(root, "name", "module")
            found.append(
                Mutant(
                    id=f"{name}:{operator}:{line}:{index}",
                    operator=operator,
                    line=line,
                    description=description,
                    source=text,
                    original=original,
                )
            )
            if limit is not None and len(found) >= limit:
                return found
    return found


def _same_node(tree: ast.AST, copied: ast.AST, node: ast.AST) -> ast.AST:
    """The node of `copied` at the position `node` has in `tree` (walk orders match)."""
    for a, b in zip(ast.walk(tree), ast.walk(copied), strict=True):
        if a is node:
            return b
    raise LookupError("node not in tree")
