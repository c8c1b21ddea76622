"""Store notebooks byte for byte as this venv's JupyterLab saves them.

Invariant: a notebook written here, opened in JupyterLab (`make lab`) and saved without a
change, comes back identical, so opening and closing never asks to save and `git status` stays
clean. Running it twice changes nothing the second time (the check mode proves it).

What JupyterLab writes, and so what is stored here:
- ``kernelspec``: the name, display name and language of this venv's ``python3`` kernel;
- ``language_info``: what that kernel reports (its Python version among it), in full;
- no ``execution`` timestamps in cell metadata (nbclient records them; JupyterLab only keeps
  whatever is there, so they would change on every re-run and never mean anything);
- numbers as JavaScript gives them back: the notebook travels through the browser, where
  ``5.0`` is ``5``, so a whole float (an ipywidgets slider's ``value``) is stored as an int;
- the JSON as Jupyter Server writes it (``nbformat.write``: sorted keys, one-space indent,
  sources split into lines, a final newline).

Usage (from the repo root, with the venv's interpreter, whose Python version is the one stored):

    .venv/bin/python scripts/normalize_notebooks.py            # every notebook of the arc
    .venv/bin/python scripts/normalize_notebooks.py --check    # exit 1 naming any not stored so
    .venv/bin/python scripts/normalize_notebooks.py PATH ...   # just these

Re-run it after anything else writes a notebook (nbclient re-executing a concept notebook,
``nbconvert --inplace``, ``ruff format``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Folders whose top-level notebooks are the arc's (checkpoints and backups are not).
FOLDERS = ("notebooks", "exercises", "solutions")
#: Beyond this, JavaScript writes a whole number with an exponent and it stays a float.
JS_EXPONENT_FROM = 1e21


@cache
def kernel_metadata() -> dict[str, dict[str, Any]]:
    """``kernelspec`` and ``language_info`` exactly as JupyterLab records them on this venv."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    return {
        "kernelspec": {
            "display_name": spec.display_name,
            "language": spec.language,
            "name": "python3",
        },
        "language_info": dict(IPythonKernel.language_info),
    }


def as_javascript(value: Any) -> Any:
    """`value` with every whole float turned into the int a browser's JSON would give."""
    if isinstance(value, float) and value.is_integer() and abs(value) < JS_EXPONENT_FROM:
        return int(value)
    if isinstance(value, dict):
        return {key: as_javascript(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_javascript(item) for item in value]
    return value


def normalized(text: str) -> str:
    """The notebook `text` as JupyterLab would save it; the same text on a repeat."""
    # Imported here: nbformat takes 1.3 s to import (rfc3987_syntax builds its grammar), and
    # the unit tests import this module to list the arc's notebooks.
    import nbformat

    # Read and written as Jupyter Server reads and writes a notebook it saves.
    notebook: Any = nbformat.reads(text, as_version=4)  # type: ignore[no-untyped-call]
    notebook.metadata.update(kernel_metadata())
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
    notebook = nbformat.from_dict(as_javascript(notebook))  # type: ignore[no-untyped-call]
    written: str = nbformat.writes(notebook, version=nbformat.NO_CONVERT)  # type: ignore[no-untyped-call]
    return written if written.endswith("\n") else written + "\n"


def arc_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (root / folder).glob("*.ipynb"))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks (default: the arc's)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    args = parser.parse_args(argv)
    paths: list[Path] = args.paths or arc_notebooks()
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        wanted = normalized(text)
        if wanted == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(wanted, encoding="utf-8")
    verb = "not stored as JupyterLab saves it" if args.check else "rewritten"
    for path in stale:
        shown = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        print(f"{shown}: {verb}")
    if args.check and stale:
        print("Fix: .venv/bin/python scripts/normalize_notebooks.py")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
