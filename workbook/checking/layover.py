"""One verdict on a learner's test, shared by the self-check and the grader.

A test earns trust only by failing when the code is wrong and passing whenever it is right.
Both halves are defined here once, as source text run after the code under test:

- a **laid-over bug** (`LaidOver`) is a bug of a build's ``catches`` list made by wrapping a
  seam through its public interface (dropping, repeating or altering the calls and values that
  cross it), never by editing its body, so the same bug lies over the learner's code in the
  self-check and over the reference at grading. It holds no statement that completes a stub.
- a **wheat** is a correct implementation. The self-check makes a second one from the
  learner's own code (`same_behaviour`: locals renamed, recompiled, every function and method
  the answers define behind a wrapper), and both sides lay the seam's *contract variants* over it
  (wrappers that change only what the contract leaves free). A test that pins byte code,
  constants, source text, identity or a free behaviour fails a wheat, and earns nothing.

`score` turns what was seen into points and words, the same on both sides:
``points * caught // len(catches)``, and 0 when the test fails any wheat or misses the gate.
Calling any of it twice gives the same result.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workbook.shared.modules import parse

#: What both sides say of a test that takes arguments: nothing supplies them.
NO_FIXTURES = (
    "a test here is called with no arguments: pytest's fixtures (tmp_path, monkeypatch) are"
    " not supplied; make what it needs inside it, e.g. with tempfile.TemporaryDirectory()"
)

#: Real seconds one learner test may take on one variant, wheat or chaff, on both sides: past
#: it the run is "not passed" (on a wheat the test loses its points, on a chaff the bug counts
#: as caught), so the self-check and the grader must draw the line at the same place.
RUN_SECONDS = 3.0


@dataclass(frozen=True)
class LaidOver:
    """A behaviour laid over any implementation of a seam: `source` runs after the code it
    wraps and rebinds the seam's names. `words` say it as feedback does ("the sink forgets
    the keys it wrote"); `visible_when` says what input shows it."""

    name: str
    words: str
    source: str
    visible_when: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", seal(self.source))


#: The name of the function every layer runs in (see `seal`).
LAYER = "_laid_layer"


def seal(text: str) -> str:
    """`text` run inside a function of its own, so that the only module names it leaves are
    the names it rebinds (the seams), each bound first to what the module holds: a layer's
    helpers (imports, classes, counters) never show among a module's names, and every layer,
    a bug or a neutral one, leaves the same names behind. Sealing twice changes nothing."""
    if text.startswith(f"def {LAYER}():"):
        return text
    text = text if text.endswith("\n") else text + "\n"
    tree = parse(text)
    bound: list[str] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.append(node.name)
        bound.extend(t.id for t in targets if isinstance(t, ast.Name))
    seams = [n for n in dict.fromkeys(bound) if not n.lower().startswith(("_laid", "__"))]
    head = "".join(f"    {n} = globals().get({n!r})\n" for n in seams)
    out = ", ".join(f"{n!r}: {n}" for n in seams)
    body = textwrap.indent(text, "    ")
    tail = f"    return {{{out}}}\nglobals().update({LAYER}())\ndel {LAYER}\n"
    return f"def {LAYER}():\n{head}{body}{tail}"


def over(name: str, definition: str) -> str:
    """Source that rebinds `name` to what `definition` defines under that name; there,
    ``under`` is the binding it replaces (taken now, so layers stack: a bug laid over a
    contract variant wraps the variant)."""
    body = textwrap.indent(definition, "    ")
    return f"def _laid(under):\n{body}    return {name}\n{name} = _laid({name})\ndel _laid\n"


# ───────────────────────────────────────────────── a second wheat from the learner's code

#: Run after the answers of a same-behaviour variant: every function and method of the named
#: seams goes behind a wrapper of its own kind, so no code object, constant or identity of the
#: learner's survives, while every call behaves as before.
_WRAP_SEAMS = """
def __wrap_seams__(names):
    import inspect

    def wrap(fn):
        if inspect.isasyncgenfunction(fn):
            async def wrapped(*args, **kwargs):
                async for value in fn(*args, **kwargs):
                    yield value
        elif inspect.iscoroutinefunction(fn):
            async def wrapped(*args, **kwargs):
                return await fn(*args, **kwargs)
        elif inspect.isgeneratorfunction(fn):
            def wrapped(*args, **kwargs):
                return (yield from fn(*args, **kwargs))
        else:
            def wrapped(*args, **kwargs):
                return fn(*args, **kwargs)
        return wrapped

    space = globals()
    for name in names:
        seam = space.get(name)
        if isinstance(seam, type):
            for attr, value in list(vars(seam).items()):
                if isinstance(value, classmethod):
                    setattr(seam, attr, classmethod(wrap(value.__func__)))
                elif isinstance(value, staticmethod):
                    setattr(seam, attr, staticmethod(wrap(value.__func__)))
                elif inspect.isfunction(value):
                    setattr(seam, attr, wrap(value))
        elif inspect.isfunction(seam):
            space[name] = wrap(seam)


__wrap_seams__({names!r})
del __wrap_seams__
"""


