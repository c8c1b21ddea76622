"""Fixtures shared by the runtime's tests: an unwalled fork server fed jobs by hand, and a
runner walled in by real bubblewrap with a toy suite whose one probe reports what a worker
sees (one of each per test process: starting them takes seconds)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from grader import Limits, Runner, Suite, load_suite
from grader.runtime import sandbox
from grader.runtime.child.artefacts import open_folder
from grader.runtime.forkclient import ForkServer, digest
from grader.runtime.protocol import Exit, Job, Private, Reply
from tests.conftest import ROOT
from workbook.shared.manifest import Entry
from workbook.shared.manifest import TestSpec as Spec

#: Tests that need bubblewrap's walls raised here.
WALLED = pytest.mark.skipif(
    sandbox.walls_problem(sys.executable) is not None, reason="no walls can be raised here"
)

# ── an unwalled fork server, fed jobs by hand ───────────────────────────────────────────

BARE_LIMITS = Limits(probe_seconds=0.5, grace_seconds=0.5, load_seconds=1.0)

#: Probes calling the submission's ``a()`` and ``b()``.
BARE_PROBES = b"""
from grader.suites.observe import Probes, attempt, need

PROBES = Probes()
PROBES.add("a")(lambda ns: attempt(lambda: need(ns, "a")()))
PROBES.add("b")(lambda ns: attempt(lambda: need(ns, "b")()))
"""


@pytest.fixture(scope="package")
def bare_server() -> Iterator[ForkServer]:
    """One fork server without walls (``walls="off"``), started once."""
    server = ForkServer("1", BARE_LIMITS, walls="off")
    try:
        server.start()
        yield server
    finally:
        server.close()


@dataclass
class JobRun:
    """What one job left: the results pipe's lines, the server's end report, the captured
    output, and the folder the job's files were copied to."""

    events: list[dict[str, Any]]
    end: Exit
    output: str
    folder: Path


RunJob = Callable[..., JobRun]


@pytest.fixture
def run_job(tmp_path: Path) -> RunJob:
    """Hand a server one job of `probes` (names) on `source`, as the runner does; wait for
    its end."""
    count = iter(range(1_000))

    def run(
        server: ForkServer,
        source: str,
        probes: tuple[str, ...] = ("a", "b"),
        text: bytes = BARE_PROBES,
        seams: dict[str, str] | None = None,
        job_digest: str = "",
    ) -> JobRun:
        n = next(count)
        folder = tmp_path / f"job-{n}"
        folder.mkdir()
        output = tmp_path / f"output-{n}.log"
        job = Job(
            suite=str(tmp_path / "probes.py"),
            module="_hidden_probes_unit",
            digest=job_digest or digest(text),
            probes=probes,
            build="99",
            limits=server.limits.as_json(),
        )
        results_r, results_w = os.pipe()
        output_fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        folder_fd = open_folder(str(folder))
        try:
            private = Private(source, seams or {})
            try:
                server.submit(job, text, private, results_w, output_fd, folder_fd)
            finally:
                for fd in (results_w, output_fd, folder_fd):
                    os.close(fd)
            reply = server.receive(timeout=30.0)
            data = b""
            while chunk := os.read(results_r, 1 << 16):
                data += chunk
        finally:
            os.close(results_r)
        assert reply is not None and reply[0] is Reply.EXIT, reply
        events = [json.loads(line) for line in data.splitlines()]
        return JobRun(events, Exit.from_json(reply[1]), output.read_text(), folder)

    return run


# ── a runner walled in by bubblewrap, and what its worker sees ──────────────────────────

WALLED_PROBES = """
from grader.suites.observe import Probes, attempt, need

PROBES = Probes()


@PROBES.add("look")
def look(ns):
    return attempt(lambda: need(ns, "look")())
"""

WALLED_JUDGES = """
from grader.suites.judging import Judges, Fail, ok

JUDGES = Judges()


@JUDGES.add("look")
def _look(obs):
    raise Fail("seen: " + ok(obs("look"), "look()"))
"""

