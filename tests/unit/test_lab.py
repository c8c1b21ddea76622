"""`make lab`'s command line: served from the repo root, opening the first notebook."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from workbook.lab import OVERRIDES, free_port, lab_command, quiet_news


def test_serves_the_repo_root_and_opens_the_notebook(root: Path) -> None:
    command = lab_command(root, "notebooks/01_retry_with_backoff.ipynb", 8890, "t0k")
    assert f"--ServerApp.root_dir={root}" in command
    assert command[-1] == "notebooks/01_retry_with_backoff.ipynb"
    assert "--ServerApp.ip=127.0.0.1" in command and "--IdentityProvider.token=t0k" in command


def test_headless_and_root_flags(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    command = lab_command(root, None, 8890, "t")
    assert ("--no-browser" in command) is (os.uname().sysname == "Linux")
    assert ("--allow-root" in command) is (os.geteuid() == 0)


def test_free_port_avoids_a_taken_one() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert free_port(busy) != busy


def test_news_prompt_is_switched_off_once(tmp_path: Path) -> None:
    """The overrides file is written when absent and left alone when present."""
    path = quiet_news(tmp_path)
    assert json.loads(path.read_text()) == OVERRIDES
    path.write_text("{}")
    quiet_news(tmp_path)
    assert path.read_text() == "{}"
