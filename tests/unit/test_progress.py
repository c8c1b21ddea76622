"""`make progress` on build 03: stubs, a finished build, a trap, and builds that can't be checked.

Each test copies the manifest and one version of the build notebook into a temp folder and reads the
report `workbook.commands.progress` prints for it: first what it read (the saved notebooks), then a
line per build, then what to do next.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT
from workbook.commands import progress
from workbook.selfcheck import checks_for
from workbook.shared.manifest import copy_manifest, load_manifest

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
