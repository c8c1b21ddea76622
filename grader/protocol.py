"""The grading protocol between the runner and its fork servers, in one place.

Three channels, one JSON object per message on each:

- runner → fork server, on the socket: a `Job`, with two descriptors passed alongside it (the
  write end of the results pipe and the file that captures the worker's output);
- fork server → runner, on the socket: `Reply.READY` once (with a `Ready`), then per job
  `Reply.PID` (the worker started) and `Reply.EXIT` (how it ended), or `Reply.ERROR` instead
  of both when the job could not start;
- worker → runner, on the results pipe, one line per `Event`: `LOADED` or `LOAD_ERROR`, then
  per probe `START` and one report (`DONE`, `TIMEOUT` or `PROBE_ERROR`), then `END`. What the
  runner makes of these lines is `grader.stream.ResultStream`.

A worker ends with exit code 0, `CRASHED` when the worker itself failed, or `WALL_FAILED`
when a wall the fork server's self-test said works could not be raised. Standard library only:
the fork server imports this before it forks any worker. Encoding a message and decoding it
again gives an equal message.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

#: Exit code of a worker that failed itself (not through the learner's code).
CRASHED = 70
#: Exit code of a worker that could not raise a wall the server's self-test said works.
WALL_FAILED = 71


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


#: The reports that end one probe.
REPORTS = (Event.DONE, Event.TIMEOUT, Event.PROBE_ERROR)


@dataclass(frozen=True)
class Job:
    """One worker's work: run the probes `probes` of the suite at `suite` on the exported
    source at `source`, in `workdir`, walled in."""

    suite: str
    """Path of the hidden suite's ``probes.py``."""
    probes: tuple[str, ...]
    """The probes to run, in order."""
    source: str
    """Path of the exported submission (mode 600: read while the worker is still root)."""
    workdir: str
    """The worker's scratch folder (its cwd, HOME and TMPDIR)."""
    cgroup: str | None
    """A pids cgroup for the worker to join, or None when it is born inside one."""
    limits: dict[str, Any]
    """`grader.sandbox.Limits` as JSON."""
    secrets: tuple[str, ...]
    """Folders the worker must not see."""
    build: str
    """The graded build: reference seams of earlier builds stay readable."""
    around: str | None
    """The folder holding the repository: nothing else in it is visible."""

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> Job:
        raw = json.loads(data)
        return cls(
            suite=str(raw["suite"]),
            probes=tuple(str(name) for name in raw["probes"]),
            source=str(raw["source"]),
            workdir=str(raw["workdir"]),
            cgroup=raw["cgroup"],
            limits=dict(raw["limits"]),
            secrets=tuple(str(path) for path in raw["secrets"]),
            build=str(raw["build"]),
            around=raw["around"],
        )


@dataclass(frozen=True)
class ServerWalls:
    """The walls a fork server raises around each of its workers (all but the pids cgroup,
    which the runner makes), each up or not, with its sentence for the report."""

    network: bool
    network_text: str
    filesystem: bool
    filesystem_text: str
    user: bool
    user_text: str

    def walls(self) -> dict[str, Any]:
        """Just these fields (of a subclass too), by name."""
        return {f.name: getattr(self, f.name) for f in fields(ServerWalls)}


@dataclass(frozen=True)
class Ready(ServerWalls):
    """The fork server's first message: its walls and its hash seed."""

    hashseed: str
    hash: int
    """``hash("run-it-twice")`` in the server: differs between servers of different seeds."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Ready:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


def encode_reply(kind: Reply, **fields: Any) -> bytes:
    """A fork server's message: ``{"event": kind, **fields}``."""
    return json.dumps({"event": kind, **fields}).encode()


def decode_reply(data: bytes) -> tuple[Reply, dict[str, Any]]:
    """The kind of a fork server's message and its fields; ValueError when it is not one."""
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a fork server's message is a JSON object")
    return Reply(message.pop("event", None)), message
