"""`etl`: the small ingestion core the workbook builds on.

Errors that say whether a retry can help, the `Launch` row, and sinks to load rows into.
Beside them, modules a notebook imports by path and a learner may read: `etl.timeouts`,
`etl.breaker` and `etl.ratelimit` (notebook 01's clients), `etl.alerts` (notebook 04's alerts
API and its mailer), `etl.replay` (notebook 06's store), and `etl.server`, the fixture server.
The seams a learner builds (content ids, the idempotent sink, the retry loop, the source)
live in the build notebooks, not here.
"""

from etl.data import launch_results, launches
from etl.errors import (
    TRANSIENT_STATUSES,
    EtlError,
    HttpStatus,
    NetworkError,
    ParseError,
    RateLimited,
    RequestTimeout,
)
from etl.rows import Launch
from etl.sinks import JsonlSink, MemorySink, Sink, read_jsonl, row_to_json

__all__ = [
    "TRANSIENT_STATUSES",
    "EtlError",
    "HttpStatus",
    "JsonlSink",
    "Launch",
    "MemorySink",
    "NetworkError",
    "ParseError",
    "RateLimited",
    "RequestTimeout",
    "Sink",
    "launch_results",
    "launches",
    "read_jsonl",
    "row_to_json",
]
