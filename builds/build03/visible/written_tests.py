"""Build 03's test-writing steps: the seams each learner test tests, the bugs of its
``catches`` laid over those seams, and what the seams' contract leaves free.

Every bug here wraps the seam through its public interface (``IdempotentSink(inner)``,
``with_seen``, ``load``; ``with_retry(policy, op)`` and the errors its ``op`` raises), so it is
the same bug over the learner's code (the self-check) and over the reference (the grader).
Each has a twin of the same name in the hidden ``mutants.toml``, proven to fail the same
hidden judges. This module ships to learners: it holds no statement of any answer.
"""

from __future__ import annotations

import textwrap

from workbook.checking.layover import LaidOver, over

#: Test-writing steps: the learner's test -> the seams it tests.
LEARNER_TESTS: dict[str, tuple[str, ...]] = {
    "test_rerun_writes_zero_new_rows": ("IdempotentSink",),
    "test_honors_retry_after": ("with_retry",),
}


def _sink_over(load: str) -> str:
    """A sink laid over the learner's (``under``): same construction, `load` rewritten around
    theirs (``self._laid_under`` is their sink, ``self._laid_inner`` the destination)."""
    return "import asyncio as _laid_asyncio\n" + over(
        "IdempotentSink",
        "class IdempotentSink:\n"
        "    def __init__(self, inner, *args, **kwargs):\n"
        "        self._laid_lock = _laid_asyncio.Lock()\n"
        "        self._laid_inner = inner\n"
        "        self._laid_made = (args, kwargs, None)\n"
        "        self._laid_under = under(inner, *args, **kwargs)\n"
        "    @classmethod\n"
        "    def with_seen(cls, inner, keys):\n"
        "        keys = list(keys)\n"
        "        made = cls(inner)  # a subclass's own __init__ runs, as under the seam's\n"
        "        made._laid_made = ((), {}, keys)\n"
        "        made._laid_under = under.with_seen(inner, keys)\n"
        "        return made\n"
        "    def __getattr__(self, name):  # whatever else the sink offers, as it offers it\n"
        "        if name.startswith('_laid'):\n"
        "            raise AttributeError(name)\n"
        "        return getattr(self._laid_under, name)\n"
        "    async def load(self, rows):\n"
        "        rows = list(rows)\n"
        "        async with self._laid_lock:  # loads stay one at a time, as the sink's own\n"
        + textwrap.indent(load, "            "),
    )


def _retry_over(rewrite: str, *, imports: str = "") -> str:
    """A `with_retry` laid over the learner's (``under``): each error its `op` raises is
    rewritten by `rewrite` (which sees ``err``, ``policy``, ``attempt`` and ``given``, the
    error's own Retry-After) and raised again, the same object. It never decides whether to
    retry: that stays the learner's. What the rewrite changed on an error is put back once
    `with_retry` has read it (at the next attempt, and when it returns or raises), so the
    test only ever sees its errors as it made them."""
    return imports + over(
        "with_retry",
        "async def with_retry(policy, op):\n"
        "    attempt = 0\n"
        "    changed = []\n"
        "    def put_back():\n"
        "        while changed:\n"
        "            err, before = changed.pop()\n"
        "            if before is changed:\n"
        "                err.__dict__.pop('retry_after', None)\n"
        "            else:\n"
        "                err.retry_after = before\n"
        "    async def laid_op():\n"
        "        nonlocal attempt\n"
        "        put_back()\n"
        "        attempt += 1\n"
        "        try:\n"
        "            return await op()\n"
        "        except EtlError as err:\n"
        "            given = err.retry_after()\n"
        "            changed.append((err, err.__dict__.get('retry_after', changed)))\n"
        + textwrap.indent(rewrite, "            ")
        + "            raise\n"
        "    try:\n"
        "        return await under(policy, laid_op)\n"
        "    finally:\n"
        "        put_back()\n",
    )


def _answers(wait: str) -> str:
    """``err.retry_after`` made to answer `wait` (an expression), on that error alone."""
    return f"err.retry_after = lambda _w=({wait}): _w\n"


LAID_OVER: dict[str, LaidOver] = {
    bug.name: bug
    for bug in (
        LaidOver(
            "sink_forgets_the_keys_it_wrote",
            "the sink forgets the keys it wrote, so loading the same rows again writes them"
            " all again",
            _sink_over(
                "args, kwargs, keys = self._laid_made\n"
                "if keys is None:\n"
                "    fresh = under(self._laid_inner, *args, **kwargs)\n"
                "else:\n"
                "    fresh = under.with_seen(self._laid_inner, keys)\n"
                "return await fresh.load(rows)\n"
            ),
            "you load the same rows twice into one sink and count what reached the destination",
        ),
        LaidOver(
            "replay_reports_rows_as_written",
            "a load with nothing new returns how many rows it was given instead of 0",
            _sink_over(
                "written = await self._laid_under.load(rows)\n"
                "return len(rows) if written == 0 else written\n"
            ),
            "you assert that the second load of the same rows returns 0",
        ),
        LaidOver(
            "retry_after_ignored",
            "with_retry ignores Retry-After and waits the backoff instead",
            _retry_over(_answers("None")),
            "the Retry-After you send differs from that attempt's backoff",
        ),
        LaidOver(
            "retry_after_capped_by_max_delay",
            "with_retry cuts Retry-After down to max_delay",
            _retry_over("if given is not None:\n    " + _answers("min(given, policy.max_delay)")),
            "the policy's max_delay is below the Retry-After you send (the default policy's"
            " 10 s cap hides it behind a 5 s Retry-After)",
        ),
        LaidOver(
            "retry_after_added_to_backoff",
            "with_retry waits the backoff plus Retry-After instead of Retry-After alone",
            _retry_over(
                "if given is not None:\n    " + _answers("given + backoff_delay(policy, attempt)")
            ),
            "you assert that the wait equals the Retry-After exactly",
        ),
        LaidOver(
            "time_sleep_instead_of_asyncio_sleep",
            "with_retry waits with time.sleep, blocking the event loop, so the wait never"
            " shows on the loop's clock",
            _retry_over(
                "if err.is_transient():  # whatever wait follows is spent blocking instead\n"
                "    _laid_time.sleep(0.001)  # the loop stands still: no other task runs\n"
                "    " + _answers("0.0"),
                imports="import time as _laid_time\n",
            ),
            "you measure the wait on the event loop's clock (virtual time)",
        ),
    )
}

#: What the seams' contract leaves free, laid over every second wheat: a test that pins one of
#: these pins a choice of the implementation, not the contract.
CONTRACT_VARIANTS: dict[str, tuple[LaidOver, ...]] = {
    # Nothing new means no call of inner.load at all (the hidden suite pins it), and rows
    # reach inner in batch order, once: the sink's contract leaves nothing free to see.
    "IdempotentSink": (),
    # Each attempt could start a loop turn later (an extra `asyncio.sleep(0)`), but a test
    # that records the waits by replacing asyncio.sleep, a common technique, would see it as a
    # wait: the variant would punish a fair test, so with_retry has none.
    "with_retry": (),
}

#: The same layers with nothing changed, laid over every wheat and under every bug: each run
#: then holds one layer per seam of the same shape, so no name or qualified name tells a
#: wheat from a bug (only reading the layers' own code could).
NEUTRAL: tuple[LaidOver, ...] = (
    LaidOver(
        "sink_as_it_is",
        "the sink as it is",
        _sink_over("return await self._laid_under.load(rows)\n"),
    ),
    LaidOver("retry_as_it_is", "with_retry as it is", _retry_over("")),
)
