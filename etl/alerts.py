"""An alerts API whose repeats get the first reply, and the mailer it calls (notebook 04).

``AlertsAPI.post(tenant, key, request)`` stands for ``POST /subscriptions`` sent with an
``Idempotency-Key`` header. It subscribes the tenant to alerts for one launch, on SQLite, in
three steps:

1. `claim` the key in a short transaction of its own, before any slow work. A repeat is
   answered there and then: the stored reply (``Idempotent-Replayed: true``) once the first
   request finished, ``409`` while another request holds the key, ``422`` for the same key sent
   with a different request. A claim holds its key for a lease; once the lease has run out, the
   next request with that key takes the claim over, under the next claim number.
2. The slow work (a call to another service), handed `downstream_key`: the same for every
   attempt of one (tenant, key), so the service called can tell a repeat from a new request.
3. `complete`: the subscription and the stored reply commit together, and only while the
   claim number is still the key's own (a fencing token). A request whose claim was taken over
   writes nothing and answers with what the key's record says by then.

Records are keyed by (tenant, key): two tenants may pick the same key. `Mailer` stands in for
the other service; it honours an idempotency key the way Stripe's API does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import sqlite3
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

#: Whose key it is: (tenant, the client's key).
Scope = tuple[str, str]
#: The slow part of a request, handed the key to send downstream.
Work = Callable[[str], Awaitable[object]]


@dataclass(frozen=True)
class Reply:
    """What the client receives: a status, headers and a body."""

    status: int
    headers: dict[str, str]
    body: str


BUSY = Reply(409, {}, '{"error": "a request with this Idempotency-Key is still in progress"}')
REUSED = Reply(422, {}, '{"error": "Idempotency-Key already used for a different request"}')

SCHEMA = """
CREATE TABLE subscriptions (id INTEGER PRIMARY KEY, tenant TEXT, launch_id TEXT, channel TEXT);
CREATE TABLE idempotency (
    tenant TEXT, key TEXT, request TEXT, state TEXT, claim INTEGER, expires REAL,
    status INTEGER, body TEXT, replays INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, key)
);
"""


@contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Everything inside commits together or not at all (the connection is in autocommit)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def fingerprint(request: Mapping[str, str]) -> str:
    """A digest of the request's parameters: a repeat must send the same ones."""
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode("utf-8")).hexdigest()


def downstream_key(tenant: str, key: str) -> str:
    """The idempotency key for the call a request makes to another service.

    Derived from (tenant, key) alone, so every attempt of one request sends the same value and
    two tenants who picked the same key never do. A claim number would not serve: it differs
    between attempts by design."""
    return hashlib.sha256(f"alerts\x00{tenant}\x00{key}".encode()).hexdigest()[:24]


def claim(
    db: sqlite3.Connection, scope: Scope, request: Mapping[str, str], now: float, lease: float
) -> Reply | int:
    """Take the key for this request and return the claim's number (1, then one more at each
    takeover), or return the reply a repeat gets instead of doing the work again."""
    with _transaction(db):
        row = db.execute(
            "SELECT request, state, claim, expires FROM idempotency WHERE tenant = ? AND key = ?",
            scope,
        ).fetchone()
        if row is None:
            row = (fingerprint(request), "new", 0, 0.0)
        held, state, number, expires = row
        if held != fingerprint(request):
            return REUSED
        if state == "done":
            return _replayed(db, scope)
        if state == "in flight" and now < expires:
            return BUSY  # its holder's lease still runs
        # A new key, or one whose holder's lease ran out: the next claim number takes it.
        db.execute(
            "INSERT INTO idempotency (tenant, key, request, state, claim, expires)"
            " VALUES (?, ?, ?, 'in flight', ?, ?) ON CONFLICT (tenant, key) DO UPDATE"
            " SET state = 'in flight', claim = excluded.claim, expires = excluded.expires",
            (*scope, held, number + 1, now + lease),
        )
        return int(number) + 1


class LostClaim(Exception):
    """Another request took this key over after this one's lease ran out."""


def complete(
    db: sqlite3.Connection, scope: Scope, tenant: str, request: Mapping[str, str], number: int
) -> Reply:
    """Write the subscription and store its reply, in one transaction, only while claim
    `number` is still the key's own. Otherwise raise `LostClaim`, with nothing written."""
    with _transaction(db):
        (subscription,) = db.execute(
            "INSERT INTO subscriptions (tenant, launch_id, channel) VALUES (?, ?, ?) RETURNING id",
            (tenant, request["launch_id"], request["channel"]),
        ).fetchone()
        body = json.dumps({"subscription": subscription, "tenant": tenant, **request})
        stored = db.execute(  # the fencing token: the claim number is checked here, and only here
            "UPDATE idempotency SET state = 'done', status = 201, body = ?"
            " WHERE tenant = ? AND key = ? AND state = 'in flight' AND claim = ?",
            (body, *scope, number),
        )
        if stored.rowcount != 1:
            raise LostClaim  # rolls the subscription back with it
    return Reply(201, {}, body)


