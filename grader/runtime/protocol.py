"""The grading protocol between the runner and its fork servers, in one place.

Three channels, one JSON object per message on each:

- runner → fork server, on the socket: `Request.JOB` (a `Job`, with the descriptors of
  `JOB_FDS` passed alongside it), `Request.KILL` (stop the job in flight) or, between jobs
  only, `Request.WARM` (prepare for learner tests; no reply);
- fork server → runner, on the socket: `Reply.READY` once (a `Ready`), then per job
  `Reply.PID` (the worker started) and `Reply.EXIT` (an `Exit`: how it ended), or
  `Reply.ERROR` instead of both when the job could not start;
- worker → runner, on the results pipe, one line per `Event`: `LOADED` or `LOAD_ERROR`, then
  per probe `START`, its `TICK`s (the ledger of virtual time, `grader.classes.ledger`) and one
  report (`DONE`, `TIMEOUT` or `PROBE_ERROR`), then `END`. What the runner makes of these lines is
  `grader.runtime.stream.ResultStream`.

The learner's code shares the worker's process, so it can write on the results pipe and end
with any exit code: neither ever speaks for the grader. Whether the walls rose comes out of
band, in `Exit.up` and `Exit.wall`, written by the fork server from a pipe the worker closes
before the learner's code exists. Standard library only: this file is bound, alone, into the
walls. Encoding a message and decoding it again gives an equal message.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any, Literal, get_args

#: Exit code of a worker that failed itself after its walls were up. A learner's code can
#: exit with it too, so it is only ever read as the learner's.
CRASHED = 70
#: The descriptors passed with a job, in this order: the write end of the results pipe, the
#: file capturing the worker's output, the job's private input (`Private`, read by the worker
#: alone), the probes module's text, and the folder that receives the worker's artefacts.
JOB_FDS = ("results", "output", "private", "suite", "artefacts")

WallsMode = Literal["bwrap", "off", "container"]
"""``"bwrap"`` (walls raised by bubblewrap and each worker), ``"off"`` (none: the instructor's
explicit choice) or ``"container"`` (none raised here: one submission per disposable
container, whose walls are trusted)."""
WALLS_MODES: tuple[WallsMode, ...] = get_args(WallsMode)


def walls_mode(text: str) -> WallsMode:
    """`text` as one of the `WALLS_MODES`; ValueError when it names none."""
    for mode in WALLS_MODES:
        if text == mode:
            return mode
    raise ValueError(f"not a walls mode: {text!r}")


@dataclass(frozen=True)
class Limits:
    """Per-child limits. Times are seconds, sizes bytes."""

    probe_seconds: float = 1.0
    """Real time one probe may take before SIGALRM stops it inside the child."""
    grace_seconds: float = 1.0
    """Extra real time before the parent kills a child whose probe ignored the alarm."""
    load_seconds: float = 5.0
    """Real time for the learner's setup and answer cells to execute (imports included)."""
    budget_seconds: float = 20.0
    """Real time for one submission in all; probes not started by then are not run."""
    cpu_seconds: int = 20
    memory_bytes: int = 512 * 2**20
    """Address space a child may add on top of what the fork server already maps."""
    file_bytes: int = 8 * 2**20
    """Largest file the child may write (its captured output included)."""
    max_pids: int = 32
    """Processes and threads of one worker, the worker included."""
    output_bytes: int = 64 * 2**10
    """Captured stdout+stderr kept per child; the rest is counted and dropped."""
    scratch_bytes: int = 64 * 2**20
    """Size of each private, in-memory folder of a walled worker (scratch, /tmp, /dev/shm)."""

    def as_json(self) -> dict[str, float | int]:
        return asdict(self)


class Request(StrEnum):
    """What the runner says on a fork server's socket, under the message's ``"request"`` key."""

    JOB = "job"
    KILL = "kill"
    WARM = "warm"
    """Learner tests will run here: warm Hypothesis up (once; sent between jobs only)."""


class Reply(StrEnum):
    """What a fork server says on its socket, under the message's ``"event"`` key."""

    READY = "ready"
    PID = "pid"
    EXIT = "exit"
    ERROR = "error"


