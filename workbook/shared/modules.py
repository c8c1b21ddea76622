"""The one way to run text as a fresh module, the one way to import a file by path, and the one
way to parse text to a tree (`parse`: safe from several threads).

`fresh_module` + `execute` run source text (a notebook's cells, exported answers, reference
seams) in a module of its own that nothing else shares; `registered` puts it in `sys.modules`
only while its code runs, because dataclasses and typing look a module up by name there. Each
call gives a new, independent module. `import_path` is for files that are code of ours (hidden
suites): imported once under a name, kept in `sys.modules`, the same object on a repeat.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import linecache
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path


def fresh_module(name: str, file: str | Path | None = None) -> types.ModuleType:
    """An empty module called `name` (with ``__file__`` when given), in no registry."""
    module = types.ModuleType(name)
    if file is not None:
        module.__file__ = str(file)
    return module


@contextlib.contextmanager
def registered(module: types.ModuleType) -> Iterator[types.ModuleType]:
    """`module` in `sys.modules` for the block, then gone (whatever was there before back)."""
    before = sys.modules.get(module.__name__)
    sys.modules[module.__name__] = module
    try:
        yield module
    finally:
        if before is None:
            sys.modules.pop(module.__name__, None)
        else:
            sys.modules[module.__name__] = before


def execute(module: types.ModuleType, source: str, filename: str) -> None:
    """Compile `source` on its own (a ``from __future__`` line applies to it alone, as in a
    kernel cell) and run it in `module`. Tracebacks can show its lines: they are put in
    `linecache` under `filename`. Exceptions propagate unchanged."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec", dont_inherit=True)
    exec(code, module.__dict__)


#: CPython 3.11.7 and older keep the AST converter's recursion depth in one global: two threads
#: parsing at once fail with "SystemError: AST constructor recursion depth mismatch" (CPython
#: gh-106905, fixed in 3.11.8). The grader parses in its pool's threads, so every parse of ours
#: goes through this one lock. Compiling text to code does not use the converter.
_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, safe to call from several threads at once (errors as `ast.parse`'s)."""
    with _PARSE_LOCK:
        return ast.parse(source, filename)


def import_path(path: str | Path, name: str) -> types.ModuleType:
    """Import the file at `path` as module `name`, once: a repeat returns the same module.
    A file that raises while importing leaves nothing behind in `sys.modules`."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be imported", path=str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
