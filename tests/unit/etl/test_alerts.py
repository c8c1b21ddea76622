"""The alerts API (`etl.alerts`): claims, stored replies, leases, the fencing token, the key
sent downstream, and the mailer that honours it. Timed cases run on virtual time."""

from __future__ import annotations

import asyncio
import math
import sqlite3

import pytest

from etl import alerts
from etl.alerts import BUSY, REUSED, AlertsAPI, Mailer, Reply
from workbook import vtime

REQUEST = {"launch_id": "5d088ca4", "channel": "email"}


def count(db: sqlite3.Connection, table: str) -> int:
    return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


async def crash(key: str) -> None:
    raise RuntimeError("the worker dies holding the claim")


def test_a_repeat_gets_the_stored_reply_and_writes_nothing() -> None:
    async def scenario() -> tuple[AlertsAPI, Reply, Reply]:
        api = AlertsAPI()
        return api, await api.post("alice", "k1", REQUEST), await api.post("alice", "k1", REQUEST)

    api, first, retry = vtime.run(scenario())
    assert first.status == 201 and first.headers == {}
    assert (retry.status, retry.body) == (first.status, first.body)
    assert retry.headers == {"Idempotent-Replayed": "true"}
    assert count(api.db, "subscriptions") == 1
    assert api.db.execute("SELECT state, replays FROM idempotency").fetchone() == ("done", 1)


def test_the_same_key_with_another_request_is_refused() -> None:
    async def scenario() -> tuple[AlertsAPI, Reply]:
        api = AlertsAPI()
        await api.post("alice", "k1", REQUEST)
        return api, await api.post("alice", "k1", {**REQUEST, "channel": "sms"})

    api, changed = vtime.run(scenario())
    assert changed == REUSED
    assert count(api.db, "subscriptions") == 1


def test_a_repeat_while_the_first_works_gets_409_and_then_the_stored_reply() -> None:
    async def scenario() -> tuple[Reply, Reply, Reply, int]:
        api, done = AlertsAPI(), asyncio.Event()

        async def wait(key: str) -> None:
            await done.wait()

        first = asyncio.create_task(api.post("alice", "k1", REQUEST, work=wait))
        await asyncio.sleep(0)
        impatient = await api.post("alice", "k1", REQUEST)
        done.set()
        return (
            impatient,
            await first,
            await api.post("alice", "k1", REQUEST),
            count(api.db, "subscriptions"),
        )

    impatient, first, after, subscriptions = vtime.run(scenario())
    assert impatient == BUSY
    assert first.status == 201 and after.headers == {"Idempotent-Replayed": "true"}
    assert subscriptions == 1


def test_tenants_have_key_spaces_of_their_own() -> None:
    async def scenario() -> tuple[AlertsAPI, Reply]:
        api = AlertsAPI()
        await api.post("alice", "key-1", REQUEST)
        return api, await api.post("bob", "key-1", REQUEST)

    api, bob = vtime.run(scenario())
    assert bob.status == 201 and bob.headers == {}
    assert '"tenant": "bob"' in bob.body
    assert count(api.db, "subscriptions") == 2


def test_the_downstream_key_is_stable_and_scoped_to_the_tenant() -> None:
    key = alerts.downstream_key("alice", "key-1")
    assert key == alerts.downstream_key("alice", "key-1")
    assert key != alerts.downstream_key("bob", "key-1")
    assert key != alerts.downstream_key("alice", "key-2")
    # The separator keeps ("ab", "c") apart from ("a", "bc").
    assert alerts.downstream_key("ab", "c") != alerts.downstream_key("a", "bc")


def test_claims_are_numbered_and_a_lease_frees_a_dead_claim() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(alerts.SCHEMA)
    scope = ("alice", "k1")
    assert alerts.claim(db, scope, REQUEST, now=0.0, lease=30.0) == 1
    assert alerts.claim(db, scope, REQUEST, now=29.0, lease=30.0) == BUSY
    assert alerts.claim(db, scope, REQUEST, now=30.0, lease=30.0) == 2
    assert alerts.claim(db, scope, {**REQUEST, "channel": "sms"}, now=31.0, lease=30.0) == REUSED


def test_without_a_lease_a_dead_claim_holds_its_key_forever() -> None:
    async def scenario(lease: float) -> list[int]:
        api = AlertsAPI(lease=lease)
        with pytest.raises(RuntimeError):
            await api.post("alice", "k1", REQUEST, work=crash)
        statuses = []
        for at in (5.0, 35.0, 90.0):
            await asyncio.sleep(at - asyncio.get_running_loop().time())
            statuses.append((await api.post("alice", "k1", REQUEST)).status)
        return statuses

    assert vtime.run(scenario(math.inf)) == [409, 409, 409]
    assert vtime.run(scenario(30.0)) == [409, 201, 201]


