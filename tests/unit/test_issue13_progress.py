"""Issue 13: `make progress` answers fast without weakening its verdict, and says what happens.

A report is kept in ``.progress/`` under the content id of what it depends on: a repeat on the
same saved notebooks gives the same report without running a check, any saved edit of a code
cell (or of an earlier build a later one loads) runs them again, and outputs or markdown change
nothing. The learner copy's verdicts stay one per build, and the help texts say what `make lab`
really does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from workbook.commands import progress
from workbook.shared.manifest import Manifest, copy_manifest, load_manifest

NB03 = "03_build_retry_and_sink.ipynb"
NB05 = "05_build_paginated_source.ipynb"


def learner_repo(tmp_path: Path, **sources: str) -> Manifest:
    """A repo whose exercises/ holds each build notebook from `sources` (``n03="solutions"``),
    the stubs otherwise."""
    copy_manifest(ROOT, tmp_path)
    (tmp_path / "exercises").mkdir()
    for notebook in sorted((ROOT / "exercises").glob("0*.ipynb")):
        folder = sources.get(f"n{notebook.name[:2]}", "exercises")
        shutil.copy(ROOT / folder / notebook.name, tmp_path / "exercises" / notebook.name)
    return load_manifest(tmp_path / "workbook.toml")


def edit_cells(path: Path, tag: str | None, old: str, new: str) -> None:
    """Replace `old` by `new` in the cells tagged `tag` (markdown cells when None), and save."""
    nb: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        tags = cell.get("metadata", {}).get("tags", [])
        if (tag in tags) if tag else cell["cell_type"] == "markdown":
            cell["source"] = "".join(cell["source"]).replace(old, new)
    path.write_text(json.dumps(nb), encoding="utf-8")


def said(report: progress.BuildReport) -> tuple[object, ...]:
    """What a report says (its checks' times aside)."""
    checks = tuple((r.name, r.status, r.message) for r in report.results)
    return (report.verdict, checks, report.problem, report.detail, report.notes, report.total)


def kept(manifest: Manifest) -> list[str]:
    return sorted(p.name[:2] for p in (manifest.root / progress.CACHE_DIR).glob("*.json"))


def test_a_repeat_is_the_same_report_and_an_edit_runs_the_checks_again(tmp_path: Path) -> None:
    manifest = learner_repo(tmp_path, n03="solutions")
    entry = manifest.entry("03")
    first = progress.build_report(manifest, entry)
    assert first.done and kept(manifest) == ["03"]
    assert progress.build_report(manifest, entry) == first
    assert said(progress.build_report(manifest, entry, cached=False)) == said(first)

    path = manifest.root / entry.path
    key = progress.report_key(manifest, entry)
    edit_cells(path, None, "Step", "Stage")  # prose only: the same key
    assert progress.report_key(manifest, entry) == key
    assert progress.build_report(manifest, entry) == first
    edit_cells(path, "answer", 'return f"{h:016x}"', "return hex(h)[2:]")  # a known bug, saved
    edited = progress.build_report(manifest, entry)
    assert edited.verdict == "failing: fnv1a_vectors"
    assert said(edited) == said(progress.build_report(manifest, entry, cached=False))
    assert kept(manifest) == ["03"]  # the older report is dropped


def test_a_later_build_is_checked_again_when_an_earlier_one_changes(tmp_path: Path) -> None:
    """Build 05's setup cell loads build 03 from the same folder: its key covers 03's cells."""
    manifest = learner_repo(tmp_path, n03="solutions", n05="solutions")
    before = progress.report_key(manifest, manifest.entry("05"))
    edit_cells(manifest.root / manifest.entry("03").path, "answer", "MASK_64", "MASK_64 ")
    assert progress.report_key(manifest, manifest.entry("05")) != before


def test_a_kept_report_that_cannot_be_read_is_checked_again(tmp_path: Path) -> None:
    manifest = learner_repo(tmp_path)
    entry = manifest.entry("03")
    report = progress.build_report(manifest, entry)
    key = progress.report_key(manifest, entry)
    assert key is not None
    (tmp_path / progress.CACHE_DIR / f"03-{key}.json").write_text("{not json", encoding="utf-8")
    assert said(progress.build_report(manifest, entry)) == said(report)


def test_one_build_done_reads_done_then_not_started(tmp_path: Path) -> None:
    """The learner copy with build 03 finished: no wall of failures, and no later build counts
    as started because its checks ran on a finished build 03."""
    manifest = learner_repo(tmp_path, n03="solutions")
    verdicts = {e.number: progress.build_report(manifest, e).verdict for e in manifest.graded}
    assert verdicts == {"03": "done", "05": "not started", "07": "not started", "08": "not started"}


def test_a_repeat_imports_no_check_and_no_pytest(tmp_path: Path) -> None:
    """What made `make progress` slow: pytest (imported by looptime) and every build's checks
    (httpx, the fixture server). A second run on the same notebooks imports neither."""
    learner_repo(tmp_path, n03="solutions")
    script = (
        "import sys\nfrom pathlib import Path\nfrom workbook.shared.manifest import load_manifest\n"
        "from workbook.commands.progress import main\nmain(load_manifest(Path(sys.argv[1])))\n"
        "heavy = [m for m in ('pytest', 'httpx', 'builds.build05.visible.answer_checks') if m in"
        " sys.modules]\nprint('imported:', heavy)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / "workbook.toml")],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=True,
        ).stdout
        for _ in range(2)
    ]
    assert "'builds.build05.visible.answer_checks'" in runs[0]
    assert runs[1].endswith("imported: []\n")
    assert runs[0].split("imported:")[0] == runs[1].split("imported:")[0]


def test_help_says_what_make_lab_does() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    lab = next(line for line in makefile.splitlines() if line.startswith("lab:"))
    assert "first notebook" not in lab and "URL" in lab and "reuse" in lab
    shown = subprocess.run(
        [sys.executable, "-m", "workbook", "--help"], capture_output=True, text=True, check=True
    ).stdout
    lab_help = shown[shown.index("    lab ") : shown.index("    reset ")]
    assert "first notebook" not in lab_help and "URL" in lab_help
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make lab` prints `http://127.0.0.1:PORT/lab/tree/<notebook>?token=" in readme
    assert "`03  done`" in readme and "make reset BUILD=03" in readme
    assert ".progress" in makefile and "/.progress/" in (ROOT / ".gitignore").read_text()
