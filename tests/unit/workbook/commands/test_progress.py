"""`make progress` (`workbook.commands.progress`) on build 03: stubs, a finished build, a trap,
and builds that can't be checked; and the reports it keeps.

Most tests copy the manifest and one version of the build notebook into a temp folder and read
the report `workbook.commands.progress` prints for it: first what it read (the saved notebooks),
then a line per build, then what to do next.

Kept reports: a report is kept in ``.progress/`` under the content id of what it depends on: a
repeat on the same saved notebooks gives the same report without running a check, any saved edit
of a code cell (or of an earlier build a later one loads) runs them again, and outputs or markdown
change nothing. The learner copy's verdicts stay one per build, and the help texts say what
`make lab` really does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from workbook.commands import progress
from workbook.selfcheck import checks_for
from workbook.shared.manifest import Manifest, copy_manifest, load_manifest

NOTEBOOK = "03_build_retry_and_sink.ipynb"
Edit = Callable[[str], str]


def report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, edit: Edit | None = None
) -> str:
    """Progress for a repo whose exercise notebook is `source` (with `edit` on answer cells)."""
    copy_manifest(ROOT, tmp_path)
    nb = json.loads((ROOT / source / NOTEBOOK).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if edit and "answer" in cell["metadata"].get("tags", []):
            cell["source"] = edit("".join(cell["source"]))
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / NOTEBOOK).write_text(json.dumps(nb), encoding="utf-8")
    assert progress.main(load_manifest(tmp_path / "workbook.toml")) == 0
    out = capsys.readouterr().out
    assert out.startswith("Read from the saved notebooks in exercises/ (save in JupyterLab")
    return out


def build_line(out: str) -> str:
    """The line of build 03 (after the line saying what was read, and a blank one)."""
    return out.splitlines()[2]


# Every visible check, and each test-writing step: a test the learner writes is a step too.
TOTAL = len(checks_for("03")) + len(load_manifest().entry("03").learner_tests)


def test_stubs_count_zero_and_point_at_the_first_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = report(tmp_path, capsys, "exercises")
    assert f"0 of {TOTAL}" in build_line(out)
    assert (
        "Next, in the saved exercises/03_build_retry_and_sink.ipynb: · fnv1a_vectors [not done]"
        in out
    )
    assert "Hint: Step 0:" in out


def test_a_finished_build_is_done(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = report(tmp_path, capsys, "solutions")
    assert build_line(out).endswith(" done")
    assert "1 of 1 builds done." in out and "Every build is done" in out


def test_the_trap_is_named_with_its_feedback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def default_key(source: str) -> str:
        return source.replace("raise ParseError(", "return ''  # (").replace(
            "def fnv1a_64", "print('hello from a cell')\n\n\ndef fnv1a_64"
        )

    out = report(tmp_path, capsys, "solutions", default_key)
    assert build_line(out).endswith(f" of {TOTAL}")  # counted, not done
    assert "content_key_is_stable_and_distinguishes_rows [failed]" in out
    assert "expected: raises ParseError" in out
    assert "hello" not in out  # the learner's prints stay out of the report


def test_a_notebook_that_does_not_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = report(
        tmp_path, capsys, "exercises", lambda s: s.replace("def fnv1a_64(", "def fnv1a_64((")
    )
    assert build_line(out).endswith("does not load")
    assert "SyntaxError" in out


def test_a_stuck_build_is_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "BUILD_SECONDS", 1)
    # A learner's loop that never ends, and that even swallows every Exception.
    spin = "    while True:\n        try:\n            pass\n        except Exception:\n"
    spin += "            pass\n"
    out = report(
        tmp_path,
        capsys,
        "solutions",
        lambda s: s.replace('    """FNV-1a (64-bit)', spin + '    """FNV-1a (64-bit)', 1),
    )
    assert build_line(out).endswith("never finished")


def test_a_helper_left_in_an_untagged_cell_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kernel has it, the export does not: progress says which cell to tag."""
    copy_manifest(ROOT, tmp_path)
    nb = json.loads((ROOT / "solutions" / NOTEBOOK).read_text(encoding="utf-8"))
    step = next(i for i, c in enumerate(nb["cells"]) if "def fnv1a_64" in "".join(c["source"]))
    nb["cells"][step]["source"] = "def fnv1a_64(data: bytes) -> str:\n    return digest(data)\n"
    nb["cells"].insert(
        step,
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "def digest(data: bytes) -> str:\n    return 'cbf29ce484222325'\n",
        },
    )
    (tmp_path / "exercises").mkdir()
    (tmp_path / "exercises" / NOTEBOOK).write_text(json.dumps(nb), encoding="utf-8")
    manifest = load_manifest(tmp_path / "workbook.toml")
    report = progress.build_report(manifest, manifest.entry("03"))
    assert report.verdict == "failing: fnv1a_vectors"
    assert progress.main(manifest) == 0
    out = capsys.readouterr().out
    assert "NameError" in out
    assert (
        "Note: `digest` is defined in an untagged cell, the code cell under 'Step 0 (warm-up)'"
        f" that starts `def digest(data: bytes) -> str:` (cell {step + 1}): tag it `answer`"
    ) in out


def test_verdicts_say_done_not_started_or_the_first_failing_check(tmp_path: Path) -> None:
    copy_manifest(ROOT, tmp_path)
    (tmp_path / "exercises").mkdir()
    manifest = load_manifest(tmp_path / "workbook.toml")
    verdicts = []
    for source in ("exercises", "solutions"):
        shutil.copy(ROOT / source / NOTEBOOK, tmp_path / "exercises" / NOTEBOOK)
        verdicts.append(progress.build_report(manifest, manifest.entry("03")).verdict)
    assert verdicts == ["not started", "done"]


# --- kept reports -------------------------------------------------------------------------


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
