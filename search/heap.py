"""The `awnn` command's own process and Python's cyclic garbage collector.

After its imports a comparison's driver holds ~600,000 objects (torch, Ray
Tune, MLflow and SQLAlchemy, Optuna), and every full collection walks all of
them.  Measured on 2 cores (`awnn compare --task doublemoon --budget smoke`,
~25 s): 9 full collections during the run took 1.8 s, and the interpreter's
collections at exit 2.3 s of a 2.8 s exit, although the process's memory
goes back to the operating system anyway.

Two calls, effective only in the command's own process (`search.cli.entry`,
the console script and `python -m search.cli`; a test or a notebook calling
`main` in its own process is left alone), and only while the environment's
switch is on (AWNN_GC_FREEZE=0 keeps Python's default behaviour, the
reference):

* `settle()`, once a command has imported and started what it runs with (the
  first Ray Tune phase): one collection, then `gc.freeze()`.  Those objects
  live as long as the process does; later collections walk only what the run
  makes.  Once per process: what the phases make stays collectable.
* `at_exit()`, when the command has returned: `gc.freeze()`, so that the
  interpreter's last collections skip the heap.  Exit handlers (Ray's
  shutdown, MLflow's pending writes) still run; objects are still released
  by reference counting; only cycles left at exit are not walked.

`benchmarks/cli_overhead.py` measures both against the switch's off position.
"""
from __future__ import annotations

import gc
import os

__all__ = ["SWITCH", "at_exit", "enabled", "own_process", "settle"]

SWITCH = "AWNN_GC_FREEZE"

_state = {"own": False, "settled": False}


def enabled() -> bool:
    """The environment's switch: on unless AWNN_GC_FREEZE=0."""
    return os.environ.get(SWITCH, "1") != "0"


def own_process() -> None:
    """Mark this process as the `awnn` command's own (search.cli.entry)."""
    _state["own"] = True


def settle() -> None:
    """Collect once, then freeze what the process holds (see the module docstring); once per process."""
    if _state["own"] and not _state["settled"] and enabled():
        _state["settled"] = True
        gc.collect()
        gc.freeze()


def at_exit() -> None:
    """Freeze the heap before the interpreter's exit collections (see the module docstring)."""
    if _state["own"] and enabled():
        gc.freeze()
