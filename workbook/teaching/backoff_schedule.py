"""Backoff schedules: when each attempt starts and how long each wait lasts, seeded and pure.

For a `Settings` (the backoff explorer's controls), `schedule` gives one client's attempts and
waits assuming every attempt fails (the worst case a retry policy must be sized for), `herd`
every client's, `crowd` how many retries of a herd reach the server together, and `summary`
the one-line description the explorer shows. The same settings always give the same
schedules; client 1's schedule does not depend on how many clients there are.

These are schedules to look at, not a retry loop: there is no per-attempt backoff function
to call here. That is what build 03 asks a learner to write.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

Jitter = Literal["none", "full", "equal", "decorrelated"]
JITTERS: tuple[Jitter, ...] = get_args(Jitter)

#: How a wait was chosen: by the backoff formula, or by the server's Retry-After.
Source = Literal["backoff", "retry-after"]

#: The most clients the herd view draws; more would only slow the panel down.
MAX_CLIENTS = 200


@dataclass(frozen=True)
class Settings:
    """Everything the explorer's controls set. The defaults are the seed's retry policy:
    4 attempts, 200 ms base delay, 10 s cap, no jitter, one client.

    `retry_after` (seconds), when not None, is what the server answers on the failure of
    attempt `retry_after_on`: it replaces that one wait, uncapped, and nothing else.
    """

    max_attempts: int = 4
    base_delay: float = 0.2
    cap: float = 10.0
    jitter: Jitter = "none"
    retry_after: float | None = None
    retry_after_on: int = 1
    clients: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if not 1 <= self.max_attempts <= 50:
            problems.append(f"max_attempts must be 1..50, got {self.max_attempts}")
        if not self.base_delay > 0:
            problems.append(f"base_delay must be > 0 s, got {self.base_delay}")
        if not self.cap > 0:
            problems.append(f"cap must be > 0 s, got {self.cap}")
        if self.jitter not in JITTERS:
            problems.append(f"jitter must be one of {JITTERS}, got {self.jitter!r}")
        if self.retry_after is not None and not 0 <= self.retry_after < float("inf"):
            problems.append(f"retry_after must be >= 0 s and finite, got {self.retry_after}")
        if self.retry_after_on < 1:
            problems.append(f"retry_after_on must be >= 1, got {self.retry_after_on}")
        if not 1 <= self.clients <= MAX_CLIENTS:
            problems.append(f"clients must be 1..{MAX_CLIENTS}, got {self.clients}")
        if problems:
            raise ValueError("; ".join(problems))


#: The explorer's opening state: the seed's base delay and cap, but enough attempts for the
#: cap to bite (the 7th and 8th waits would be 12.8 s and 25.6 s), and a herd of 20 clients.
OPENING = Settings(max_attempts=9, clients=20)


@dataclass(frozen=True)
class Wait:
    """The wait after attempt `after_attempt` failed, before the next attempt starts.

    `low`..`high` is the range the strategy draws from (equal for no jitter); `uncapped` is
    the top of that range before the cap was applied, so `capped` says whether the cap cut it.
    `computed` is the strategy's value; `seconds` is what is slept (Retry-After may replace it).
    """

    after_attempt: int
    start: float
    seconds: float
    computed: float
    low: float
    high: float
    uncapped: float
    source: Source

    @property
    def capped(self) -> bool:
        """The cap cut the range this wait is drawn from (or, without jitter, the wait)."""
        return self.uncapped > self.high

    @property
    def cut(self) -> bool:
        """The wait slept is the cap itself, because the cap cut it.

        Without jitter every capped wait is; with full or equal jitter a draw from a cut range
        still lands below the cap, so it is not; decorrelated jitter draws first and caps after,
        so a draw above the cap becomes exactly the cap.
        """
        return self.source == "backoff" and self.capped and self.computed >= self.high

    @property
    def end(self) -> float:
        return self.start + self.seconds


@dataclass(frozen=True)
class Schedule:
    """One client's attempts and waits when every attempt fails.

    N attempts have exactly N-1 waits: nobody waits after the last attempt, they give up.
    """

    client: int
    attempts: tuple[float, ...]
    waits: tuple[Wait, ...]

    @property
    def total_wait(self) -> float:
        return sum(w.seconds for w in self.waits)

    @property
    def retries(self) -> tuple[float, ...]:
        """When each retry (every attempt after the first) starts."""
        return self.attempts[1:]


def schedule(settings: Settings, client: int = 0) -> Schedule:
    """Client `client`'s schedule (0 is "client 1"). Seeded by (settings.seed, client)."""
    # A string seed is hashed with SHA-512 by `random`, the same in every process.
    rng = random.Random(f"backoff-explorer:{settings.seed}:{client}")
    base, cap = settings.base_delay, settings.cap
    now = 0.0
    attempts = [now]
    waits: list[Wait] = []
    previous = base  # decorrelated jitter grows from the previous wait
    for n in range(1, settings.max_attempts):
        exponential = base * 2.0 ** (n - 1)
        window = min(cap, exponential)
        if settings.jitter == "none":
            low, high, uncapped, computed = window, window, exponential, window
        elif settings.jitter == "full":
            low, high, uncapped = 0.0, window, exponential
            computed = rng.uniform(0.0, window)
        elif settings.jitter == "equal":
            low, high, uncapped = window / 2, window, exponential
            computed = window / 2 + rng.uniform(0.0, window / 2)
        else:
            low, high, uncapped = min(cap, base), min(cap, 3 * previous), 3 * previous
            computed = min(cap, rng.uniform(base, 3 * previous))
            previous = computed
        seconds = computed
        source: Source = "backoff"
        if settings.retry_after is not None and n == settings.retry_after_on:
            # The server's number wins as given. The strategy's draw above still happened,
            # so switching Retry-After on or off changes this wait and no other.
            seconds, source = settings.retry_after, "retry-after"
        waits.append(Wait(n, now, seconds, computed, low, high, uncapped, source))
        now += seconds
        attempts.append(now)
    return Schedule(client, tuple(attempts), tuple(waits))


