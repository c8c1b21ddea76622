"""The class grading's progress bar: one line on stderr, ``grading ███░░ 12/40 notebooks``."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal; elsewhere a line
    every tenth of the way, so a CI log stays short). It shows counts only, never a learner's
    text; a stream that can no longer be written (closed, a broken pipe) turns it off rather
    than stopping the batch."""

    def __init__(self, total: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.width = width
        self.done = 0
        self.cached = 0
        self.start = time.perf_counter()
        try:
            self.tty = self.stream.isatty()
        except (OSError, ValueError):
            self.tty = False
        self.off = False
        self._shown_tenths = -1
        self._lock = threading.Lock()

    def advance(self, cached: bool = False) -> None:
        with self._lock:
            self.done += 1
            self.cached += cached
            tenths = self.done * 10 // self.total
            if self.off:
                return
            if self.tty or tenths != self._shown_tenths or self.done == self.total:
                self._shown_tenths = tenths
                try:
                    self._draw()
                except (OSError, ValueError):  # ValueError: the stream was closed
                    self.off = True

    def _draw(self) -> None:
        filled = self.width * self.done // self.total
        bar = "█" * filled + "░" * (self.width - filled)
        seconds = time.perf_counter() - self.start
        text = (
            f"grading {bar} {self.done}/{self.total} notebooks"
            f" ({self.cached} from cache) {seconds:5.1f} s"
        )
        end = "" if self.tty and self.done < self.total else "\n"
        self.stream.write(("\r" if self.tty else "") + text + end)
        self.stream.flush()
