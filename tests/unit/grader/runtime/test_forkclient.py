"""`grader.runtime.forkclient`: a fork server started, asked, and stopped (an unwalled
server of ``tests/unit/grader/runtime/conftest.py``, shared by the tests here); and, walled in,
that nothing it started outlives a killed grader.

After a SIGKILL of the grading process, or of its whole process group (what ``make`` leaves
when it is killed), nothing it started outlives it: not a fork server, not a watcher, not the
learner's process, not a daemon the learner's code started.

A grading process is started for real; once its worker is inside a probe that never returns
(and has left a daemon behind), it prints every process below it. Those are then watched
through pidfds (each becomes readable when its process ends), so the test waits on events,
never on a clock it guesses.
"""

from __future__ import annotations

import hashlib
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader import Limits
from grader.runtime import sandbox
from grader.runtime.child.artefacts import open_folder
from grader.runtime.forkclient import ForkServer, ServerError, digest, memfd
from grader.runtime.protocol import Exit, Job, Private, Reply
from tests.conftest import ROOT
from tests.unit.grader.runtime.conftest import RunJob

WALLED = pytest.mark.skipif(
    sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
)

GRADER = textwrap.dedent(
    """
    import os, sys, threading
    from pathlib import Path
    from grader import Limits, Runner, load_suite
    from grader.runtime.stream import ResultStream
    from tests.unit.grader.runtime.test_runner import descendants
    from workbook.shared.manifest import Entry, TestSpec

    hidden = Path(sys.argv[1])
    (hidden / "build97" / "hidden").mkdir(parents=True)
    (hidden / "build97" / "hidden" / "probes.py").write_text(
        "from grader.suites.observe import Probes, attempt, need\\n"
        "PROBES = Probes()\\n"
        "PROBES.add('hang')(lambda ns: attempt(need(ns, 'hang')))\\n"
    )
    judges = "from grader.suites.judging import Judges\\nJUDGES = Judges()\\n"
    (hidden / "build97" / "hidden" / "test_judges.py").write_text(judges)
    suite = load_suite("97", hidden)
    source = (
        "import os, signal\\n"
        "if os.fork() == 0:\\n"
        "    os.setsid()\\n"
        "    signal.pause()  # (time.sleep is cut short in a worker)\\n"
        "    os._exit(0)\\n"
        "def hang():\\n"
        "    while True:\\n"
        "        pass\\n"
    )
    feed = ResultStream.feed

    def started(self, line, now):
        feed(self, line, now)
        if self.current == "hang":  # the worker is in the probe; the daemon is out there
            print(" ".join(map(str, descendants(os.getpid()))), flush=True)

    ResultStream.feed = started
    limits = Limits(probe_seconds=600, grace_seconds=600, budget_seconds=1200)
    entry = Entry("97", "build", "toy", "toy.ipynb", "", tests=(TestSpec("hang", 1, "h"),))
    with Runner(limits, walls="bwrap") as runner:
        runner.grade_source("97", source, suite=suite, entry=entry)
    """
)


@pytest.mark.slow
@WALLED
@pytest.mark.parametrize("kill", ["the process", "its process group"])
def test_nothing_outlives_a_killed_grader(kill: str, tmp_path: Path) -> None:
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own, as make's would be
        cwd=ROOT,
    )
    assert grader.stdout is not None
    line = grader.stdout.readline()
    pids = [int(p) for p in line.split()]
    # bubblewrap, its init, the server, the watcher, the learner's process, the daemon.
    assert len(pids) >= 6, line
    watched = {}
    for pid in pids:
        try:
            watched[os.pidfd_open(pid)] = pid
        except ProcessLookupError:
            continue
    try:
        if kill == "the process":
            os.kill(grader.pid, signal.SIGKILL)
        else:
            os.killpg(grader.pid, signal.SIGKILL)
        grader.wait()
        alive = dict(watched)
        while alive:
            ended, _, _ = select.select(list(alive), [], [], 10.0)
            if not ended:
                break
            for fd in ended:
                del alive[fd]
        assert not alive, f"still alive after the grader was killed: {sorted(alive.values())}"
    finally:
        for fd in watched:
            os.close(fd)


# ── the client's handle on a server (an unwalled one, shared) ──────────────────────────


def test_a_started_server_says_its_walls_and_hash_seed(bare_server: ForkServer) -> None:
    assert bare_server.alive()
    assert bare_server.ready is not None
    assert (bare_server.ready.mode, bare_server.ready.hashseed) == ("off", "1")
    here = subprocess.run(
        [sys.executable, "-c", "print(hash('run-it-twice'))"],
        env={**os.environ, "PYTHONHASHSEED": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert bare_server.ready.hash == int(here.stdout)  # its hash seed is the one it was given


def test_a_job_handed_over_comes_back_with_its_end(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    run = run_job(bare_server, "def a():\n    return 1\n\ndef b():\n    return 2\n")
    assert run.end == Exit(code=0, up=True, wall=None, kept=0, dropped=0)
    assert [e["event"] for e in run.events][-1] == "end"
    assert bare_server.receive(timeout=0.0) is None  # nothing more to say


def test_kill_job_ends_a_job_that_ignores_its_alarm(
    bare_server: ForkServer, tmp_path: Path
) -> None:
    source = "import signal\n\ndef a():\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    source += "    while True:\n        pass\n"
    text = b"from grader.suites.observe import Probes\nPROBES = Probes()\n"
    text += b"PROBES.add('a')(lambda ns: ns.a())\n"
    limits = bare_server.limits.as_json()
    job = Job("/x/probes.py", "_hidden_probes_kill", digest(text), ("a",), "99", limits)
    results_r, results_w = os.pipe()
    output = os.open(tmp_path / "out.log", os.O_WRONLY | os.O_CREAT, 0o600)
    folder = open_folder(str(tmp_path))
    try:
        assert bare_server.submit(job, text, Private(source, {}), results_w, output, folder) > 0
    finally:
        for fd in (results_w, output, folder):
            os.close(fd)
    seen = b""
    while b'"start"' not in seen:  # the learner's process is in the probe
        seen += os.read(results_r, 1 << 16)
    bare_server.kill_job()
    reply = bare_server.receive(timeout=30.0)
    os.close(results_r)
    assert reply is not None and reply[0] is Reply.EXIT
    assert Exit.from_json(reply[1]).code == -signal.SIGKILL
    assert bare_server.alive()


def test_closing_a_server_twice_is_harmless_and_removes_its_folder() -> None:
    server = ForkServer("1", Limits(), walls="off")
    home = server._home
    assert home.is_dir()
    server.close()
    server.close()
    assert not home.exists() and not server.alive()


def test_a_server_that_cannot_start_is_a_server_error() -> None:
    server = ForkServer("1", Limits(), python="/bin/false", walls="off")
    try:
        with pytest.raises(ServerError, match="the grading server did not start: "):
            server.start()
    finally:
        server.close()


def test_memfd_holds_the_data_from_its_start() -> None:
    fd = memfd("unit", b"x" * 100_000 + b"end")
    try:
        with os.fdopen(os.dup(fd), "rb") as read:
            assert read.read() == b"x" * 100_000 + b"end"
    finally:
        os.close(fd)


def test_digest_is_the_sha256_of_the_probes_text() -> None:
    assert digest(b"PROBES = 1\n") == hashlib.sha256(b"PROBES = 1\n").hexdigest()
