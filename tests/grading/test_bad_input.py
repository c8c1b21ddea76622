"""Bad input gets a verdict and never stops the batch: the parts, on real files.

Scratch cleanup that a learner cannot defeat (deep chains, unwritable folders, symlinks,
FIFOs), bounded folder walks, notebooks that are no regular file, zips, an OUT that cannot
take the outputs, half-written files, and a cache that never keeps a grader fault. Every tree
here is generated on the spot; nothing is mocked.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.classes.cache import Cache, replace_file
from grader.classes.discovery import NOT_SUBMITTED, find_notebook, scan_class, scan_learner
from grader.classes.progressbar import Progress
from grader.classes.reports import OutputFolderError, check_out
from grader.proofs import nobody
from grader.runtime.cleanup import PARTIAL, remove_partials, remove_stale_scratch, remove_tree
from grader.runtime.forkclient import SCRATCH_ROOT
from grader.runtime.results import Outcome, SubmissionResult
from grader.runtime.results import TestResult as Judged
from tests.conftest import ROOT
from workbook.shared.manifest import load_manifest

ENTRY = load_manifest().entry("03")
NAME = ENTRY.path.rsplit("/", 1)[-1]


def chain(top: Path, depth: int, name: str = "d") -> None:
    """`depth` nested folders under `top`, made through descriptors (no path grows: a chain
    deeper than PATH_MAX is fine), a file at the bottom."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        os.close(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.fixture(autouse=True)
def tidy(tmp_path: Path) -> Iterator[None]:
    """Each test's folder goes with it: pytest's own cleanup (rmtree) dies on a deep chain."""
    yield
    assert remove_tree(tmp_path).complete


@pytest.fixture
def shm() -> Iterator[Path]:
    """A folder where the grader keeps its scratch (``/dev/shm``, memory: a deep chain on a
    loaded disk takes a minute to make and remove, there a second or two)."""
    folder = Path(tempfile.mkdtemp(prefix="cleanup-test-", dir=SCRATCH_ROOT))
    yield folder
    assert remove_tree(folder).complete


def dead_pid() -> int:
    """The pid of a process that has ended (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# ───────────────────────────────────────────────────────────────────── removing trees


@pytest.mark.parametrize("depth", [1_500, 20_000])
def test_a_deep_chain_is_removed_without_recursion(shm: Path, depth: int) -> None:
    """Python 3.11's rmtree raises RecursionError near 1,500 levels; this removes 20,000."""
    top = shm / "scratch"
    chain(top / "work-1", depth)
    removal = remove_tree(top)
    assert removal.complete, removal.left
    assert not top.exists()
    assert removal.removed == depth + 3  # the folders, the file, work-1 and the top
    assert remove_tree(top).removed == 0  # again: nothing left to do


