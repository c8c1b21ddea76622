"""Hypothesis with settings a learner's test cannot change: the same verdict on every run.

Both places that run a learner's tests against mutants (the self-check,
`workbook.checking.learnertests`, and the grader's probe of one learner test) load these settings
first:

- ``derandomize=True``, ``database=None``: examples come from the test itself, never from a
  seed or from earlier runs, so a repeat draws the same examples;
- ``deadline=None``: a slow, loaded machine never turns a pass into a failure;
- ``max_examples`` from the manifest;
- no shrinking phase: only *whether* a test fails counts here, and shrinking a failure a mutant
  provoked costs several times the run that found it.
- no constants read from the source of the modules a process has loaded (Hypothesis mixes
  those into its examples): the examples depend on the test alone, never on what else ran.

A test's own ``@settings`` (on a ``@given`` test) and the ``settings=`` it hands
``run_state_machine_as_test`` keep everything else they say (``stateful_step_count``, say),
but these values win. What is not held (a ``@given`` defined inside a test, plain `random`)
starts from fixed seeds instead: the global `random` and Hypothesis's own seed for tests that
are not derandomized. The test runs in its own process, so a test that works to undo all
this can only make its own grade a lottery, never better than the honest test's; `os.urandom`
and `hash()` (never pinned: the workbook teaches that bug) stay what they are. Loading twice
changes nothing.
"""

from __future__ import annotations

import functools
import random
import sys
from typing import Any

PROFILE = "run-it-twice-fixed"
#: Examples per run where the manifest names none (a `[[learner_test]]`'s default).
DEFAULT_EXAMPLES = 25
#: The seed of the global `random` and of Hypothesis's tests that are not derandomized.
SEED = 0
#: The examples `load` was given (None: not loaded in this process).
_examples: int | None = None


def fixed(max_examples: int) -> dict[str, Any]:
    """The settings every learner test runs with against mutants, as keyword arguments."""
    from hypothesis import Phase

    return {
        "derandomize": True,
        "database": None,
        "deadline": None,
        "max_examples": max_examples,
        "phases": (Phase.explicit, Phase.reuse, Phase.generate),
    }


def load(max_examples: int) -> None:
    """Make `fixed` the default profile, hold state machines to it whatever settings they are
    run with, seed the global `random` and Hypothesis's tests that are not derandomized with
    `SEED`, and read no constants from loaded modules: every run draws the same."""
    from hypothesis import core as hypothesis_core
    from hypothesis import settings as Settings
    from hypothesis import stateful

    global _examples
    _examples = max_examples
    values = fixed(max_examples)
    Settings.register_profile(PROFILE, **values)
    Settings.load_profile(PROFILE)
    random.seed(SEED)
    # What pytest's --hypothesis-seed sets; Hypothesis annotates it as None only.
    hypothesis_core.global_force_seed = SEED  # type: ignore[assignment]
    # Loaded twice, wrap the original once: the latest `max_examples` wins.
    run = getattr(stateful.run_state_machine_as_test, "__wrapped__", None)
    run = run or stateful.run_state_machine_as_test

    @functools.wraps(run)
    def held(state_machine_factory: Any, *, settings: Any = None, **kwargs: Any) -> None:
        base = settings if isinstance(settings, Settings) else None
        run(state_machine_factory, settings=Settings(base, **values), **kwargs)

    # `RuleBasedStateMachine.TestCase` looks the name up here too, so both paths are held.
    stateful.run_state_machine_as_test = held
    _no_local_constants()


def _no_local_constants() -> None:
    """Hypothesis mixes into its examples constants it reads from the source of every "local"
    module loaded (neither the standard library nor site-packages): here `etl`, `workbook`
    and the grader's runtime, whichever of them a process happened to import before. A
    test's examples then hung on that history, and each walled worker parsed those files
    again (30 ms: it has no cache folder it may write). Held empty, the examples depend on
    the test alone; Hypothesis's own constants stay. (Its private hook: where a later
    Hypothesis has no such function, nothing changes.)"""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        return
    if not callable(getattr(providers, "_get_local_constants", None)):
        return
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if isinstance(cache, dict):
        cache.clear()  # filled with what an earlier run read


def hold(test: Any) -> None:
    """Hold a ``@given`` test's own ``@settings`` to `fixed` with the examples `load` was
    given (not a profile the test loaded itself; it keeps what else it says). Does nothing
    before `load`."""
    if _examples is None or "hypothesis" not in sys.modules:
        return
    from hypothesis import settings as Settings

    inner = getattr(test, "_hypothesis_internal_use_settings", None)
    if isinstance(inner, Settings):
        test._hypothesis_internal_use_settings = Settings(inner, **fixed(_examples))


def warm_up() -> None:
    """Run one tiny state machine and one ``@given`` test, so that a process forked after this
    finds Hypothesis's strategies and engine already built (about 0.1 s a worker, otherwise)."""
    from hypothesis import given, settings, stateful, strategies

    _no_local_constants()

    class Warm(stateful.RuleBasedStateMachine):
        @stateful.rule(flag=strategies.booleans(), n=strategies.integers(0, 3))
        def step(self, flag: bool, n: int) -> None:
            pass

        @stateful.invariant()
        def holds(self) -> None:
            pass

    quick = settings(max_examples=2, database=None, derandomize=True, deadline=None)
    stateful.run_state_machine_as_test(Warm, settings=quick)

    # Not `text()`: its character tables take about 6 s to build where Hypothesis has no
    # cache folder (a walled worker), and no learner test of this workbook needs them.
    @quick
    @given(strategies.lists(strategies.integers()), strategies.sampled_from("ab"))
    def sample(xs: list[int], letter: str) -> None:
        pass

    sample()
