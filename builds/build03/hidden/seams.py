# The reference seams of build 03, for grading later builds: the grader gives build 05 (and on)
# this module in place of the learner's own build 03, so each build is graded alone. It is the
# export of solutions/03_build_retry_and_sink.ipynb, kept with the hidden suites and never
# released; tests/unit/workbook/test_siblings.py fails when the code here and there differ.
# To refresh:
#   python -m workbook export solutions/03_build_retry_and_sink.ipynb \
#       -o builds/build03/hidden/seams.py && ruff format builds/build03/hidden/seams.py

# %% cell 2 [setup]
# Setup: the imports and givens your answers may use. Run it first; leave it as it is.
import asyncio
import dataclasses
import hashlib
import json
import math
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeVar

from etl import EtlError, ParseError, Sink

T = TypeVar("T")

# FNV-1a, 64-bit: the published offset basis and prime (for the warm-up).
FNV_OFFSET_BASIS = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK_64 = 0xFFFFFFFFFFFFFFFF  # Python ints never wrap around: keep the low 64 bits yourself


@dataclass(frozen=True)
class Row:
    """Notebook 02's toy row: a name and an altitude in kilometres."""

    name: str
    alt_km: float


# %% cell 5 [answer]
# ✎ answer: step 0
def fnv1a_64(data: bytes) -> str:
    """FNV-1a (64-bit) of `data` as 16 lowercase hex digits: same bytes, same digest."""
    h = FNV_OFFSET_BASIS
    for byte in data:
        h ^= byte
        h = (h * FNV_PRIME) & MASK_64
    return f"{h:016x}"


# %% cell 10 [answer]
# ✎ answer: step 1
def content_id(kind: str, canonical: str) -> str:
    """sha256(kind ‖ 0x00 ‖ canonical) in lowercase hex: equal inputs give equal ids anywhere."""
    digest = hashlib.sha256()
    digest.update(kind.encode("utf-8"))
    digest.update(b"\x00")  # ends the kind: ("ab", "c") and ("a", "bc") stay apart
    digest.update(canonical.encode("utf-8"))
    return digest.hexdigest()


# %% cell 15 [answer]
# ✎ answer: step 2
def content_key(row: Any) -> str:
    """content_id("row", the row's canonical JSON). Equal rows, equal keys; a row with no
    canonical form raises ParseError, never a default key."""
    fields = dataclasses.asdict(row)
    try:
        canonical = json.dumps(
            fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (ValueError, TypeError) as exc:
        # No canonical form, no key: any default would merge distinct rows into one.
        raise ParseError(f"{type(row).__name__} has no canonical JSON form: {exc}") from exc
    return content_id("row", canonical)


# %% cell 21 [answer]
# ✎ answer: step 3
class IdempotentSink:
    """A sink in front of `inner` that writes each row (by content_key) at most once.
    Loading rows again writes nothing; a failed write remembers nothing, so a retry writes."""

    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self._seen: set[str] = set()
        # Held across the inner write: keys are remembered only once it succeeds, so a
        # concurrent load must wait to see them (or to write the rows if the write failed).
        self._lock = asyncio.Lock()

    @classmethod
    def with_seen(cls, inner: Sink, keys: Iterable[str]) -> Self:
        sink = cls(inner)
        sink._seen.update(keys)
        return sink

    async def load(self, rows: Sequence[Any]) -> int:
        async with self._lock:
            fresh: dict[str, Any] = {}  # key -> first row with it, in batch order
            for row in rows:
                key = content_key(row)  # a ParseError leaves nothing remembered
                if key not in self._seen and key not in fresh:
                    fresh[key] = row
            if not fresh:
                return 0
            written = await self.inner.load(list(fresh.values()))
            self._seen.update(fresh)  # only now: had the write failed, a retry would redo it
            return written


# %% cell 27 [answer]
# ✎ answer: step 4
@dataclass(frozen=True)
class RetryPolicy:
    """How hard to retry: calls in all, the first wait, the cap, the jitter. Bad values raise."""

    max_attempts: int = 4
    base_delay: float = 0.2
    max_delay: float = 10.0
    jitter: Literal["none", "full"] = "none"

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {self.max_attempts}")
        for name in ("base_delay", "max_delay"):
            seconds = getattr(self, name)
            if not (math.isfinite(seconds) and seconds >= 0):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {seconds}")
        if self.max_delay < self.base_delay:
            raise ValueError(
                f"max_delay {self.max_delay} is below base_delay {self.base_delay}"
                " (milliseconds where seconds were meant?)"
            )
        if self.jitter not in ("none", "full"):
            raise ValueError(f"jitter must be 'none' or 'full', got {self.jitter!r}")


def backoff_delay(policy: RetryPolicy, attempt: int, rng: Any = random) -> float:
    """Seconds to wait after failed attempt number `attempt` (from 1): capped, maybe jittered."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    try:
        ceiling = float(min(policy.base_delay * 2 ** (attempt - 1), policy.max_delay))
    except OverflowError:  # 2 ** (attempt - 1) is past any float: the cap was hit long ago
        ceiling = float(policy.max_delay)
    # Jitter after the cap, never before: capping a jittered value brings the herd back.
    return full_jitter(ceiling, rng) if policy.jitter == "full" else ceiling


# %% cell 33 [answer]
# ✎ answer: step 5
async def with_retry(policy: RetryPolicy, op: Callable[[], Awaitable[T]]) -> T:
    """Await op() until it succeeds, retrying only transient EtlErrors: at most
    policy.max_attempts calls, waiting Retry-After or the backoff between them. Every other
    error, and the last one, is raised as it is."""
    attempt = 1
    while True:
        try:
            return await op()
        except EtlError as err:  # anything else is a bug (or a cancellation): it passes through
            if not err.is_transient() or attempt >= policy.max_attempts:
                raise
            wait = err.retry_after()
            await asyncio.sleep(backoff_delay(policy, attempt) if wait is None else wait)
        attempt += 1


# %% cell 38 [answer]
# ✎ answer: step 6 (stretch)
def full_jitter(ceiling: float, rng: Any) -> float:
    """A wait drawn uniformly from [0, ceiling] with `rng`: the same seed gives the same waits."""
    return rng.uniform(0.0, ceiling)