def test_symlinks_are_removed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file.txt").write_text("mine")
    top = tmp_path / "scratch"
    (top / "a").mkdir(parents=True)
    (top / "a" / "to_dir").symlink_to(outside / "keep")
    (top / "a" / "to_file").symlink_to(outside / "keep" / "file.txt")
    (top / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(top / "a" / "fifo")  # unlinked, never opened
    assert remove_tree(top).complete
    assert not top.exists()
    assert (outside / "keep" / "file.txt").read_text() == "mine"
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert remove_tree(link).complete  # a symlink given as the top is removed as a link
    assert not link.exists() and (outside / "keep" / "file.txt").exists()


def test_unreadable_and_unwritable_folders_are_removed(tmp_path: Path) -> None:
    top = tmp_path / "scratch"
    chain(top / "locked", 50)
    for mode, name in ((0o000, "none"), (0o500, "read_only"), (0o100, "exec_only")):
        (top / name / "inner").mkdir(parents=True)
        (top / name / "inner" / "f").write_text("x")
        (top / name / "inner").chmod(mode)
        (top / name).chmod(mode)
    (top / "locked").chmod(0o000)
    assert remove_tree(top).complete
    assert not top.exists()


NOBODY_SCRIPT = r"""
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("cleanup", sys.argv[1])
cleanup = sys.modules["cleanup"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cleanup)
top = os.path.join(sys.argv[2], "scratch")
os.makedirs(os.path.join(top, "a", "b"))
open(os.path.join(top, "a", "b", "f"), "w").close()
os.symlink(sys.argv[3], os.path.join(top, "a", "root_file"))
for path in (os.path.join(top, "a", "b"), os.path.join(top, "a")):
    os.chmod(path, 0)
removal = cleanup.remove_tree(top)
print(json.dumps({"left": removal.left, "exists": os.path.lexists(top)}))
"""


def test_as_an_ordinary_user_locked_folders_are_unlocked_and_removed(tmp_path: Path) -> None:
    """As nobody (where this runs as root), folders of mode 000 the user owns are removed, and
    a symlink to a root-owned file is removed, not followed (its target keeps its mode)."""
    why, python = nobody.skip_reason(), nobody.interpreter()
    if why is not None or python is None:
        pytest.skip(f"acting as nobody needs root, setpriv and an interpreter: {why}")
    # pytest's folders are root's alone (mode 700): nobody needs one it can reach.
    base = Path(tempfile.mkdtemp(prefix="cleanup-test-"))
    base.chmod(0o755)
    home = base / "nobody"
    home.mkdir()
    os.chown(home, 65534, 65534)
    target = base / "root_only.txt"
    target.write_text("root's")
    target.chmod(0o600)
    # A copy nobody can read wherever this clone sits (a folder only root can read included).
    cleanup = nobody.stage(ROOT / "grader" / "runtime" / "cleanup.py", base)
    done = subprocess.run(
        [*nobody.AS_NOBODY, python, "-c", NOBODY_SCRIPT, str(cleanup), str(home), str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    try:
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"left": [], "exists": False}
        assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "root's"
    finally:
        assert remove_tree(base).complete


def filled(folder: Path, count: int, *, folders: bool = False) -> Path:
    """`folder` holding `count` empty files (or folders), named in order."""
    folder.mkdir(parents=True)
    for index in range(count):
        path = folder / f"e{index:03d}"
        path.mkdir() if folders else path.touch()
    return folder


def test_removal_is_bounded(tmp_path: Path) -> None:
    top = filled(tmp_path / "many", 50)
    removal = remove_tree(top, max_entries=10)
    assert removal.removed == 10 and removal.left == ["stopped after 10 entries"]
    assert top.exists()
    assert remove_tree(top).complete and not top.exists()


def test_stale_scratch_of_a_dead_batch_is_removed_and_a_live_ones_kept(shm: Path) -> None:
    """A killed batch's scratch (with a deep chain in it) goes; a live process's stays; what
    is not the grader's is never touched."""
    dead, alive = dead_pid(), os.getppid()
    chain(shm / f"rit-{dead}-grade-abc" / "work-1", 1_600)
    (shm / f"rit-{alive}-grade-xyz").mkdir()
    (shm / "not-ours").mkdir()
    (shm / f"rit-{dead}-server-file").write_text("a file of that name is removed too")
    assert remove_stale_scratch(shm) == []
    assert sorted(p.name for p in shm.iterdir()) == ["not-ours", f"rit-{alive}-grade-xyz"]
    assert remove_stale_scratch(shm) == []  # again: nothing to do
    assert remove_stale_scratch(shm / "missing")[0].endswith(
        "could not be listed: No such file or directory"
    )


# ────────────────────────────────────────────────────────────────── walking folders


def test_a_deep_nest_in_a_learner_folder_is_walked_within_bounds(shm: Path) -> None:
    learner = shm / "ada"
    chain(learner / "deep", 1_100)
    (learner / "exercises").mkdir()
    (learner / "exercises" / NAME).write_text("{}")
    scanned = scan_learner(learner)
    assert scanned.notebooks == [f"exercises/{NAME}"]
    assert any("deeper than 32 levels" in note for note in scanned.notes)
    found = find_notebook(scanned, ENTRY)
    assert found.shown == f"exercises/{NAME}" and found.problem is None


def test_a_walk_stops_at_its_entry_budget(tmp_path: Path) -> None:
    scanned = scan_learner(filled(tmp_path / "bo", 30, folders=True), max_entries=20)
    assert any("more than 20 files and folders" in note for note in scanned.notes)


def test_notebooks_that_are_not_regular_files_get_a_reason(tmp_path: Path) -> None:
    """Each found by its name, none opened: a FIFO would block, a device read without end."""
    kinds = {}
    fifo_learner = tmp_path / "fifo"
    fifo_learner.mkdir()
    os.mkfifo(fifo_learner / NAME)
    kinds[fifo_learner] = "a FIFO"
    link_learner = tmp_path / "link"
    link_learner.mkdir()
    (link_learner / NAME).symlink_to(load_manifest().root / str(ENTRY.solution))
    kinds[link_learner] = "a symlink"
    with contextlib.suppress(PermissionError):
        device_learner = tmp_path / "device"
        device_learner.mkdir()
        os.mknod(device_learner / NAME, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        kinds[device_learner] = "a device"
    for learner, kind in kinds.items():
        found = find_notebook(learner, ENTRY)
        assert found.path is None and found.problem is not None
        assert f"{NAME} is {kind}, not a notebook file" in found.problem


def test_zips_are_named_never_skipped(tmp_path: Path) -> None:
    submissions = tmp_path / "class"
    (submissions / "ann").mkdir(parents=True)
    (submissions / "ann" / NAME).write_text("{}")
    (submissions / "ann.zip").write_bytes(b"PK")
    (submissions / "zed.ZIP").write_bytes(b"PK")
    (submissions / "only_zip").mkdir()
    (submissions / "only_zip" / "work.zip").write_bytes(b"PK")
    (submissions / ".dotted").mkdir()
    (submissions / ".git").mkdir()
    (submissions / "loose.ipynb").write_text("{}")
    os.mkfifo(submissions / "pipe")
    found = scan_class(submissions)
    learners = {x.name: x for x in found.learners}
    assert list(learners) == [".dotted", "ann", "only_zip", "zed"]
    assert learners["ann"].zips == ["ann.zip"] and learners["ann"].folder is not None
    assert learners["zed"].folder is None and learners["zed"].zips == ["zed.ZIP"]
    not_graded = dict(found.not_graded)
    assert set(not_graded) == {".git", "loose.ipynb", "pipe"}
    assert "a FIFO" in not_graded["pipe"]
    only = find_notebook(submissions / "only_zip", ENTRY)
    assert only.problem is not None and "handed in as a zip (work.zip): unzip it" in only.problem
    assert find_notebook(submissions / ".dotted", ENTRY).problem == NOT_SUBMITTED


# ─────────────────────────────────────────────────────────────────────── the OUT folder


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[list[str]]:
    """A command prefix under which `folder` is read-only for real, root included: a
    read-only bind mount in a mount namespace of its own (as root), or mode 555."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
        yield ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(folder)]
        return
    folder.chmod(0o555)
    try:
        yield []
    finally:
        folder.chmod(0o755)


def test_a_read_only_out_is_refused_before_grading_in_one_line(tmp_path: Path) -> None:
    submissions, out = tmp_path / "class", tmp_path / "out"
    (submissions / "ann").mkdir(parents=True)
    (submissions / "ann" / NAME).write_text("{}")
    with read_only(out) as prefix:
        done = subprocess.run(
            [
                *prefix,
                sys.executable,
                "-m",
                "grader.classes.class_command",
                str(submissions),
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=load_manifest().root,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and "cannot be written" in lines[0] and "nothing was graded" in lines[0]
    assert "Traceback" not in done.stderr and "grading" not in done.stderr  # no progress bar
    assert list(out.iterdir()) == []


def test_an_out_without_room_or_with_a_folder_in_the_way_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    check_out(out, 3)  # fine: creates the folders, leaves no file behind
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        ".cache",
        ".cache/grades",
        "feedback",
    ]
    stats = os.statvfs(out)
    more_than_free = stats.f_bavail * stats.f_frsize // (256 * 1024) + 1
    with pytest.raises(OutputFolderError, match="MiB free"):
        check_out(out, more_than_free)
    (out / "grades.csv").mkdir()
    with pytest.raises(OutputFolderError, match=r"grades\.csv is a folder"):
        check_out(out, 3)
    afile = tmp_path / "a_file"
    afile.write_text("")
    with pytest.raises(OutputFolderError, match="cannot be written"):
        check_out(afile / "out", 3)


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path) -> None:
    (tmp_path / "grades.csv").mkdir()
    with pytest.raises(OSError):
        replace_file(tmp_path / "grades.csv", "learner\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grades.csv"]
    long_name = "名" * 84 + ".md"  # 255 bytes: the partial file's name stays short
    replace_file(tmp_path / long_name, "x")
    assert (tmp_path / long_name).read_text() == "x"


def test_partials_of_a_killed_batch_are_swept(tmp_path: Path) -> None:
    dead, alive = dead_pid(), os.getpid()
    for pid in (dead, alive):
        (tmp_path / f".rit-{pid}-1.tmp").write_text("half")
    assert PARTIAL.fullmatch(f".rit-{dead}-1.tmp")
    assert remove_partials(tmp_path) == 1
    assert [p.name for p in tmp_path.iterdir()] == [f".rit-{alive}-1.tmp"]


# ─────────────────────────────────────────────────────────────── the cache, the bar


def fault(kind: Outcome) -> SubmissionResult:
    test = Judged("t", 0, 1, "grader error: a wall would not rise", True, kind)
    return SubmissionResult("03", "x", "error", "grader error", (test,))


def test_no_grader_fault_is_cached_or_served(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "grades")
    assert not cache.put("k1", fault(Outcome.GRADER_FAULT))
    assert cache.get("k1") is None
    # An entry an older grader stored with a fault in it is a miss, not a grade.
    planted = {"key": "k2", "result": fault(Outcome.GRADER_FAULT).as_json()}
    replace_file(tmp_path / "grades" / "k2"[:2] / "k2.json", json.dumps(planted))
    assert cache.get("k2") is None
    assert cache.put("k3", fault(Outcome.WRONG)) and cache.get("k3") is not None


def test_a_cache_that_cannot_be_written_is_a_miss_not_a_crash(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    cache = Cache(blocked / "grades")
    assert not cache.put("k1", fault(Outcome.WRONG))
    assert cache.unwritten == 1 and cache.get("k1") is None


def test_a_closed_progress_stream_does_not_stop_the_batch() -> None:
    stream = io.StringIO()
    bar = Progress(3, stream)
    bar.advance()
    stream.close()
    bar.advance()
    bar.advance(cached=True)
    assert bar.off and bar.done == 3