def wrap_seams(seams: Sequence[str]) -> str:
    """Source that puts every function of `seams` behind a behaviour-preserving wrapper."""
    return _WRAP_SEAMS.replace("{names!r}", repr(list(seams)))


def defined_names(texts: Sequence[str]) -> list[str]:
    """The functions and classes `texts` (answer cells) define at their top level, in order."""
    names: list[str] = []
    for text in texts:
        try:
            tree = parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.append(node.name)
    return list(dict.fromkeys(names))


def same_behaviour(text: str, seams: Sequence[str]) -> str:
    """`text` (an answer cell) with the locals of every function of `seams` renamed; the text
    itself when it cannot be parsed or holds no such function. Names a function reaches by
    ``global``/``nonlocal``, ``locals()``, ``eval`` or ``exec`` keep theirs."""
    try:
        tree = parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text
    changed = False
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in seams:
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    changed |= _rename_locals(inner)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in seams:
            changed |= _rename_locals(node)
    if not changed:
        return text
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


_DYNAMIC = frozenset({"locals", "vars", "eval", "exec", "globals", "dir"})


def _rename_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = _renamable(fn)
    if not names:
        return False
    renames = {n: f"{n}_w" for n in sorted(names)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in renames:
            node.id = renames[node.id]
        elif (
            isinstance(node, ast.ExceptHandler | ast.FunctionDef | ast.AsyncFunctionDef)
            and node is not fn
            and node.name is not None
            and node.name in renames
        ):
            node.name = renames[node.name]
    return True


def _params(args: ast.arguments) -> set[str]:
    """Every parameter name of one signature."""
    every = (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
    return {a.arg for a in every if a is not None}


def _renamable(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names `fn` binds as its own locals (not its parameters, not declared global or
    nonlocal, not an inner function's parameters, no dunders); none at all when its names
    cannot be told apart safely (a dynamic name lookup, a match pattern, a class body)."""
    declared: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared.update(node.names)
        elif isinstance(node, ast.Name):
            if node.id in _DYNAMIC:
                return set()
            if isinstance(node.ctx, ast.Store | ast.Del):
                bound.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchAs | ast.MatchStar | ast.MatchMapping):
            return set()
        elif isinstance(node, ast.ClassDef):
            return set()  # a class body's names are attributes, not locals
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and (
            node is not fn
        ):
            if not isinstance(node, ast.Lambda):
                bound.add(node.name)
            declared |= _params(node.args)
    return {n for n in bound - _params(fn.args) - declared if not n.startswith("__")}


# ───────────────────────────────────────────────── the verdict


@dataclass(frozen=True)
class Verdict:
    """A learner test's points and the words that explain them. `done` exactly when the
    points are full."""

    points: int
    max_points: int
    lines: tuple[str, ...] = ()
    problem: str = ""
    """Why nothing was earned before any bug was tried (not written, fails a wheat, ...)."""
    caught: Mapping[str, bool] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.points == self.max_points and not self.problem


def score(
    *,
    points: int,
    catches: Sequence[str],
    gate: str,
    caught: Mapping[str, bool],
    words: Mapping[str, str],
    wheat_failure: str = "",
) -> Verdict:
    """The points of a test from what it caught: 0 when it failed a wheat (`wheat_failure`
    says how) or missed the gate; else ``points * caught // len(catches)``. A bug absent from
    `caught` was not tried, which counts as missed."""
    if wheat_failure:
        return Verdict(0, points, problem=wheat_failure, caught=dict(caught))
    missed = [b for b in catches if not caught.get(b, False)]
    if gate in missed:
        line = (
            f"it still passes when {words.get(gate, gate)}: the bug it must catch first."
            " Put that bug in your own code on purpose, once, and watch the test fail."
        )
        return Verdict(0, points, (line,), caught=dict(caught))
    got = points * (len(catches) - len(missed)) // len(catches)
    lines = [f"it still passes when {words.get(b, b)}" for b in missed]
    return Verdict(got, points, tuple(lines), caught=dict(caught))
