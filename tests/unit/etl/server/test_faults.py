"""The fault language (`etl.server.faults`): `Fault` specs and `FaultPlan` scripts, parsed,
printed back, and refused when they make no sense."""

from __future__ import annotations

import pytest

from etl.server import HANG_SECONDS, Fault, FaultPlan, RetryAt


def test_fault_specs_round_trip() -> None:
    specs = [
        "503", "503@5", "429@date:5", "429@rfc850:2", "429@asctime:1", "429@soon",
        "hang", "hang@30", "badjson", "revised", "next@0", "404", "inserted", "inserted@3",
    ]  # fmt: skip
    assert [str(Fault.parse(spec)) for spec in specs] == specs
    assert Fault.parse("ok") is None
    assert Fault.parse("429@date:5") == Fault.rate_limited(RetryAt(5, "imf"))
    assert Fault.parse("inserted@3") == Fault.inserted(3) != Fault.inserted()


def test_plan_parse_and_describe() -> None:
    plan = FaultPlan.parse(["20=ok,503@2", "40=*404", "0=hang"])
    assert plan.describe() == ["0=hang", "20=ok,503@2", "40=*404"]
    assert plan.fault_for(20, 1) is None
    assert plan.fault_for(20, 2) == Fault.unavailable("2")
    assert plan.fault_for(20, 3) is None
    assert plan.fault_for(40, 99) == Fault.error(404)
    assert plan.fault_for(60, 1) is None


@pytest.mark.parametrize(
    "bad",
    [
        "20", "x=503", "20=", "20=teapot", "20=hang@long", "20=*ok", "20=600", "20=next@-1",
        "20=inserted@0", "20=inserted@", "20=inserted@two",
    ],
)  # fmt: skip
def test_plan_parse_rejects_nonsense(bad: str) -> None:
    with pytest.raises(ValueError, match="bad fault"):
        FaultPlan.parse([bad])


def test_plan_rejects_an_offset_scripted_twice_and_non_faults() -> None:
    with pytest.raises(ValueError, match="twice"):
        FaultPlan.parse(["20=503", "20=429"])
    with pytest.raises(TypeError):
        FaultPlan({0: ["503"]})  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Fault.error(99), "not an HTTP status: 99"),
        (lambda: Fault.error(600), "not an HTTP status: 600"),
        (lambda: Fault.hang(-1), "a hang cannot last negative time"),
        (lambda: Fault.next_to(-5), "offset must be >= 0"),
        (lambda: Fault.inserted(0), "insert at least 1 launch"),
    ],
)
def test_constructors_refuse_impossible_faults_with_the_reason(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        build()


def test_an_int_retry_after_is_kept_as_delay_seconds_text() -> None:
    """``Fault.unavailable(7)`` sends ``Retry-After: 7``; a rate limit defaults to 1 second."""
    assert Fault.unavailable(7).retry_after == "7"
    assert Fault.rate_limited().retry_after == "1"
    assert Fault.unavailable().retry_after is None
    assert (Fault.hang().seconds, str(Fault.hang(1.5))) == (HANG_SECONDS, "hang@1.5")


def test_a_plan_applies_a_sequence_in_order_then_answers_normally() -> None:
    """Items past the end of a page's script, and pages not in the plan, get no fault."""
    plan = FaultPlan({0: [Fault.unavailable(), None, Fault.bad_json()], 10: Fault.revised()})
    assert [plan.fault_for(0, n) for n in (1, 2, 3, 4)] == [
        Fault.unavailable(),
        None,
        Fault.bad_json(),
        None,
    ]
    assert plan.fault_for(10, 1) == plan.fault_for(10, 50) == Fault.revised()
    assert repr(plan) == "FaultPlan.parse(['0=503,ok,badjson', '10=*revised'])"
    assert FaultPlan().describe() == [] and FaultPlan.parse([]).fault_for(0, 1) is None


def test_a_plan_spec_error_names_the_spec_and_the_form_expected() -> None:
    with pytest.raises(ValueError, match=r"bad fault plan '20': expected OFFSET=FAULT"):
        FaultPlan.parse(["20"])
    with pytest.raises(ValueError, match=r"'\*ok' is the default"):
        FaultPlan.parse(["20=*ok"])


# --- the slow tail ------------------------------------------------------------------------------


def test_slow_tail_specs_round_trip_and_fill_in_defaults() -> None:
    assert str(Fault.slow_tail()) == "slow"
    assert Fault.parse("slow") == Fault.slow_tail()
    assert str(Fault.parse("slow@0.1:0.02:30:1")) == "slow@0.1:0.02:30:1"
    assert Fault.parse("slow@0.1") == Fault.slow_tail(median=0.1)
    assert Fault.parse("slow@0.1:0.5") == Fault.slow_tail(median=0.1, tail=0.5)
    assert FaultPlan.parse(["0=*slow@0.2:0:1:3"]).describe() == ["0=*slow@0.2:0:1:3"]


def test_slow_tail_delays_are_seeded_per_page_and_request() -> None:
    fault = Fault.slow_tail()
    first = [fault.delay(0, n) for n in range(1, 200)]
    assert first == [Fault.slow_tail().delay(0, n) for n in range(1, 200)]  # a fresh fault agrees
    assert first != [fault.delay(3, n) for n in range(1, 200)]
    assert first != [Fault.slow_tail(seed=1).delay(0, n) for n in range(1, 200)]
    assert Fault.hang(5).delay(0, 1) == 0.0  # other kinds wait as their kind says


def test_slow_tail_delays_have_the_median_and_the_stall_share_asked_for() -> None:
    fault = Fault.slow_tail(median=0.05, tail=0.01, stall=30.0)
    delays = sorted(fault.delay(0, n) for n in range(1, 20_001))
    stalls = [d for d in delays if d == 30.0]
    healthy = [d for d in delays if d != 30.0]
    assert len(stalls) == pytest.approx(200, rel=0.2)
    assert healthy[len(healthy) // 2] == pytest.approx(0.05, rel=0.05)
    assert max(healthy) < 1.0  # a healthy answer never looks like a stall
    assert {Fault.slow_tail(tail=0).delay(0, n) == 30.0 for n in range(1, 500)} == {False}
    assert {Fault.slow_tail(tail=1).delay(0, n) for n in range(1, 50)} == {30.0}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Fault.slow_tail(median=0), "median must be a positive number"),
        (lambda: Fault.slow_tail(median=float("nan")), "median must be a positive number"),
        (lambda: Fault.slow_tail(tail=1.5), "tail is a share of requests"),
        (lambda: Fault.slow_tail(stall=-1), "stall must be >= 0"),
        (lambda: Fault.parse("slow@"), "bad fault"),
        (lambda: Fault.parse("slow@0.1:0.1:1:2:3"), "bad fault"),
        (lambda: Fault.parse("slow@fast"), "bad fault"),
    ],
)
def test_slow_tail_refuses_impossible_latencies(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        build()