def test_complete_under_a_stale_claim_number_writes_nothing() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(alerts.SCHEMA)
    scope = ("alice", "k1")
    alerts.claim(db, scope, REQUEST, now=0.0, lease=30.0)
    assert alerts.claim(db, scope, REQUEST, now=31.0, lease=30.0) == 2
    with pytest.raises(alerts.LostClaim):
        alerts.complete(db, scope, "alice", REQUEST, number=1)
    assert count(db, "subscriptions") == 0
    assert alerts.reply_now(db, scope) == BUSY  # claim 2 still works
    assert alerts.complete(db, scope, "alice", REQUEST, number=2).status == 201


async def slow_original(api: AlertsAPI, keyed: bool) -> tuple[Reply, Reply, Mailer]:
    """The original's mail is answered after 45 s; a retry comes at 31 s (lease 30 s)."""
    mailer = Mailer()

    def confirm(answer_after: float) -> alerts.Work:
        async def work(key: str) -> object:
            return await mailer.send("alice", "subscribed", key if keyed else None, answer_after)

        return work

    original = asyncio.create_task(api.post("alice", "k1", REQUEST, work=confirm(45)))
    await asyncio.sleep(31)
    retry = await api.post("alice", "k1", REQUEST, work=confirm(1))
    return retry, await original, mailer


def test_the_fencing_token_guards_the_local_write_but_not_the_mailer() -> None:
    api = AlertsAPI(lease=30.0)
    retry, original, mailer = vtime.run(slow_original(api, keyed=False))
    assert retry.status == 201
    assert count(api.db, "subscriptions") == 1  # the late original was rolled back
    assert len(mailer.sent) == 2  # but both attempts reached the mailer
    assert [(c.at, c.replayed) for c in mailer.calls] == [(0, False), (31, False)]
    # Its work done, the original gets the reply the retry stored, not a 409.
    assert (original.status, original.body) == (201, retry.body)
    assert original.headers == {"Idempotent-Replayed": "true"}


def test_a_downstream_key_makes_the_mailer_send_once() -> None:
    api = AlertsAPI(lease=30.0)
    retry, original, mailer = vtime.run(slow_original(api, keyed=True))
    assert len(mailer.sent) == 1
    assert [c.replayed for c in mailer.calls] == [False, True]
    assert {c.key for c in mailer.calls} == {alerts.downstream_key("alice", "k1")}
    assert original.body == retry.body and count(api.db, "subscriptions") == 1


def test_a_taken_over_request_gets_409_while_the_new_holder_still_works() -> None:
    async def scenario() -> tuple[Reply, Reply]:
        api = AlertsAPI(lease=30.0)

        def slow(seconds: float) -> alerts.Work:
            async def work(key: str) -> None:
                await asyncio.sleep(seconds)

            return work

        original = asyncio.create_task(api.post("alice", "k1", REQUEST, work=slow(45)))
        await asyncio.sleep(31)
        retry = asyncio.create_task(api.post("alice", "k1", REQUEST, work=slow(60)))
        return await original, await retry

    original, retry = vtime.run(scenario())
    assert original == BUSY  # at 45 s the retry (done at 91 s) still holds the key
    assert retry.status == 201


def test_the_mailer_dedupes_by_key_and_refuses_a_changed_message() -> None:
    async def scenario() -> tuple[Mailer, list[dict[str, object]], float]:
        mailer = Mailer()
        answers = [
            await mailer.send("alice", "hello", "k"),
            await mailer.send("alice", "hello", "k", answer_after=2.5),
            await mailer.send("alice", "changed", "k"),
            await mailer.send("alice", "hello"),
            await mailer.send("alice", "hello"),
        ]
        return mailer, answers, asyncio.get_running_loop().time()

    mailer, answers, elapsed = vtime.run(scenario())
    assert [a["status"] for a in answers] == [200, 200, 422, 200, 200]
    assert [a.get("id") for a in answers] == ["msg-1", "msg-1", None, "msg-2", "msg-3"]
    assert mailer.sent == [("alice", "hello")] * 3
    assert elapsed == pytest.approx(2.5)
    shown = [str(call) for call in mailer.calls]
    assert shown[0] == "   0 s  sent msg-1 to alice (key k…)"
    assert shown[1].startswith("   0 s  replayed msg-1")
    assert "refused" in shown[2] and shown[3].endswith("(no key)")
