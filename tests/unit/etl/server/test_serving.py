"""The fixture app over real HTTP on 127.0.0.1 (`etl.server.serving`), and `python -m
etl.server`, which serves it until interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

import etl
from etl.server import (
    BackgroundServer,
    Fault,
    FaultPlan,
    FixtureApp,
    RateLimit,
    serve_in_background,
)


@pytest.mark.parametrize("status", [400, 404, 408, 429, 500, 502, 503, 504])
def test_every_error_reply_is_a_detail_never_a_page(status: int) -> None:
    """Over real HTTP, as curl sees it: a JSON object whose only key is `detail`."""
    with serve_in_background(FixtureApp({0: Fault.error(status)})) as server:
        response = httpx.get(server.launches_url, timeout=10)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["detail"] and isinstance(body["detail"], str) and body["detail"]


def test_offset_paging_over_real_http_skips_what_is_inserted_ahead_of_it() -> None:
    """The walk a client makes by following ``next`` over 127.0.0.1: it reads as many rows as
    the last ``count`` says, yet three are repeats and three launches it never saw."""
    app = FixtureApp(FaultPlan.parse(["10=inserted@3"]), results=etl.launch_results()[:30])
    read: list[str] = []
    with serve_in_background(app) as server, httpx.Client(timeout=5) as client:
        url: str | None = server.launches_url + "?limit=10"
        while url is not None:
            page = client.get(url).json()
            read.extend(result["id"] for result in page["results"])
            url = page["next"]
    listing = [result["id"] for result in app.results]
    assert len(read) == page["count"] == len(listing) == 33
    assert [i for i in listing if read.count(i) == 2] == listing[10:13]  # launches 7, 8, 9
    assert [i for i in listing if i not in read] == listing[:3]  # the three inserted
    assert [e.offset for e in app.log] == [0, 10, 20, 30]


def test_served_over_real_http_on_127_0_0_1() -> None:
    app = FixtureApp({10: [Fault.unavailable(3)]})
    with serve_in_background(app) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with httpx.Client(timeout=5) as client:
            first = client.get(server.launches_url + "?limit=10")
            failed = client.get(first.json()["next"])
            second = client.get(first.json()["next"])
    assert first.json()["next"] == server.launches_url + "?limit=10&offset=10"
    assert (failed.status_code, failed.headers["retry-after"]) == (503, "3")
    assert second.json()["results"] == etl.launch_results()[10:20]
    assert [e.status for e in app.log] == [200, 503, 200]
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.launches_url, timeout=1)


def test_a_real_client_timeout_during_a_hang_leaves_no_answer_and_a_quick_stop() -> None:
    app = FixtureApp({0: [Fault.hang()]})
    server = BackgroundServer(app).start()
    try:
        with pytest.raises(httpx.ReadTimeout):
            httpx.get(server.launches_url, timeout=0.1)
        assert httpx.get(server.launches_url, timeout=5).status_code == 200
    finally:
        server.stop()
        server.stop()  # a second stop is harmless
    assert not server.running
    assert [(e.nth, e.status) for e in app.log] == [(1, None), (2, 200)]


def test_python_dash_m_etl_server_serves_until_interrupted() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "etl.server", "--port", "0", "--fault", "0=503@2", "--launches",
         "25"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline().strip()
        assert banner.startswith("Serving 25 launches at http://127.0.0.1:")
        url = banner.rsplit(" ", 1)[1]
        assert proc.stdout.readline().strip() == "scripted: 0=503@2"
        assert proc.stdout.readline().strip() == "Press Ctrl-C to stop."
        assert httpx.get(url, timeout=5).status_code == 503
        page = httpx.get(url, timeout=5).json()
        assert (page["count"], page["next"]) == (25, url + "?limit=10&offset=10")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert out.splitlines() == [
        "  1 GET offset=0 (#1) -> 503 [503@2]",
        "  2 GET offset=0 (#2) -> 200",
        "Stopped.",
    ]


def test_cli_rejects_a_bad_fault_spec() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "etl.server", "--fault", "0=teapot"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "bad fault '0=teapot'" in proc.stderr or "bad fault 'teapot'" in proc.stderr


def test_the_port_is_taken_and_the_url_known_before_start() -> None:
    """The socket is bound at construction: the URL is final, and nothing serves on it yet."""
    server = BackgroundServer()
    try:
        assert server.port > 0 and server.url == f"http://127.0.0.1:{server.port}"
        assert server.launches_url == server.url + "/2.3.0/launches/"
        assert repr(server) == f"BackgroundServer({server.url!r}, running=False)"
        assert not server.running and server.app.count == 300
    finally:
        server.stop()  # stopping a server never started only frees its socket


def test_a_rate_limit_over_real_http_refuses_with_retry_after() -> None:
    app = FixtureApp(rate_limit=RateLimit(2, per=60.0))
    with serve_in_background(app) as server, httpx.Client(timeout=5) as client:
        statuses = [client.get(server.launches_url) for _ in range(3)]
    assert [r.status_code for r in statuses] == [200, 200, 429]
    assert 58 <= int(statuses[2].headers["retry-after"]) <= 60  # whole seconds, rounded up


def test_cli_rejects_a_rate_limit_below_one() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "etl.server", "--rate-limit", "0"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "a limit admits at least 1 request" in proc.stderr
