"""`grader.runtime.child.forkserver`: the server imports a job's probes from the text sent
with it, forks a worker per job and reports how each ended; a broken suite is reported and
the server goes on. (Jobs are handed by hand to the unwalled server of
``tests/unit/grader/runtime/conftest.py``.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader.runtime.forkclient import ForkServer, ServerError
from grader.runtime.protocol import Exit
from tests.unit.grader.runtime.conftest import BARE_LIMITS, RunJob

GOOD = "def a():\n    return 1\n\ndef b():\n    return 2\n"


def test_each_job_gets_a_fresh_worker_and_an_end_report(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    first = run_job(bare_server, GOOD + "import os\nos.environ['LEFT'] = 'by the last job'\n")
    second = run_job(bare_server, "import os\ndef a():\n    return os.environ.get('LEFT')\n")
    assert first.end == second.end == Exit(code=0, up=True, wall=None, kept=0, dropped=0)
    assert {"event": "done", "probe": "a", "obs": {"ok": None}} in [
        {k: v for k, v in e.items() if k != "seconds"} for e in second.events
    ]


def test_the_learner_s_exit_code_is_reported_as_it_was(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    run = run_job(bare_server, "import os\n\ndef a():\n    os._exit(3)\n")
    assert (run.end.code, run.end.up, run.end.wall) == (3, True, None)


def test_files_left_in_the_working_folder_are_counted_in_the_end_report(
    bare_server: ForkServer, run_job: RunJob
) -> None:
    source = "import os\n\ndef a():\n    open('one.txt', 'w').write('1')\n"
    source += "    os.symlink('/etc/passwd', 'link')\n    return 1\n"
    run = run_job(bare_server, source)
    assert (run.end.kept, run.end.dropped) == (1, 1)
    assert (run.folder / "kept" / "one.txt").read_text() == "1"


@pytest.fixture
def own_server() -> Iterator[ForkServer]:
    """A server of the test's own, for the tests that hand it a broken suite (it must go on:
    a suite's descriptor once closed twice, and the second close ended the server)."""
    server = ForkServer("1", BARE_LIMITS, walls="off")
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"raise RuntimeError('broken suite')\n", "cannot import the probes .*: broken suite"),
        (b"PROBES = {}\n", "cannot import the probes .*: PROBES is not a Probes registry"),
    ],
)
def test_a_broken_suite_is_reported_and_the_server_goes_on(
    own_server: ForkServer, run_job: RunJob, text: bytes, words: str
) -> None:
    with pytest.raises(ServerError, match=f"did not start the job: {words}"):
        run_job(own_server, GOOD, text=text)
    assert own_server.alive()
    assert run_job(own_server, GOOD).end.code == 0


@pytest.mark.slow
def test_a_probes_text_that_does_not_match_its_digest_is_refused(
    own_server: ForkServer, run_job: RunJob
) -> None:
    with pytest.raises(ServerError, match="the probes' text does not match its digest"):
        run_job(own_server, GOOD, job_digest="0" * 64)
    assert own_server.alive()
