"""A stand-in for the Launch Library 2 API that misbehaves on cue.

- `etl.server.dates`: HTTP-dates in RFC 9110's three forms, and `RetryAt`;
- `etl.server.faults`: the fault language, `Fault` and `FaultPlan`, scripted per page and per
  request;
- `etl.server.limits`: `RateLimit`, a provider's quota (N requests a second, 429 beyond);
- `etl.server.app`: `FixtureApp`, the ASGI app, and `in_process_client` (no sockets, virtual
  time);
- `etl.server.serving`: `BackgroundServer`, the same app over real HTTP on 127.0.0.1;
- `etl.server.__main__`: ``python -m etl.server`` (its `main`), for a learner with a browser or
  curl. Not imported here: ``-m`` would then find it loaded twice.

Import from here (``from etl.server import Fault``): the names in `__all__` stay put
whichever module they live in.
"""

from etl.server.app import (
    DEFAULT_LIMIT,
    IN_PROCESS_BASE_URL,
    LAUNCHES_PATH,
    MAX_LIMIT,
    REAL_API_URL,
    FixtureApp,
    LoggedRequest,
    Message,
    Receive,
    Scope,
    Send,
    in_process_client,
)
from etl.server.dates import DateForm, RetryAt, http_date
from etl.server.faults import (
    HANG_SECONDS,
    SLOW_SIGMA,
    TRUNCATED_JSON,
    Fault,
    FaultKind,
    FaultPlan,
    Script,
)
from etl.server.limits import RateLimit
from etl.server.serving import BackgroundServer, serve_in_background

__all__ = [
    "DEFAULT_LIMIT",
    "HANG_SECONDS",
    "IN_PROCESS_BASE_URL",
    "LAUNCHES_PATH",
    "MAX_LIMIT",
    "REAL_API_URL",
    "SLOW_SIGMA",
    "TRUNCATED_JSON",
    "BackgroundServer",
    "DateForm",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FixtureApp",
    "LoggedRequest",
    "Message",
    "RateLimit",
    "Receive",
    "RetryAt",
    "Scope",
    "Script",
    "Send",
    "http_date",
    "in_process_client",
    "serve_in_background",
]
