"""The driver's Ray Tune hooks fail loudly.

Ray Tune calls the driver's hooks for a trial's end (the tracker's, the
searcher's, the scheduler's, the stall watch's `on_trial_complete`) inside
`TuneController.stop_trial`, which catches any Exception there, logs it
("Error stopping trial"), records the trial as errored and goes on.  An
error in the driver's own bookkeeping of a trial's end (a bug; a closed
output before search/signals.py guarded it) then left it half done: a
sweep that was never closed, a comparison marked finished over it.

`past_tune` re-raises such an error as `DriverBug`, a BaseException, which
Tune does not catch: `tuner.fit()` ends, the comparison's open runs are
closed as failed (search/sweep.py) and the command exits with the full
traceback of the original error; `--resume` goes on from there."""
from __future__ import annotations

import functools

__all__ = ["DriverBug", "past_tune"]


class DriverBug(BaseException):
    """An error in the driver's handling of a trial's end (its cause is the original exception)."""


def past_tune(method):
    """Decorate a Tune hook so that an Exception it raises ends the run (DriverBug) instead of being swallowed."""
    @functools.wraps(method)
    def hook(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every error: Tune would swallow it
            raise DriverBug(f"{method.__qualname__} raised {type(e).__name__}: {e}") from e
    return hook
