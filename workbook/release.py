"""`make release`: the learner copy, and the proof that nothing secret is in it.

The copy holds the concept notebooks, the exercises (plus a pristine copy of each for
`make reset`), the visible tests, the packages, and a learner README and Makefile. It never
holds a solution, a hidden probe or judge, a mutant, a reference seam or a quiz answer.
Building it twice into the same folder gives the same files: the folder is replaced whole.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from workbook.errors import ExportError
from workbook.export import cell_source, cell_tags, read_notebook
from workbook.manifest import load_manifest, repo_root

#: What ships, relative to the repo root. Folders ship whole, minus `IGNORED`.
SHIP = (
    "README.md",
    "LICENSE",
    "Makefile",
    "requirements.txt",
    "pyproject.toml",
    "workbook.toml",
    ".gitignore",
    "notebooks",
    "exercises",
    "etl",
    "workbook",
    "scripts",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/visible",
)
#: Instructor-only material: never copied, and scanned for leaks.
SECRET_DIRS = ("solutions", "tests/hidden")
IGNORED = shutil.ignore_patterns(
    "__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info", ".backups"
)
PRISTINE = ".pristine"
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
    (out / "Makefile").write_text(makefile.split(MAKEFILE_CUT)[0].rstrip() + "\n")
    readme = (out / "README.md").read_text(encoding="utf-8")
    (out / "README.md").write_text(README_CUT.sub("", readme))
    for exercise in sorted((root / "exercises").glob("*.ipynb")):
        pristine = out / PRISTINE / "exercises" / exercise.name
        pristine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(exercise, pristine)
    return sorted(p for p in out.rglob("*") if p.is_file())


def _refuse_to_clobber(out: Path, root: Path) -> None:
    target, home = out.resolve(), root.resolve()
    if target == home or target in home.parents:
        raise SystemExit(f"refusing to replace {out}: it holds the repository")
    if home in target.parents:
        first = target.relative_to(home).parts[0]
        if first in {".git", *(p.split("/")[0] for p in (*SHIP, *SECRET_DIRS))}:
            raise SystemExit(f"refusing to replace {out}: it is part of the repository")


def secrets(root: Path | None = None) -> dict[str, str]:
    """Text that must never appear in the learner copy, each mapped to where it comes from.

    Whole answer cells of every solution, each solution line of some length that the
    exercise does not already contain, and every such line of the hidden suites. A line a
    concept notebook teaches on purpose (notebook 02 shows `content_id` in full) is allowed.
    """
    root = root or repo_root()
    taught = set()
    for notebook in sorted((root / "notebooks").glob("*.ipynb")):
        for cell in read_notebook(notebook)["cells"]:
            taught.update(_lines(cell_source(cell)))
    found: dict[str, str] = {}
    manifest = load_manifest(root / "workbook.toml")
    for entry in manifest.entries:
        if not entry.solution or not (root / entry.solution).exists():
            continue
        given = set()
        if (root / entry.path).exists():
            for cell in read_notebook(root / entry.path)["cells"]:
                given.update(_lines(cell_source(cell)))
        for index, cell in enumerate(read_notebook(root / entry.solution)["cells"], start=1):
            if "answer" not in cell_tags(cell):
                continue
            source = cell_source(cell).strip()
            where = f"{entry.solution} cell {index}"
            if source and source not in given:
                found[source] = where
            for line in _lines(source) - given - taught:
                found[line] = where
    for path in _files(root / "tests" / "hidden"):
        for line in _lines(path.read_text(encoding="utf-8", errors="replace")) - taught:
            found.setdefault(line, str(path.relative_to(root)))
    return found


def leaks(release: Path, root: Path | None = None) -> list[str]:
    """Every secret found in the release, as ``file: text (from where)``; empty is clean."""
    root = root or repo_root()
    hidden = secrets(root)
    problems = []
    for secret_dir in SECRET_DIRS:
        if (release / secret_dir).exists():
            problems.append(f"{secret_dir}/: shipped")
    for path in _files(release):
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".ipynb":
            # Notebook JSON escapes quotes and newlines; compare the decoded sources too.
            with contextlib.suppress(ExportError):
                text += "\n" + "\n".join(cell_source(c) for c in read_notebook(path)["cells"])
        for secret, origin in hidden.items():
            if secret in text:
                first = secret.splitlines()[0][:60]
                problems.append(f"{path.relative_to(release)}: {first!r} (from {origin})")
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
    parser = argparse.ArgumentParser(prog="python -m workbook.release")
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
    print(
        f"Checked for leaks: no solution, hidden test or answer in it ({len(secrets())} secrets)."
    )
    print(f"Hand it out: cd {args.out} && make lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
