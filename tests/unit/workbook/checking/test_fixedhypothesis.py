"""`workbook.checking.fixedhypothesis`: a learner's test cannot change the settings it is graded
with."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import core as hypothesis_core
from hypothesis import given, settings, stateful, strategies
from hypothesis.internal.conjecture import providers

from workbook.checking import fixedhypothesis


@pytest.fixture
def held() -> Iterator[None]:
    original = stateful.run_state_machine_as_test
    fixedhypothesis.load(3)
    try:
        yield
    finally:
        _unload(original)


LOCAL_CONSTANTS = providers._get_local_constants


def _unload(original: object) -> None:
    stateful.run_state_machine_as_test = original  # type: ignore[assignment]
    providers._get_local_constants = LOCAL_CONSTANTS
    providers.CONSTANTS_CACHE.cache.clear()
    settings.load_profile("default")
    hypothesis_core.global_force_seed = None
    fixedhypothesis._examples = None


def _machine(seen: list[list[int]]) -> type[stateful.RuleBasedStateMachine]:
    class Counting(stateful.RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            seen.append([])

        @stateful.rule(n=strategies.integers(0, 10**6))
        def draw(self, n: int) -> None:
            seen[-1].append(n)

    return Counting


@pytest.mark.usefixtures("held")
def test_a_state_machine_cannot_ask_for_more_examples_or_fresh_randomness() -> None:
    runs: list[list[list[int]]] = []
    for _ in range(2):
        seen: list[list[int]] = []
        asked = settings(max_examples=500, derandomize=False, stateful_step_count=4)
        stateful.run_state_machine_as_test(_machine(seen), settings=asked)
        runs.append(seen)
    assert 1 <= len(runs[0]) <= 3, f"ran {len(runs[0])} examples, the fixed number is 3"
    assert runs[0] == runs[1], "two runs drew different examples: not derandomized"
    assert all(len(steps) <= 4 for steps in runs[0]), "its own stateful_step_count is kept"


@pytest.mark.usefixtures("held")
def test_the_testcase_path_is_held_too() -> None:
    seen: list[list[int]] = []
    case = _machine(seen).TestCase
    case.settings = settings(max_examples=500, derandomize=False)
    case("runTest").runTest()
    assert 1 <= len(seen) <= 3


@pytest.mark.usefixtures("held")
def test_a_given_test_keeps_its_own_settings_but_not_these() -> None:
    calls: list[int] = []

    @settings(max_examples=500, derandomize=False)
    @given(strategies.integers())
    def test(n: int) -> None:
        calls.append(n)

    fixedhypothesis.hold(test)
    test()
    first = list(calls)
    calls.clear()
    test()
    assert 1 <= len(first) <= 3 and first == calls


@pytest.mark.usefixtures("held")
def test_a_failure_is_reported_without_shrinking() -> None:
    tried: list[int] = []

    @given(strategies.integers(0, 10**9))
    def test(n: int) -> None:
        tried.append(n)
        assert n < 10

    with pytest.raises(AssertionError):
        test()
    assert len(tried) <= 3, "shrinking would have run the test again and again"


def test_loading_twice_wraps_once() -> None:
    original = stateful.run_state_machine_as_test
    try:
        fixedhypothesis.load(3)
        fixedhypothesis.load(5)
        assert stateful.run_state_machine_as_test.__wrapped__ is original  # type: ignore[attr-defined]
    finally:
        _unload(original)


@pytest.mark.usefixtures("held")
def test_a_profile_the_test_loads_itself_does_not_change_the_examples() -> None:
    settings.register_profile("mine", max_examples=1)
    settings.load_profile("mine")
    calls: list[int] = []

    @given(strategies.integers())
    def test(n: int) -> None:
        calls.append(n)

    fixedhypothesis.hold(test)
    test()
    assert len(calls) == 3, f"{len(calls)} examples ran, the manifest's number is 3"


def test_what_is_not_held_starts_from_fixed_seeds() -> None:
    def run() -> tuple[float, list[int]]:
        original = stateful.run_state_machine_as_test
        fixedhypothesis.load(3)
        try:
            drawn: list[int] = []

            @settings(derandomize=False, database=None)
            @given(strategies.integers(0, 10**9))
            def nested(n: int) -> None:  # defined inside a test: never held
                drawn.append(n)

            nested()
            return random.random(), drawn
        finally:
            _unload(original)

    assert run() == run()


def test_examples_never_hang_on_the_modules_a_process_loaded(tmp_path: Path) -> None:
    source = tmp_path / "shop_rules.py"
    source.write_text("SECRET_LIMIT = 987654321\n", encoding="utf-8")
    module = types.ModuleType("shop_rules")
    module.__file__ = str(source)
    sys.modules["shop_rules"] = module
    original = stateful.run_state_machine_as_test
    try:
        # Unheld, Hypothesis draws constants from the source of every local module loaded.
        assert 987654321 in LOCAL_CONSTANTS().integers
        fixedhypothesis.load(3)
        # What a provider drawing examples reads, as Hypothesis looks it up.
        assert len(providers.HypothesisProvider(None)._local_constants) == 0
    finally:
        del sys.modules["shop_rules"]
        _unload(original)