class Event(StrEnum):
    """What a worker writes on the results pipe, under the line's ``"event"`` key."""

    LOADED = "loaded"
    LOAD_ERROR = "load_error"
    START = "start"
    DONE = "done"
    TIMEOUT = "timeout"
    PROBE_ERROR = "probe_error"
    END = "end"
    TICK = "tick"
    """While a probe runs: one line of the parent's ledger of virtual time
    (`grader.classes.ledger`)."""


#: The reports that end one probe.
REPORTS = (Event.DONE, Event.TIMEOUT, Event.PROBE_ERROR)


@dataclass(frozen=True)
class Job:
    """One worker's work: run the probes `probes` of the suite whose text comes with it (named
    `module`, from `suite`) on the exported source of its private input, walled in."""

    suite: str
    """Where the probes module lives on the grader's side (its ``__file__`` in the worker)."""
    module: str
    """The probes module's name in ``sys.modules`` (it begins with ``_hidden_``)."""
    digest: str
    """SHA-256 of the probes module's text: the server imports each text once."""
    probes: tuple[str, ...]
    """The probes to run, in order."""
    build: str
    """The graded build."""
    limits: dict[str, Any]
    """`Limits` as JSON."""

    def to_json(self) -> bytes:
        return json.dumps({"request": Request.JOB, **asdict(self)}).encode()

    @classmethod
    def from_json(cls, data: bytes | str | dict[str, Any]) -> Job:
        raw = json.loads(data) if isinstance(data, (bytes, str)) else data
        return cls(
            suite=str(raw["suite"]),
            module=str(raw["module"]),
            digest=str(raw["digest"]),
            probes=tuple(str(name) for name in raw["probes"]),
            build=str(raw["build"]),
            limits=dict(raw["limits"]),
        )


@dataclass(frozen=True)
class Private:
    """What only the worker reads (never the server, which outlives it and forks the next
    learner's worker): the exported submission, and the reference seams of the earlier builds
    this build may load (text by build number; none for a build that may not)."""

    source: str
    seams: dict[str, str]

    def take_source(self) -> str:
        """The submission's text, handed over once: the field is emptied (frozen or not), so
        that no frame up the learner's stack (the worker's, which holds this object) keeps the
        text a test could read: a wheat's or chaff's whole code, at grading."""
        source = self.source
        object.__setattr__(self, "source", "")
        return source

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Private:
        raw = json.loads(data)
        return cls(str(raw["source"]), {str(k): str(v) for k, v in raw["seams"].items()})


@dataclass(frozen=True)
class Ready:
    """The fork server's first message: how it walls its workers in, and its hash seed."""

    mode: WallsMode
    privileged: bool
    """The server is root: each worker drops to a uid of its own (else it keeps the
    instructor's, in user namespaces of its own)."""
    hashseed: str
    hash: int
    """``hash("run-it-twice")`` in the server: differs between servers of different seeds."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ready:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class Exit:
    """How one job ended, as the fork server saw it."""

    code: int | None
    """The learner's process's exit code (negative: the signal), None if it never reported."""
    up: bool
    """The walls were up before the learner's code ran: whatever happened next is the
    learner's doing."""
    wall: str | None = None
    """The wall that could not be raised (a grader fault), in words."""
    kept: int = 0
    """Artefacts (files) copied out of the worker's scratch folder."""
    dropped: int = 0
    """Files left in the scratch folder but not copied (not regular, or over the bounds)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Exit:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def encode_reply(kind: Reply, **fields: Any) -> bytes:
    """A fork server's message: ``{"event": kind, **fields}``."""
    return json.dumps({"event": kind, **fields}).encode()


def decode_reply(data: bytes) -> tuple[Reply, dict[str, Any]]:
    """The kind of a fork server's message and its fields; ValueError when it is not one."""
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a fork server's message is a JSON object")
    return Reply(message.pop("event", None)), message


def decode_request(data: bytes) -> tuple[Request, dict[str, Any]]:
    """The kind of a runner's message and its fields; ValueError when it is not one."""
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a runner's message is a JSON object")
    return Request(message.pop("request", None)), message
