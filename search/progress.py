"""One live progress line on stderr (rewritten in place on a terminal,
printed every few seconds otherwise, so logs stay readable)."""
from __future__ import annotations

import sys
import time


def fmt_seconds(s: float) -> str:
    if s != s or s < 0:  # nan
        return "?"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class ProgressLine:
    def __init__(self, stream=None, min_interval: float = 0.2, log_interval: float = 10.0):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.min_interval = min_interval if self.tty else log_interval
        self.last = 0.0
        self.width = 0

    def update(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.min_interval:
            return
        self.last = now
        if self.tty:
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, text: str | None = None) -> None:
        if text is not None:
            self.update(text, force=True)
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
        self.width = 0
