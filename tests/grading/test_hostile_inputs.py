"""What an attack on the grader found, each held now: one test per hole.

A private corpus of hostile submissions (kept outside this repository, as issue 12 asks) was
graded as root and as an ordinary user; these are the parts it broke, tried again on real
files, pipes and processes. Each test names the attack it stands for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

import workbook.shared.export as export
from grader import Limits
from grader.classes.layouts import _head_commit
from grader.classes.zips import ZipRefused, member_problem, open_zip
from grader.runtime.stream import ResultStream
from grader.suites.observe import KINDS, kinds_of
from workbook.shared.errors import ExportError

LOADED = json.dumps({"event": "loaded"}).encode()
START = json.dumps({"event": "start", "probe": "a"}).encode()


def fed(*lines: bytes) -> ResultStream:
    stream = ResultStream(["a"], "", Limits(), "")
    for line in lines:
        stream.feed(line, now=0.0)
    return stream


@pytest.mark.parametrize(
    "line",
    [
        b"[" * 5000 + b"]" * 5000,  # deeper than json.loads recurses
        json.dumps({"event": "done", "probe": "a", "obs": {"ok": 1}, "seconds": "soon"}).encode(),
        json.dumps(
            {"event": "done", "probe": "a", "obs": json.loads("[" * 100 + "]" * 100)}
        ).encode(),
        json.dumps(["event", "done"]).encode(),
        json.dumps({"event": 7}).encode(),
    ],
    ids=["json-bomb", "seconds-not-a-number", "obs-too-deep", "not-an-object", "event-not-text"],
)
def test_a_forged_line_is_a_deviation_never_a_grader_error(line: bytes) -> None:
    stream = fed(LOADED, START, line)  # raised before: RecursionError, ValueError
    stream.settle()
    assert stream.deviation is not None
    assert all(r.status == "void" for r in stream.records.values())


def test_editing_kinds_in_the_learners_process_changes_no_claim() -> None:
    class ParseError(ValueError):  # the learner's look-alike
        pass

    saved = KINDS["ParseError"]
    try:
        KINDS["ParseError"] = ParseError  # what the attack did, from an answer cell
        assert "ParseError" not in kinds_of(ParseError("x"))
    finally:
        KINDS["ParseError"] = saved


def test_a_git_head_that_is_a_fifo_or_huge_gives_no_commit_and_no_hang(tmp_path: Path) -> None:
    fifo, huge = tmp_path / "fifo", tmp_path / "huge"
    for repo in (fifo, huge):
        (repo / ".git").mkdir(parents=True)
    os.mkfifo(fifo / ".git" / "HEAD")
    with (huge / ".git" / "HEAD").open("wb") as sparse:
        sparse.truncate(2**40)  # a terabyte that takes no disk
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.extend(map(_head_commit, (fifo, huge))))
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive(), "reading HEAD blocked"
    assert result == ["", ""]


def test_zip_members_python_cannot_read_are_refused_by_name(tmp_path: Path) -> None:
    info = zipfile.ZipInfo("learner/03_build_retry_and_sink.ipynb")
    info.compress_type = 98  # PPMd, as 7-Zip writes it
    assert member_problem(info) == "compression method 98 (only stored, deflate, bzip2 and lzma)"
    # A name flagged UTF-8 that is not: the header's bytes patched after writing.
    path = tmp_path / "class.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("é.ipynb", "{}")
    path.write_bytes(path.read_bytes().replace("é".encode(), b"\xff\xfe"))
    with pytest.raises(ZipRefused, match="not a readable zip"):
        open_zip(path)


@pytest.mark.parametrize(
    "before",
    ["", "%time 1\n"],
    ids=["plain", "behind-a-magic-line"],
)
def test_a_compile_bomb_is_refused_within_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """Megabytes of one comparison chain: the parent used to spend 45 s and 4.4 GB compiling
    it, on every run (the cache key is computed after the export). Behind a ``%time`` line
    the cell is a syntax error the child finds fast; its rewrite, the bomb itself, was then
    compiled here (18 s and 2.5 GB for 2 million terms): it is proven apart first now."""
    monkeypatch.setattr(export, "COMPILE_MEMORY", 256 * 2**20)
    monkeypatch.setattr(export, "COMPILE_HERE_BYTES", 64 * 2**10)
    source = Path("solutions/03_build_retry_and_sink.ipynb").read_text(encoding="utf-8")
    nb = json.loads(source)
    cell = next(c for c in nb["cells"] if "answer" in c.get("metadata", {}).get("tags", []))
    cell["source"] = before + "x = " + "<".join(["a"] * 600_000) + "\n"
    notebook = tmp_path / "bomb.ipynb"
    notebook.write_text(json.dumps(nb), encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(ExportError, match=r"MemoryError|did not compile within"):
        export.export_source(notebook)
    assert time.perf_counter() - start < export.COMPILE_SECONDS + 5


def test_a_big_honest_notebook_still_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export, "COMPILE_HERE_BYTES", 1024)  # force the child for a real one
    solution = Path("solutions/03_build_retry_and_sink.ipynb")
    assert export.export_source(solution)  # compiled apart, then here: the same text
    nb = json.loads(solution.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "answer" in c.get("metadata", {}).get("tags", []))
    cell["source"] = "def broken(:\n    pass\n"
    notebook = tmp_path / "syntax.ipynb"
    notebook.write_text(json.dumps(nb), encoding="utf-8")
    with pytest.raises(ExportError, match=r"SyntaxError: .*\(line 1\)"):
        export.export_source(notebook)  # the message the in-process compile gives


@pytest.mark.skipif(sys.platform != "linux", reason="keyrings are Linux's")
def test_walled_learners_get_a_session_keyring_of_their_own() -> None:
    """Keyrings belong to no namespace: a build 05 worker put the reference build 03 into
    the grader's session keyring and a build 03 stub read it back (49 points of 49). The walls'
    self-test now fails if a learner's process still shares the grader's session keyring."""
    from grader.runtime import sandbox

    if sandbox.bwrap() is None:
        pytest.skip("no bubblewrap on this machine")
    assert sandbox.walls_problem(sys.executable) is None
    # Run the self-test inside a fresh session keyring too, as a login gets (pam_keyinit).
    code = (
        "from grader.runtime import sandbox; import sys;"
        " print(sandbox.walls_problem(sys.executable))"
    )
    script = (
        "import ctypes, subprocess, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "assert libc.syscall(250, 1, b'rit-test-session') >= 0\n"
        f"sys.exit(subprocess.run([sys.executable, '-c', {code!r}]).returncode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"
