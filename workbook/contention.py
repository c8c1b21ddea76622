"""Brooker's contention experiment, re-implemented and seeded: why backoff needs jitter.

The model follows the simulator behind Marc Brooker's AWS Architecture Blog post
"Exponential Backoff And Jitter" (2015, aws-samples/aws-arch-backoff-simulator). N clients
start together and each wants to update one row exactly once, with optimistic concurrency:
read the row's version, send a write conditional on that version, and on a conflict back
off and start over. Every network hop takes ``|Normal(10 ms, 2 ms)|``. A *call* is one
conditional write reaching the server (reads are not counted, as in the original); the
*completion time* is when the last client hears that its write succeeded.

Everything is seeded: one `random.Random` per run, derived from the sweep's seed, the
strategy, the client count and the run number, so a repeat of a sweep gives the same numbers
and adding a strategy or a client count does not change the others.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from workbook import palette
from workbook.teaching.backoff_figure import png

Strategy = Literal["no_backoff", "exponential", "equal", "full", "decorrelated"]

#: In the order the post discusses them.
STRATEGIES: tuple[Strategy, ...] = ("no_backoff", "exponential", "equal", "full", "decorrelated")

LABELS: dict[Strategy, str] = {
    "no_backoff": "no backoff",
    "exponential": "exponential, no jitter",
    "equal": "equal jitter",
    "full": "full jitter",
    "decorrelated": "decorrelated jitter",
}

#: A Python port of the simulator at 100 clients: (calls, completion time in ms).
PUBLISHED_AT_100: dict[Strategy, tuple[int, int]] = {
    "no_backoff": (2420, 2023),
    "exponential": (1853, 62924),
    "equal": (813, 6668),
    "full": (795, 4895),
    "decorrelated": (1007, 4617),
}

BASE_MS = 5.0
CAP_MS = 2000.0
NET_MEAN_MS = 10.0
NET_SD_MS = 2.0

_COLOURS: dict[Strategy, str] = {
    "no_backoff": palette.GREY,
    "exponential": palette.VERMILLION,
    "equal": palette.ORANGE,
    "full": palette.BLUE,
    "decorrelated": palette.BLUISH_GREEN,
}
#: Each strategy told by its marker too, not by colour alone.
_MARKERS: dict[Strategy, str] = {
    "no_backoff": "x",
    "exponential": "s",
    "equal": "^",
    "full": "o",
    "decorrelated": "D",
}

# Message kinds on the simulated network.
_READ, _READ_REPLY, _WRITE, _WRITE_REPLY = range(4)


@dataclass(frozen=True)
class Measurement:
    """Mean calls and completion time over `runs` seeded runs of one strategy and client count."""

    strategy: Strategy
    clients: int
    calls: float
    time_ms: float
    runs: int


class _Backoff:
    """One client's backoff state. Decorrelated jitter remembers its previous sleep."""

    def __init__(self, strategy: Strategy, rng: random.Random, base: float, cap: float) -> None:
        self.strategy, self.rng, self.base, self.cap = strategy, rng, base, cap
        self.previous = base

    def sleep_ms(self, failures: int) -> float:
        # As in the original: the n-th conflict's exponential term is base * 2**n.
        window = min(self.cap, self.base * 2.0**failures)
        if self.strategy == "no_backoff":
            return 0.0
        if self.strategy == "exponential":
            return window
        if self.strategy == "equal":
            return window / 2 + self.rng.uniform(0, window / 2)
        if self.strategy == "full":
            return self.rng.uniform(0, window)
        self.previous = min(self.cap, self.rng.uniform(self.base, self.previous * 3))
        return self.previous


def run_once(
    clients: int,
    strategy: Strategy,
    rng: random.Random,
    *,
    base_ms: float = BASE_MS,
    cap_ms: float = CAP_MS,
) -> tuple[int, float]:
    """One race of `clients` writers to completion: (calls, completion time in ms).

    Deterministic for a given `rng` state; every client succeeds exactly once in the end.
    """
    if clients < 1:
        raise ValueError(f"clients must be at least 1, got {clients}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")

    def hop() -> float:
        return abs(rng.normalvariate(NET_MEAN_MS, NET_SD_MS))

    version = 0
    calls = 0
    backoffs = [_Backoff(strategy, rng, base_ms, cap_ms) for _ in range(clients)]
    failures = [0] * clients
    seen_version = [0] * clients
    # (time, sequence, kind, client, payload): the sequence number breaks ties in time
    # deterministically, so two events at the same instant never compare their payloads.
    queue: list[tuple[float, int, int, int, int]] = []
    sequence = 0

    def send(at: float, kind: int, client: int, payload: int = 0) -> None:
        nonlocal sequence
        heapq.heappush(queue, (at, sequence, kind, client, payload))
        sequence += 1

    for client in range(clients):
        send(hop(), _READ, client)
    now = 0.0
    while queue:
        now, _, kind, client, payload = heapq.heappop(queue)
        if kind == _READ:
            send(now + hop(), _READ_REPLY, client, version)
        elif kind == _READ_REPLY:
            seen_version[client] = payload
            send(now + hop(), _WRITE, client)
        elif kind == _WRITE:
            calls += 1
            won = seen_version[client] == version
            if won:
                version += 1
            send(now + hop(), _WRITE_REPLY, client, int(won))
        elif not payload:  # a conflict: back off, then read again
            failures[client] += 1
            send(now + hop() + backoffs[client].sleep_ms(failures[client]), _READ, client)
    return calls, now