#: The toy submission: each place as a sorted listing, a file's text, or the error it met.
LOOK = """
import json
import os


def _try(fn):
    try:
        return fn()
    except OSError as exc:
        return type(exc).__name__


def _read(path):
    with open(path) as handle:
        return handle.read()


def look():
    seen = {{name: _try(lambda p=path: sorted(os.listdir(p))) for name, path in {places!r}.items()}}
    seen.update({{name: _try(lambda p=path: _read(p)) for name, path in {files!r}.items()}})
    seen["uid"] = os.getuid()
    seen["parent"] = os.getppid()
    seen["environment"] = sorted(os.environ)
    seen["write package"] = _try(lambda: open({package!r}, "w").close() or "wrote")
    seen["write tmp"] = _try(lambda: open("/tmp/mine.txt", "w").close() or "wrote")
    seen["import"] = _try(lambda: __import__("fractions").__name__)
    seen["processes"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
    references = __import__("workbook.siblings").siblings.references()
    seen["seams"] = {{k: str(v) for k, v in references.items()}}
{extra}
    return json.dumps(seen, sort_keys=True)
"""

SHM = """
import ctypes
import socket


def loopback(port):
    # A server on 127.0.0.1 answers a client; the port is then left in TIME_WAIT (the server's
    # side closing first), which lasts a minute in a network namespace shared with the next job.
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        peer, _ = server.accept()
        client.sendall(b"ping")
        said = peer.recv(4).decode()
        peer.close()
        client.recv(1)  # the server's FIN
        client.close()
    return said + " " + free(port)


def free(port):
    with socket.socket() as again:
        try:
            again.bind(("127.0.0.1", port))
        except OSError as exc:
            return type(exc).__name__
    return "free"

def shared_memory(create):
    libc = ctypes.CDLL(None, use_errno=True)
    key = 0x52495431
    segment = libc.shmget(key, 4096, (0o1000 | 0o666) if create else 0)
    return "made" if create and segment >= 0 else ("there" if segment >= 0 else "absent")
"""


@pytest.fixture(scope="package")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("builds")
    for build in ("98", "90"):
        (folder / f"build{build}" / "hidden").mkdir(parents=True)
        (folder / f"build{build}" / "hidden" / "probes.py").write_text(WALLED_PROBES)
        (folder / f"build{build}" / "hidden" / "test_judges.py").write_text(WALLED_JUDGES)
    return folder


@pytest.fixture(scope="package")
def walled_suite(hidden: Path) -> Suite:
    return load_suite("98", hidden)


@pytest.fixture(scope="package")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("outputs")
    (folder / "grades.csv").write_text("learner,total\n")
    return folder


@pytest.fixture(scope="package")
def walled_runner(outputs: Path) -> Iterator[Runner]:
    if sandbox.walls_problem(sys.executable) is not None:
        pytest.skip("no walls can be raised here")
    # Set before the servers start: none of the grader's environment may reach a worker.
    os.environ["RIT_TEST_SECRET"] = "the grading process's own"
    try:
        with Runner(Limits(load_seconds=3.0), hide=(outputs,), walls="bwrap") as runner:
            yield runner.start()
    finally:
        del os.environ["RIT_TEST_SECRET"]


def look_around(
    runner: Runner,
    suite: Suite,
    places: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    extra: str = "",
) -> dict[str, Any]:
    """What the walled worker's ``look()`` reports: `places` listed, `files` read."""
    entry = Entry(suite.build, "build", "toy", "toy.ipynb", "", tests=(Spec("look", 1, "h"),))
    package = str(ROOT / "etl" / "planted-by-a-walls-test.txt")
    source = LOOK.format(places=places or {}, files=files or {}, package=package, extra=extra)
    result = runner.grade_source(suite.build, SHM + source, suite=suite, entry=entry)
    if Path(package).exists():
        Path(package).unlink()
        pytest.fail("the worker wrote into the repository")
    message = result.test("look").message
    assert message.startswith("seen: "), message
    seen: dict[str, Any] = json.loads(message.removeprefix("seen: "))
    return seen
