"""An earlier build's seams, for a later build's setup cell: ``build03 = load_sibling("03")``.

Build 05 runs on build 03's `with_retry`, `RetryPolicy`, `IdempotentSink` and `content_key`, so
a learner's source runs on their own retry loop and sink. Its setup cell loads the build 03
notebook *next to it*, through the one export path (`workbook.load`): ``exercises/05…`` loads
``exercises/03…`` and ``solutions/05…`` loads ``solutions/03…``. Where "next to it" is:

1. ``near=``, when given (a notebook, or a folder);
2. else the folder of the notebook being loaded, when the caller is a module `workbook.load`
   made (it carries ``__notebook__``): visible tests, ``make progress``, self-checks;
3. else, when the caller is exported text with no notebook behind it (what the grader runs),
   the *reference seams* registered for that build with `use_reference`, if any;
4. else the working directory: a Jupyter kernel runs in its notebook's folder.

Case 3 is how the grader grades each build alone: build 05's hidden probes register the
reference solution of build 03 (kept with the hidden suites, never released), so an unfinished
build 03 does not zero build 05. Nothing else registers one, so in a kernel, a visible test or
``make progress`` a learner's build always runs on their own earlier build.

Every call returns a fresh module (nothing cached), read from the *saved* file: loading twice
gives two independent modules, and a learner sees an edit of build 03 once it is saved.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

from workbook.shared.errors import ExportError, WorkbookError
from workbook.shared.export import load
from workbook.shared.manifest import load_manifest
from workbook.shared.modules import execute, fresh_module, registered

_references: dict[str, Path] = {}
_loading = threading.local()
_fresh = itertools.count(1)


def use_reference(build: str, path: str | Path | None) -> None:
    """Register `path` (exported text, ``.py``, or a notebook) as build `build`'s reference
    seams for callers with no notebook behind them; None forgets it. Registering the same
    path twice changes nothing."""
    if path is None:
        _references.pop(build, None)
    else:
        _references[build] = Path(path).resolve()


def reference_for(build: str) -> Path | None:
    """The reference seams registered for `build`, if any."""
    return _references.get(build)


def references() -> dict[str, Path]:
    """Every registered reference, by build (a copy): what the grader must keep readable,
    and hash into a grade's cache key."""
    return dict(_references)


@contextlib.contextmanager
def reference_seams(build: str, path: str | Path) -> Iterator[Path]:
    """``with reference_seams("03", path):`` registers `path` for the block, then restores
    whatever was registered before."""
    before = _references.get(build)
    use_reference(build, path)
    try:
        yield _references[build]
    finally:
        use_reference(build, before)


def load_sibling(build: str, *, near: str | Path | None = None) -> types.ModuleType:
    """Build `build`'s setup and answer cells as a fresh module, from the notebook next to
    the caller's (see the module docstring for where that is), or the registered reference
    seams for exported text with no notebook behind it.

    Raises `ExportError` in one line when there is no such notebook, more than one, or it
    does not load (naming its cell).
    """
    caller = sys._getframe(1).f_globals
    notebook = caller.get("__notebook__")
    if near is not None:
        folder = Path(near)
        folder = folder.parent if folder.suffix == ".ipynb" else folder
    elif isinstance(notebook, str):
        folder = Path(notebook).parent
    elif build in _references:
        return _load_reference(build, _references[build])
    else:
        folder = Path.cwd()
    return _load_notebook(build, sibling_path(folder, build))


def sibling_path(folder: Path, build: str) -> Path:
    """The build `build` notebook in `folder`: the manifest's file name when it is there,
    else the only ``{build}_*.ipynb`` (a renamed copy still works; two are ambiguous)."""
    found = sorted(p for p in folder.glob(f"{build}_*.ipynb") if p.is_file())
    if not found:
        raise ExportError(
            f"{folder}: no build {build} notebook here ({build}_*.ipynb), and this build"
            f" loads build {build}'s answers from the notebook next to it"
        )
    names = _manifest_names(build)
    for path in found:
        if path.name in names:
            return path.resolve()
    if len(found) == 1:
        return found[0].resolve()
    listed = ", ".join(p.name for p in found)
    raise ExportError(
        f"{folder}: {len(found)} build {build} notebooks ({listed}); keep the one you work in"
    )


def _manifest_names(build: str) -> set[str]:
    try:
        entry = load_manifest().entry(build)
    except WorkbookError:
        return set()
    return {Path(p).name for p in (entry.path, entry.solution) if p}


def _load_notebook(build: str, path: Path) -> types.ModuleType:
    with _guard(build, path):
        try:
            return load(path)
        except ExportError as exc:
            raise ExportError(f"loading build {build} from {path.name}: {exc}") from exc.__cause__


def _load_reference(build: str, path: Path) -> types.ModuleType:
    """The reference seams as a fresh module: exported text, or a notebook."""
    if path.suffix == ".ipynb":
        return _load_notebook(build, path)
    with _guard(build, path):
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ExportError(
                f"{path}: the reference seams of build {build} cannot be read: {exc}"
            ) from None
        module = fresh_module(f"reference_seams_{build}_{next(_fresh)}", path)
        with registered(module):
            try:
                execute(module, source, str(path))
            except Exception as exc:
                raise ExportError(
                    f"{path}: the reference seams of build {build} raised"
                    f" {type(exc).__name__}: {exc}"
                ) from exc
        return module


@contextlib.contextmanager
def _guard(build: str, path: Path) -> Iterator[None]:
    # A notebook that loads itself (or two that load each other) would recurse until Python
    # gives up; say what happened instead.
    stack: list[Path] = _loading.__dict__.setdefault("stack", [])
    if path in stack:
        chain = " -> ".join(p.name for p in [*stack, path])
        raise ExportError(f"build {build} loads itself in a loop: {chain}")
    stack.append(path)
    try:
        yield
    finally:
        stack.pop()
