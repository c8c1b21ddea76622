"""A second correct implementation ("wheat") of build 03's tested seams. Never shipped.

The grader appends this text after the export of solutions/03_build_retry_and_sink.ipynb (its
setup and answer cells), so it redefines `IdempotentSink`, `with_retry` and `backoff_delay` in
the same module namespace and uses the setup cell's names (`asyncio`, `random`, `EtlError`,
`Sink`, `RetryPolicy`, `content_key`, ...) without importing them. It keeps the contract of
ARC.md "Build 03 contract" exactly, written differently (other private names, other loops,
other statement order): a learner test that pins code (byte code, constants, source text,
function identity, private attribute names) rather than behaviour passes on the reference and
fails here.
"""

import itertools


def backoff_delay(policy: RetryPolicy, attempt: int, rng: Any = random) -> float:
    """Seconds to wait after failed attempt `attempt` (from 1): doubled from base_delay per
    attempt, capped at max_delay, then drawn from [0, that] with full jitter."""
    if attempt < 1:
        raise ValueError(f"attempts are numbered from 1, not {attempt}")
    cap = float(policy.max_delay)
    try:
        bound = min(policy.base_delay * 2.0 ** (attempt - 1), cap)
    except OverflowError:  # 2.0 ** 1024 is past every float: the cap was reached long before
        bound = cap
    if policy.jitter != "full":
        return bound
    return rng.uniform(0.0, bound)  # jitter the capped value, never the other way round


async def with_retry(policy: RetryPolicy, op: Callable[[], Awaitable[T]]) -> T:
    """Call and await op() until it returns; a transient EtlError is retried after its
    Retry-After (as given) or the backoff, at most policy.max_attempts calls in all. Anything
    else, and the error of the last attempt, propagates unchanged."""
    for number in itertools.count(start=1):
        try:
            outcome = await op()
        except EtlError as failure:  # only these may be retried; bugs and cancellation pass
            last_call = number >= policy.max_attempts
            if last_call or not failure.is_transient():
                raise
            told = failure.retry_after()
            pause = backoff_delay(policy, number) if told is None else told
            await asyncio.sleep(pause)
        else:
            return outcome
    raise AssertionError("itertools.count never ends")  # pragma: no cover


class IdempotentSink:
    """Writes each row to the destination at most once, by content key. A batch's keys are
    kept only once the destination took it; concurrent loads wait for each other."""

    def __init__(self, inner: Sink) -> None:
        """A sink in front of `inner` that has written no key yet."""
        self._mutex = asyncio.Lock()
        self._written_keys: dict[str, bool] = {}
        self._destination = inner

    @property
    def inner(self) -> Sink:
        return self._destination

    @classmethod
    def with_seen(cls, inner: Sink, keys: Iterable[str]) -> Self:
        made = cls(inner)
        for key in keys:
            made._written_keys[key] = True
        return made

    async def load(self, rows: Sequence[Any]) -> int:
        async with self._mutex:  # held across the destination's write
            keyed = [(content_key(row), row) for row in rows]  # ParseError: nothing kept
            pending: dict[str, Any] = {}
            for key, row in keyed:
                if key in self._written_keys:
                    continue
                pending.setdefault(key, row)
            if len(pending) == 0:
                return 0
            count = await self._destination.load([*pending.values()])
            self._written_keys.update(dict.fromkeys(pending, True))
            return count