def reply_now(db: sqlite3.Connection, scope: Scope) -> Reply:
    """What the key's record answers now: the stored reply once a request has finished (then
    counted as a replay), `BUSY` until then."""
    with _transaction(db):
        row = db.execute(
            "SELECT state FROM idempotency WHERE tenant = ? AND key = ?", scope
        ).fetchone()
        if row is not None and row[0] == "done":
            return _replayed(db, scope)
    return BUSY


def _replayed(db: sqlite3.Connection, scope: Scope) -> Reply:
    """The stored reply, marked as a replay, and the replay counted in the record."""
    db.execute("UPDATE idempotency SET replays = replays + 1 WHERE tenant = ? AND key = ?", scope)
    status, body = db.execute(
        "SELECT status, body FROM idempotency WHERE tenant = ? AND key = ?", scope
    ).fetchone()
    return Reply(status, {"Idempotent-Replayed": "true"}, body)


class AlertsAPI:
    """POST /subscriptions with an Idempotency-Key header: a repeat gets the stored reply.

    `lease` is how many seconds a claim holds its key (forever by default). Time is the
    running event loop's clock, so a test or a notebook can run it on virtual time."""

    def __init__(self, lease: float = math.inf) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None)
        self.lease = lease
        self.db.executescript(SCHEMA)

    def scope(self, tenant: str, key: str) -> Scope:
        """Whose key this is. `tenant` is the authenticated caller, never a field of the body."""
        return (tenant, key)

    async def post(
        self, tenant: str, key: str, request: Mapping[str, str], work: Work | None = None
    ) -> Reply:
        scope = self.scope(tenant, key)
        now = asyncio.get_running_loop().time()
        held = claim(self.db, scope, request, now, self.lease)
        if isinstance(held, Reply):
            return held
        if work is not None:
            await work(downstream_key(*scope))  # the slow part: a call to another service
        try:
            return complete(self.db, scope, tenant, request, held)
        except LostClaim:
            return self.taken_over(scope)

    def taken_over(self, scope: Scope) -> Reply:
        """The answer for a request whose claim was taken over while it worked: its work is
        done, so it gets the stored reply once the request that took over has stored one."""
        return reply_now(self.db, scope)


@dataclass(frozen=True)
class MailerCall:
    """One call the mailer received: when, with which key, and whether it sent an email."""

    at: float
    to: str
    key: str | None
    message_id: str | None
    replayed: bool

    def __str__(self) -> str:
        key = "no key" if self.key is None else f"key {self.key[:8]}…"
        if self.message_id is None:
            done = "refused: key reused with another message"
        else:
            done = ("replayed " if self.replayed else "sent ") + self.message_id
        return f"{self.at:>4g} s  {done} to {self.to} ({key})"


@dataclass
class Mailer:
    """A stand-in for an email service that honours an idempotency key as Stripe's API does.

    A call with a key it has seen sends nothing and answers as the first call did, marked as
    a replay; the same key with a different message is refused. A call without a key always
    sends. The email leaves as the call arrives; the answer comes back `answer_after` seconds
    later (a slow network, say)."""

    sent: list[tuple[str, str]] = field(default_factory=list)
    calls: list[MailerCall] = field(default_factory=list)
    _first: dict[str, tuple[tuple[str, str], str]] = field(default_factory=dict, repr=False)

    async def send(
        self, to: str, text: str, key: str | None = None, answer_after: float = 0.0
    ) -> dict[str, object]:
        at = round(asyncio.get_running_loop().time(), 6)
        if key is not None and key in self._first:
            message, message_id = self._first[key]
            if message != (to, text):
                self.calls.append(MailerCall(at, to, key, None, replayed=False))
                return {"status": 422, "error": "idempotency key reused with another message"}
            answer: dict[str, object] = {"status": 200, "id": message_id, "replayed": True}
        else:
            self.sent.append((to, text))
            message_id = f"msg-{len(self.sent)}"
            if key is not None:
                self._first[key] = ((to, text), message_id)
            answer = {"status": 200, "id": message_id, "replayed": False}
        self.calls.append(MailerCall(at, to, key, message_id, replayed=bool(answer["replayed"])))
        await asyncio.sleep(answer_after)
        return answer