def herd(settings: Settings) -> tuple[Schedule, ...]:
    """Every client's schedule; all clients fail together at time 0 (one outage hits all)."""
    return tuple(schedule(settings, c) for c in range(settings.clients))


#: The herd's crowding is measured as the most retries arriving within any window this long
#: (about one request's service time): 50 clients without jitter put all 50 in one window.
CROWD_WINDOW = 0.010


def rolling(
    schedules: Sequence[Schedule], window: float = CROWD_WINDOW
) -> tuple[list[float], list[int]]:
    """How many retries reached the server within the last `window` seconds, over time.

    Returns a step function as ``(edges, counts)``: ``counts[i]`` holds from ``edges[i]`` to
    ``edges[i + 1]`` (``len(edges) == len(counts) + 1``; both empty without retries). A retry
    at ``t`` counts from ``t`` until just after ``t + window``, so retries exactly `window`
    apart are counted together, as `crowd` does. Its maximum is `crowd`.
    """
    # +1 when a retry arrives, -1 once it is older than the window; arrivals before departures
    # at one instant, so a window's two ends both count.
    events = sorted(
        [(t, 0, 1) for s in schedules for t in s.retries]
        + [(t + window + _SLACK, 1, -1) for s in schedules for t in s.retries]
    )
    edges: list[float] = []
    counts: list[int] = []
    level = 0
    for at, _order, step in events:
        level += step
        if edges and at == edges[-1]:
            counts[-1] = level
        else:
            edges.append(at)
            counts.append(level)
    if counts:
        counts.pop()  # the level after the last event is 0: the last edge closes the function
    return edges, counts


def crowd(schedules: Sequence[Schedule], window: float = CROWD_WINDOW) -> int:
    """The most retries, across all `schedules`, that start within any `window` seconds."""
    return max(rolling(schedules, window)[1], default=0)


#: Float slack on the window's far end, so that 10 ms computed as 0.21 - 0.2 still counts.
_SLACK = 1e-12


def seconds_text(seconds: float) -> str:
    """Seconds as the explorer writes them: two decimals below a second, else one."""
    return f"{seconds:.2f}" if 0 < seconds < 0.95 else f"{seconds:.1f}"


def plural(n: int, word: str) -> str:
    """``1 attempt``, ``2 attempts``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary(settings: Settings) -> str:
    """One line, e.g. ``4 attempts · 3 sleeps · total wait 1.4 s · cap 10.0 s`` (client 1)."""
    one = schedule(settings)
    parts = [
        plural(settings.max_attempts, "attempt"),
        plural(len(one.waits), "sleep"),
        f"total wait {seconds_text(one.total_wait)} s",
        f"cap {settings.cap:.1f} s",
    ]
    capped = sum(w.capped and w.source == "backoff" for w in one.waits)
    if capped:
        parts.append(f"cap bites on {capped} of {len(one.waits)}")
    if settings.retry_after is not None:
        if settings.retry_after_on < settings.max_attempts:
            parts.append(
                f"Retry-After {seconds_text(settings.retry_after)} s after attempt "
                f"{settings.retry_after_on}"
            )
        else:
            parts.append(f"Retry-After after attempt {settings.retry_after_on}: never reached")
    if settings.jitter != "none":
        parts.append(f"{settings.jitter} jitter, seed {settings.seed}")
    if settings.clients > 1:
        peak = crowd(herd(settings))
        parts.append(
            f"{settings.clients} clients, up to {peak} retries within {CROWD_WINDOW * 1000:.0f} ms"
        )
    return " · ".join(parts)
