"""``python -m etl.server``: serve the fixture on 127.0.0.1 until Ctrl-C.

One run is one fresh `FixtureApp`: its scripts start from request 1 and every request is
printed as it is answered (``--quiet`` to stop that). The URL is printed once the server
answers on it. A bad ``--fault`` spec is a usage error
(exit 2) before anything listens; a port already taken exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
import time
from collections.abc import Sequence

import uvicorn

from etl.data import launch_results
from etl.server.app import LAUNCHES_PATH, FixtureApp, LoggedRequest
from etl.server.faults import FaultPlan
from etl.server.limits import RateLimit
from etl.server.serving import _uvicorn_config


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m etl.server``: serve the fixture until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m etl.server",
        description="Serve the shipped launches as Launch Library 2 pages, with scripted faults.",
        epilog="Example: python -m etl.server --fault 10=503@2,ok --fault 20=*404 "
        "--fault 30=inserted@3",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="OFFSET=FAULT[,FAULT...]",
        help="script the requests for one page (repeatable); FAULT is ok, 503, 503@5, "
        "429@date:5, hang, hang@30, badjson, revised, next@0, inserted@3 (3 new launches at "
        "the top before this answer: later pages shift down), slow (most answers in about "
        "50 ms, 1%% stalling 30 s) or slow@MEDIAN:TAIL:STALL:SEED; OFFSET=*FAULT for every "
        "request",
    )
    parser.add_argument(
        "--rate-limit",
        type=int,
        default=None,
        metavar="N",
        help="admit at most N requests for launches a second; 429 with Retry-After beyond",
    )
    parser.add_argument("--launches", type=int, default=None, help="serve only the first N")
    parser.add_argument("--quiet", action="store_true", help="do not print each request")
    args = parser.parse_args(argv)
    try:
        plan = FaultPlan.parse(args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    results = launch_results()[: args.launches] if args.launches is not None else None
    try:
        rate_limit = None if args.rate_limit is None else RateLimit(args.rate_limit)
    except ValueError as exc:
        parser.error(str(exc))

    def echo(entry: LoggedRequest) -> None:
        print(entry, flush=True)

    app = FixtureApp(
        plan, results=results, on_request=None if args.quiet else echo, rate_limit=rate_limit
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    server = uvicorn.Server(_uvicorn_config(app))

    def announce() -> None:
        """The URL, once the server answers on it: a click at once never meets a refusal."""
        while not server.started:
            if server.should_exit:
                return
            time.sleep(0.01)
        print(f"Serving {app.count} launches at http://{host}:{port}{LAUNCHES_PATH}", flush=True)
        for line in plan.describe():
            print(f"  scripted: {line}", flush=True)
        if rate_limit is not None:
            print(f"  rate limit: {rate_limit}", flush=True)
        print("Press Ctrl-C to stop.", flush=True)

    threading.Thread(target=announce, name="announce", daemon=True).start()
    # uvicorn shuts down gracefully on Ctrl-C, then re-raises the signal for the caller.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    print("Stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
