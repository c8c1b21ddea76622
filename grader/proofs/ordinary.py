"""`make check`'s ordinary-user part: a small class graded by an instructor who is not root.

Run as root (CI is), it grades as uid and gid 65534 (``nobody``, through ``setpriv``) a class
of three build 03 notebooks: the solution, the stubs, and a cheat whose extra answer cell
loads the solution notebook and the reference seams straight from this repository. The walls
hold when the solution earns full marks, the stubs and the cheat earn nothing, every row says
``bwrap``, and the grading exits 0. The cheat is first run here, without walls, to show that
it does take the answers wherever it can read them.

The grader's own interpreter may live out of nobody's reach (under ``/root``), so this makes a venv
of an interpreter of the same version nobody can run (`grader.proofs.nobody.interpreter`: found, not
hard-coded) in a fresh folder under ``/tmp``; no pip and no network: a ``.pth`` file adds this
venv's site-packages. Where the repository (or its venv) sits in a folder nobody cannot read (a
clone under ``/root``, or in a ``mktemp -d`` folder), nobody gets a copy of its own there
(`grader.proofs.nobody.stage`: hard links, removed after). Everything it makes is removed after.
Running it twice gives the same verdict.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from grader.proofs.nobody import (
    AS_NOBODY,
    LEFT_OUT,
    NOBODY,
    interpreter,
    skip_reason,
    stage,
    stage_packages,
)
from grader.runtime.cleanup import remove_tree
from workbook.shared.export import load
from workbook.shared.manifest import load_manifest

#: The class-grading command run as nobody (what ``make check SUBMISSIONS=`` runs).
COMMAND = "grader.classes.class_command"

#: What the cheat adds to the stubs: the solution's answer cells, then the reference seams.
CHEAT = """
import json as _json
from pathlib import Path as _Path

for _cell in _json.loads(_Path({solution!r}).read_text())["cells"]:
    if "answer" in _cell.get("metadata", {{}}).get("tags", []):
        try:
            exec("".join(_cell["source"]), globals())
        except Exception:
            pass
try:
    exec(_Path({seams!r}).read_text(), globals())
except OSError:
    pass
"""


def make_class(folder: Path, root: Path) -> Path:
    """The three learners' folders (the cheat reading the repository at `root`, the copy
    nobody grades from); returns the class folder."""
    manifest = load_manifest()
    entry = manifest.entry("03")
    name = Path(entry.path).name
    cheat_cell = CHEAT.format(
        solution=str(root / str(entry.solution)), seams=str(root / "builds/build03/hidden/seams.py")
    )
    exercise = json.loads((root / entry.path).read_text(encoding="utf-8"))
    exercise["cells"].append(
        {
            "cell_type": "code",
            "metadata": {"tags": ["answer"]},
            "source": cheat_cell,
            "outputs": [],
            "execution_count": None,
        }
    )
    for learner, text in (
        ("solution", (root / str(entry.solution)).read_text(encoding="utf-8")),
        ("stub", (root / entry.path).read_text(encoding="utf-8")),
        ("cheat", json.dumps(exercise)),
    ):
        (folder / "class" / learner).mkdir(parents=True)
        (folder / "class" / learner / name).write_text(text, encoding="utf-8")
    return folder / "class"


def make_venv(folder: Path, python: str, root: Path) -> Path:
    """A venv of `python` (one nobody can run) that imports this repository's code from
    `root` (first: the editable install points at the original) and sees this venv's
    packages (staged where nobody could not read them); returns its python. Every process
    it starts, the walls' fork servers included, sees the same."""
    venv = folder / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    packages = str(stage_packages(folder))
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv)}))
    (site / "run-it-twice.pth").write_text(
        f"import sys; sys.path.insert(0, {str(root)!r}); import site;"
        f" site.addsitedir({packages!r})\n"
    )
    return venv / "bin" / "python"


def main() -> int:
    why = skip_reason()
    python_found = interpreter()
    if why is not None or python_found is None:
        print(f"skipped: {why}")
        return 0
    start = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="rit-ordinary-"))
    try:
        folder.chmod(0o755)
        root = stage(load_manifest().root, folder / "staged", left_out=LEFT_OUT)
        learners = make_class(folder, root)
        # The cheat is a real one: where the files can be read, it has the answers.
        cheat = load(next((learners / "cheat").iterdir()))
        if cheat.fnv1a_64(b"") != "cbf29ce484222325":
            print("the cheat does not take the solution even without walls: fix the cheat")
            return 1
        python = make_venv(folder, python_found, root)
        out = folder / "out"
        out.mkdir()
        os.chown(out, NOBODY, NOBODY)
        done = subprocess.run(
            [
                *AS_NOBODY,
                *(str(python), "-m", COMMAND, str(learners), "--out", str(out)),
                *("--workers", "1"),
            ],
            env={"PATH": "/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8"},
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        return _verdict(done, out, time.perf_counter() - start)
    finally:
        remove_tree(folder)


def _verdict(done: subprocess.CompletedProcess[str], out: Path, seconds: float) -> int:
    if done.returncode != 0 or not (out / "grades.csv").exists():
        print(f"grading as nobody failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
        return 1
    with (out / "grades.csv").open(newline="", encoding="utf-8") as table:
        rows = {row["learner"]: row for row in csv.DictReader(table)}
    full = str(load_manifest().entry("03").max_points)
    wanted = {"solution": full, "stub": "0", "cheat": "0"}
    got = {learner: rows.get(learner, {}).get("03") for learner in wanted}
    walls = {row["walls"] for row in rows.values()}
    for learner, points in got.items():
        print(f"  {learner:<9} build 03: {points}/{full} (expected {wanted[learner]})")
    print(f"  walls: {', '.join(sorted(walls))}; graded as uid {NOBODY} in {seconds:.1f} s")
    if got != wanted or walls != {"bwrap"}:
        print(done.stdout)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
