"""After a SIGKILL of the grading process, or of its whole process group (what ``make`` leaves
when it is killed), nothing it started outlives it: not a fork server, not a watcher, not the
learner's process, not a daemon the learner's code started.

A grading process is started for real; once its worker is inside a probe that never returns
(and has left a daemon behind), it prints every process below it. Those are then watched
through pidfds (each becomes readable when its process ends), so the test waits on events,
never on a clock it guesses.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.runtime import sandbox

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
    ),
]

GRADER = textwrap.dedent(
    """
    import os, sys, threading
    from pathlib import Path
    from grader import Limits, Runner, load_suite
    from grader.runtime.stream import ResultStream
    from tests.unit.test_grading_runner import descendants
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


@pytest.mark.parametrize("kill", ["the process", "its process group"])
def test_nothing_outlives_a_killed_grader(kill: str, tmp_path: Path) -> None:
    grader = subprocess.Popen(
        [sys.executable, "-c", GRADER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own, as make's would be
        cwd=Path(__file__).resolve().parents[2],
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