def measure(clients: int, strategy: Strategy, *, runs: int = 10, seed: int = 0) -> Measurement:
    """Mean of `runs` seeded races. The same arguments always give the same `Measurement`."""
    total_calls = 0
    total_time = 0.0
    for run in range(runs):
        rng = random.Random(f"contention:{seed}:{strategy}:{clients}:{run}")
        calls, time_ms = run_once(clients, strategy, rng)
        total_calls += calls
        total_time += time_ms
    return Measurement(strategy, clients, total_calls / runs, total_time / runs, runs)


def sweep(
    client_counts: Iterable[int] = range(10, 101, 10),
    strategies: Sequence[Strategy] = STRATEGIES,
    *,
    runs: int = 10,
    seed: int = 0,
) -> list[Measurement]:
    """`measure` for every strategy at every client count."""
    return [
        measure(n, strategy, runs=runs, seed=seed) for n in client_counts for strategy in strategies
    ]


def at(results: Iterable[Measurement], clients: int) -> dict[Strategy, Measurement]:
    """The results for one client count, keyed by strategy."""
    return {r.strategy: r for r in results if r.clients == clients}


def table(results: Iterable[Measurement], clients: int = 100) -> str:
    """A fixed-width table at `clients`: ours next to the published port's numbers."""
    rows = at(results, clients)
    lines = [
        f"{'strategy':<24}{'calls':>8}{'time (ms)':>11}   {'port calls':>15}{'time (ms)':>11}",
    ]
    for strategy in STRATEGIES:
        if strategy not in rows:
            continue
        r = rows[strategy]
        published = (
            f"{PUBLISHED_AT_100[strategy][0]:>15}{PUBLISHED_AT_100[strategy][1]:>11}"
            if clients == 100
            else f"{'':>26}"
        )
        lines.append(f"{LABELS[strategy]:<24}{r.calls:>8.0f}{r.time_ms:>11.0f}   {published}")
    return "\n".join(lines)


class Chart:
    """A figure that shows itself as a PNG in a notebook and reads as one line of text."""

    def __init__(self, figure: Figure, text: str) -> None:
        self.figure, self.text = figure, text

    def _repr_png_(self) -> bytes:
        return png(self.figure)

    def __repr__(self) -> str:
        return self.text


def plot(results: Sequence[Measurement]) -> Chart:
    """Calls and completion time against the number of clients, one line per strategy."""
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    calls_ax, time_ax = fig.subplots(1, 2)
    strategies = [s for s in STRATEGIES if any(r.strategy == s for r in results)]
    runs = results[0].runs if results else 0
    for strategy in strategies:
        mine = sorted((r for r in results if r.strategy == strategy), key=lambda r: r.clients)
        xs = [r.clients for r in mine]
        style = {"color": _COLOURS[strategy], "marker": _MARKERS[strategy], "markersize": 4}
        calls_ax.plot(xs, [r.calls for r in mine], label=LABELS[strategy], **style)
        time_ax.plot(xs, [r.time_ms / 1000 for r in mine], label=LABELS[strategy], **style)
    calls_ax.set_title("Work: conditional writes sent")
    calls_ax.set_xlabel("clients racing for one row")
    calls_ax.set_ylabel("calls (mean per race)")
    time_ax.set_title("Completion: until the last client succeeds")
    time_ax.set_xlabel("clients racing for one row")
    time_ax.set_ylabel("time (s, log scale)")
    time_ax.set_yscale("log")
    # Plain seconds on the log axis: "5" reads faster than "5 × 10⁰".
    time_ax.set_yticks([0.2, 0.5, 1, 2, 5, 10, 20, 50, 100])
    time_ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    time_ax.yaxis.set_minor_formatter(NullFormatter())
    for ax in (calls_ax, time_ax):
        ax.grid(True, alpha=0.3)
        ax.set_xlim(left=0)
    calls_ax.set_ylim(bottom=0)
    calls_ax.legend(loc="upper left", fontsize=9)
    fig.suptitle(
        f"OCC contention, base {BASE_MS:.0f} ms, cap {CAP_MS:.0f} ms, mean of {runs} seeded races"
        " per point"
    )
    counts = sorted({r.clients for r in results})
    span = f"{counts[0]} to {counts[-1]} clients" if counts else "no clients"
    races = "1 race" if runs == 1 else f"{runs} races"
    return Chart(fig, f"contention sweep: {len(strategies)} strategies, {span}, {races} each")
