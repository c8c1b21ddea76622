"""The fault language: what the app does wrong, to which request, written as data.

Faults are scripted per page and per request, so every run of a test sees the same sequence:
``FixtureApp({20: [Fault.unavailable(), None, Fault.revised()]})`` answers the first request for
``offset=20`` with 503, the second normally, the third with a revised page, and every later one
normally. A repeat of the same request is counted, never guessed: the app keeps a request log.
Most faults change one response; `Fault.inserted` changes the listing itself, from that request on.

Every fault has a text form, ``str(fault)``, that `Fault.parse` reads back; `FaultPlan.parse`
and `FaultPlan.describe` do the same for a whole plan (``python -m etl.server --fault``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from etl.server.dates import DateForm, RetryAt

#: How long a scripted hang lasts unless told otherwise: far longer than any sane deadline.
HANG_SECONDS = 3600.0
#: The body of `Fault.bad_json`: a page cut off mid-stream, as a dropped proxy connection leaves it.
TRUNCATED_JSON = b'{"count": 300, "next": null, "previous": null, "results": [{"id": "5d08'

#: How widely a slow tail's healthy latencies spread around their median: the sigma of the
#: log-normal they are drawn from (0.5 puts p99.9 near 4.7 times the median).
SLOW_SIGMA = 0.5

FaultKind = Literal["error", "hang", "bad_json", "revised", "next_to", "inserted", "slow"]


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour for one request. Build them with the class methods."""

    kind: FaultKind
    status: int = 200
    retry_after: str | RetryAt | None = None
    seconds: float = HANG_SECONDS
    next_offset: int = 0
    body: bytes = TRUNCATED_JSON
    launches: int = 0
    median: float = 0.05
    tail: float = 0.0
    seed: int = 0

    @classmethod
    def error(cls, status: int, retry_after: str | int | RetryAt | None = None) -> Fault:
        """Answer `status` with a small JSON error body (and Retry-After, when given).

        `retry_after` is sent as given: an int or digit string is delay-seconds, a `RetryAt`
        becomes an HTTP-date, and any other string goes out verbatim (to test a client's
        handling of a malformed header).
        """
        if not 100 <= status <= 599:
            raise ValueError(f"not an HTTP status: {status}")
        value = str(retry_after) if isinstance(retry_after, int) else retry_after
        return cls("error", status=status, retry_after=value)

    @classmethod
    def unavailable(cls, retry_after: str | int | RetryAt | None = None) -> Fault:
        """503 Service Unavailable, optionally with Retry-After."""
        return cls.error(503, retry_after)

    @classmethod
    def rate_limited(cls, retry_after: str | int | RetryAt | None = 1) -> Fault:
        """429 Too Many Requests, with Retry-After (1 second unless told otherwise)."""
        return cls.error(429, retry_after)

    @classmethod
    def hang(cls, seconds: float = HANG_SECONDS) -> Fault:
        """Say nothing for `seconds` (virtual seconds in-process), then answer normally.

        Over real HTTP the hang ends early if the client hangs up.
        """
        if seconds < 0:
            raise ValueError("a hang cannot last negative time")
        return cls("hang", seconds=seconds)

    @classmethod
    def bad_json(cls, body: bytes = TRUNCATED_JSON) -> Fault:
        """200 with a JSON content type and a body that is not the expected JSON."""
        return cls("bad_json", body=body)

    @classmethod
    def revised(cls) -> Fault:
        """The normal page, except that its first launch has slipped by a day (a new ``net``).

        Script it on a later request for the same page to get a page that changes between
        fetches: same launch id, different content.
        """
        return cls("revised")

    @classmethod
    def next_to(cls, offset: int) -> Fault:
        """The normal page, but its ``next`` link points at `offset` (same limit).

        ``next_to(0)`` on a later page sends a client back to the start; on the last page,
        ``next_to(count)`` leads to an empty final page whose ``next`` is null.
        """
        if offset < 0:
            raise ValueError("offset must be >= 0")
        return cls("next_to", next_offset=offset)

    @classmethod
    def inserted(cls, launches: int = 1) -> Fault:
        """Before this request is answered, `launches` new launches appear at the top of the
        listing and stay there (``count`` grows by as many): every later page shifts down.

        Scripted on a page a client reaches by offset, the list changes under it: that page
        starts with the last `launches` launches of the page before, and the new ones sit on a
        page already read. The walk reads as many rows as ``count`` says, and skips the new
        ones. `FixtureApp.reset` takes them out again.
        """
        if launches < 1:
            raise ValueError("insert at least 1 launch")
        return cls("inserted", launches=launches)

    @classmethod
    def slow_tail(
        cls, median: float = 0.05, tail: float = 0.01, stall: float = 30.0, seed: int = 0
    ) -> Fault:
        """Answer normally, but only after a latency drawn for this request (virtual seconds
        in-process, as for `hang`): most requests take about `median` seconds, log-normally
        spread (`SLOW_SIGMA`); a share `tail` of them stall for `stall` seconds instead.

        The draw depends only on (`seed`, offset, request number), so a fresh app with the same
        script delays the same requests by the same amounts: `delay` says by how much.
        """
        if not median > 0 or not math.isfinite(median):
            raise ValueError(f"median must be a positive number of seconds, not {median}")
        if not 0 <= tail <= 1:
            raise ValueError(f"tail is a share of requests, 0 to 1, not {tail}")
        if not 0 <= stall < math.inf:
            raise ValueError(f"stall must be >= 0 seconds and finite, not {stall}")
        return cls("slow", seconds=stall, median=median, tail=tail, seed=seed)

    def delay(self, offset: int, nth: int) -> float:
        """Seconds a `slow_tail` waits before answering the `nth` request for `offset`
        (0 for every other kind, which waits as its kind says)."""
        if self.kind != "slow":
            return 0.0
        # A string seed is hashed with SHA-512 by `random`: the same draw in every process.
        draw = random.Random(f"slow:{self.seed}:{offset}:{nth}")
        if draw.random() < self.tail:
            return self.seconds
        return self.median * math.exp(SLOW_SIGMA * draw.gauss(0.0, 1.0))

    def __str__(self) -> str:
        if self.kind == "slow":
            defaults = Fault.slow_tail()
            if (self.median, self.tail, self.seconds, self.seed) == (
                defaults.median,
                defaults.tail,
                defaults.seconds,
                defaults.seed,
            ):
                return "slow"
            return f"slow@{self.median:g}:{self.tail:g}:{self.seconds:g}:{self.seed}"
        if self.kind == "error":
            return str(self.status) + ("" if self.retry_after is None else f"@{self.retry_after}")
        if self.kind == "hang":
            return "hang" if self.seconds == HANG_SECONDS else f"hang@{self.seconds:g}"
        if self.kind == "bad_json":
            return "badjson"
        if self.kind == "revised":
            return "revised"
        if self.kind == "inserted":
            return "inserted" if self.launches == 1 else f"inserted@{self.launches}"
        return f"next@{self.next_offset}"

    @classmethod
    def parse(cls, spec: str) -> Fault | None:
        """The inverse of ``str(fault)``; ``ok`` (or ``-``) means "answer normally" (None).

        ``503``, ``503@5``, ``429@date:5``, ``429@rfc850:5``, ``429@asctime:5``, ``429@soon``,
        ``hang``, ``hang@30``, ``badjson``, ``revised``, ``next@0``, ``inserted``,
        ``inserted@3``, ``slow`` (a slow tail with its defaults) and
        ``slow@MEDIAN:TAIL:STALL:SEED`` (``slow@0.05:0.01:30:0``; trailing fields may be left
        out).
        """
        text = spec.strip()
        head, _, arg = text.partition("@")
        try:
            if text in ("ok", "-"):
                return None
            if head.isdigit() and head.isascii():
                return cls.error(int(head), _parse_retry_after(arg) if "@" in text else None)
            if head == "hang":
                return cls.hang(float(arg)) if arg else cls.hang()
            if head == "next" and arg:
                return cls.next_to(int(arg))
            if head == "inserted":
                return cls.inserted(int(arg)) if "@" in text else cls.inserted()
            if head == "slow":
                return _parse_slow(arg) if "@" in text else cls.slow_tail()
            if text == "badjson":
                return cls.bad_json()
            if text == "revised":
                return cls.revised()
        except ValueError as exc:
            raise ValueError(f"bad fault {spec!r}: {exc}") from None
        raise ValueError(
            f"bad fault {spec!r}: expected ok, a status (503, 429@5, 429@date:5), hang[@S], "
            "badjson, revised, next@OFFSET, inserted[@N] or slow[@MEDIAN:TAIL:STALL:SEED]"
        )


