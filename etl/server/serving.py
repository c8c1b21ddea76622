"""`FixtureApp` over real HTTP on 127.0.0.1, served by uvicorn in a daemon thread.

The socket is bound before the thread starts, so `BackgroundServer.url` is known (and the port
taken) from construction on; `BackgroundServer.start` returns only once connections are
accepted. uvicorn adds no headers of its own: the app's Date comes from the clock its
Retry-After uses. `BackgroundServer.stop` is safe to call twice.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from etl.server.app import LAUNCHES_PATH, FixtureApp


def _uvicorn_config(app: FixtureApp) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        log_config=None,  # leave the host process's logging (a Jupyter kernel's) untouched
        access_log=False,
        date_header=False,  # the app sends its own Date, from the clock its Retry-At uses
        server_header=False,
        timeout_graceful_shutdown=1,
    )


class BackgroundServer:
    """`app` served over real HTTP on `host` by uvicorn in a daemon thread.

    ``port=0`` picks a free port. Use as a context manager, or `start` then `stop`; `stop` is
    safe to call twice.
    """

    def __init__(
        self, app: FixtureApp | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.app = app if app is not None else FixtureApp()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self._server = uvicorn.Server(_uvicorn_config(self.app))
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            daemon=True,
            name=f"fixture-server-{self.port}",
        )

    @property
    def url(self) -> str:
        """The server's root, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{self.host}:{self.port}"

    @property
    def launches_url(self) -> str:
        """The first page of launches."""
        return self.url + LAUNCHES_PATH

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start serving; return once the server accepts connections."""
        self._thread.start()
        # uvicorn offers no "started" event, only a flag; startup takes milliseconds.
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up and self._thread.is_alive():
            if self._server.started:
                return self
            time.sleep(0.005)
        self.stop()
        raise RuntimeError(f"fixture server on {self.url} did not start")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and wait for the thread to finish."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BackgroundServer({self.url!r}, running={self.running})"


@contextlib.contextmanager
def serve_in_background(app: FixtureApp | None = None, port: int = 0) -> Iterator[BackgroundServer]:
    """``with serve_in_background(app) as server: ... server.launches_url ...``"""
    with BackgroundServer(app, port=port) as server:
        yield server
