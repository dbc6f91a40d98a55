"""One live progress line on stderr (rewritten in place on a terminal,
printed every few seconds otherwise, so logs stay readable)."""
from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from typing import Callable, Iterator


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
        self.last = -math.inf  # never drawn: the first update draws (monotonic() counts from boot, so 0.0 would hold the first line back for min_interval after a boot)
        self.width = 0

    def due(self) -> bool:
        """Would `update` draw now?  (A caller whose text is costly builds it only then.)"""
        return time.monotonic() - self.last >= self.min_interval

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


class RunClock:
    """The whole run's remaining time, for a progress line: the epochs left at
    the mean time of the finished epochs, plus what is left of the epoch in
    progress.  The first epoch counts from its first batch (`began`), not
    from the start, which also loaded the data and built the model."""

    def __init__(self, epochs: int):
        self.epochs = epochs
        self.start = time.monotonic()
        self.first_began: float | None = None  # when the first epoch's training began
        self.ends: list[float] = []  # when each finished epoch ended

    def began(self, at: float) -> None:
        """An epoch's training began at `at` (time.monotonic); only the first one's is kept."""
        if self.first_began is None:
            self.first_began = at

    def epoch_done(self) -> None:
        self.ends.append(time.monotonic())

    def per_epoch(self) -> float:
        """Seconds per epoch so far (nan before the first epoch ends)."""
        if len(self.ends) >= 2:
            return (self.ends[-1] - self.ends[0]) / (len(self.ends) - 1)
        return self.ends[0] - (self.first_began if self.first_began is not None else self.start) if self.ends else math.nan

    def eta(self, epoch: int, epoch_left: float = 0.0, epoch_length: float = math.nan) -> float:
        """Seconds left after `epoch` (1-based) is `epoch_left` seconds from
        its end; `epoch_length`, the epoch in progress's projected length,
        stands in for the mean epoch until one has ended."""
        per = self.per_epoch()
        per = per if per == per else epoch_length
        return epoch_left + max(0, self.epochs - epoch) * per


def flight(in_flight: set[str], started: set[str]) -> str:
    """`N running, M pending` of the trials handed to Ray and not finished:
    running are those that have reported (a trial reports within seconds of
    starting), pending those still waiting for a free slot (or starting up)."""
    running = len(in_flight & started)
    pending = len(in_flight) - running
    return f"{running} running" + (f", {pending} pending" if pending else "")


@contextlib.contextmanager
def said_if_slow(say: Callable[[str], None], what: str, after: float = 30.0, every: float = 120.0) -> Iterator[None]:
    """Work that is usually quick but may not be (a data read on a network
    mount, a first processing of a dataset): if it runs past `after` seconds,
    one line says what and for how long, then again every `every` seconds
    until it ends - not a silent wait."""
    done = threading.Event()
    start = time.monotonic()

    def watch() -> None:
        wait = after
        while not done.wait(wait):
            say(f"{what}: {fmt_seconds(time.monotonic() - start)} so far (a slow or unanswering mount? Ctrl-C stops)")
            wait = every
    t = threading.Thread(target=watch, name="awnn-slow-work", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(timeout=1)