def _parse_slow(arg: str) -> Fault:
    fields = arg.split(":")
    if not 1 <= len(fields) <= 4 or not all(fields):
        raise ValueError("slow takes MEDIAN[:TAIL[:STALL[:SEED]]]")
    defaults = Fault.slow_tail()
    given = [float(field) for field in fields[:3]]
    median, tail, stall = given + [defaults.tail, defaults.seconds][len(given) - 1 :]
    seed = int(fields[3]) if len(fields) == 4 else defaults.seed
    return Fault.slow_tail(median, tail, stall, seed)


def _parse_retry_after(arg: str) -> str | RetryAt:
    form, _, seconds = arg.partition(":")
    if seconds and form in ("date", "rfc850", "asctime"):
        date_form: DateForm = "imf" if form == "date" else form  # type: ignore[assignment]
        return RetryAt(int(seconds), date_form)
    return arg


Script = Fault | Sequence[Fault | None]


class FaultPlan:
    """Which request gets which fault: a script per page, keyed by the page's offset.

    A sequence scripts requests in order (the first request for that offset gets item 0;
    ``None`` answers normally; requests past the end answer normally). A single `Fault`
    applies to every request for that offset. Offsets not in the plan always answer normally.
    """

    def __init__(self, script: Mapping[int, Script] | None = None) -> None:
        self._script: dict[int, Script] = {}
        for offset, entry in (script or {}).items():
            if not isinstance(entry, Fault):
                entry = tuple(entry)
                if any(item is not None and not isinstance(item, Fault) for item in entry):
                    raise TypeError(f"offset {offset}: script items must be Fault or None")
            self._script[int(offset)] = entry

    def fault_for(self, offset: int, nth: int) -> Fault | None:
        """The fault for the `nth` request (1-based) for the page at `offset`, if any."""
        entry = self._script.get(offset)
        if entry is None or isinstance(entry, Fault):
            return entry
        return entry[nth - 1] if nth <= len(entry) else None

    @classmethod
    def parse(cls, specs: Sequence[str]) -> FaultPlan:
        """Build a plan from command-line specs, one per page.

        ``OFFSET=F1,F2,...`` scripts requests in order (``20=ok,503@2`` fails the second
        request for offset 20); ``OFFSET=*F`` applies F to every request (``40=*404``).
        """
        script: dict[int, Script] = {}
        for spec in specs:
            where, sep, what = spec.partition("=")
            if not sep or not where.strip().isdigit() or not what.strip():
                raise ValueError(f"bad fault plan {spec!r}: expected OFFSET=FAULT[,FAULT...]")
            offset = int(where)
            if offset in script:
                raise ValueError(f"bad fault plan {spec!r}: offset {offset} scripted twice")
            what = what.strip()
            if what.startswith("*"):
                always = Fault.parse(what[1:])
                if always is None:
                    raise ValueError(f"bad fault plan {spec!r}: '*ok' is the default")
                script[offset] = always
            else:
                script[offset] = [Fault.parse(item) for item in what.split(",")]
        return cls(script)

    def describe(self) -> list[str]:
        """One line per scripted page, in the `parse` syntax."""
        lines = []
        for offset, entry in sorted(self._script.items()):
            if isinstance(entry, Fault):
                lines.append(f"{offset}=*{entry}")
            else:
                lines.append(f"{offset}=" + ",".join(str(f) if f else "ok" for f in entry))
        return lines

    def __repr__(self) -> str:
        return f"FaultPlan.parse({self.describe()!r})"
