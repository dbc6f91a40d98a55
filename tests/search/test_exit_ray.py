"""search/tune.py exit_process: the command's process shuts its Ray down
itself, before the interpreter's exit handlers, so that Ray's own handler
(which first sleeps 0.5 s "so that log messages finish printing") has nothing
left to do; the exit code is the command's, and the node's processes end."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import atexit, os, sys, time
import ray
from search import tune
ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024 * 1024, log_to_driver=False)
node = ray._private.worker._global_node
print("PIDS", *[p.process.pid for ps in node.all_processes.values() for p in ps], flush=True)
# registered after Ray's own exit handler, so it runs before it: what Ray's handler will find
atexit.register(lambda: print("AT_EXIT initialized", ray.is_initialized(), flush=True))
tune.exit_process(int(sys.argv[1]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by its parent, gone itself) counts as ended
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("code", [3])  # (0: every other test of a sweep ends so)
def test_exit_process_shuts_ray_down_before_the_exit_handlers_and_keeps_the_code(code, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    env.pop("RAY_ADDRESS", None)
    p = subprocess.run([sys.executable, "-c", PROBE, str(code)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == code, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert "AT_EXIT initialized False" in lines, p.stdout + p.stderr[-3000:]
    pids = [int(x) for line in lines if line.startswith("PIDS") for x in line.split()[1:]]
    assert pids  # the local node's processes (GCS, raylet, ...)
    import time

    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if _alive(pid)]


EXIT_STEPS = r"""
import atexit, os, sys, tempfile, threading, time
from search import tune


class Finalized:
    def __del__(self):  # runs in the interpreter's finalization, as it clears this module
        print("FINALIZED", flush=True)


kept = Finalized()
scratch = tempfile.TemporaryDirectory()  # removed by its finalizer's exit handler (weakref.finalize, atexit=True)
print("SCRATCH", scratch.name, flush=True)


def work():
    time.sleep(0.3)
    print("THREAD done", flush=True)


threading.Thread(target=work).start()  # non-daemon: the exit waits for it
atexit.register(lambda: print("AT_EXIT ran", flush=True))
sys.stdout.write("UNFLUSHED")  # (no newline, no flush: our exit flushes it)
tune.exit_process(int(sys.argv[1]))
"""


@pytest.mark.parametrize("finalize", [False, True], ids=["without-finalization", "reference-sys-exit"])
def test_exit_process_runs_the_exit_steps_in_order_with_or_without_the_finalization(finalize, tmp_path):
    """The default (no finalization, where a thread of Ray's calling into Python aborted the process) and the
    reference (`AWNN_EXIT_FINALIZE=1`: sys.exit) end alike: the code kept, non-daemon threads joined before the
    exit handlers, the handlers run (a temporary folder's among them), the output flushed; only the reference
    finalizes the modules."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "AWNN_EXIT_FINALIZE": "1" if finalize else "0"}
    p = subprocess.run([sys.executable, "-c", EXIT_STEPS, "5"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == 5, (p.stdout, p.stderr[-3000:])
    lines = p.stdout.splitlines()
    scratch = next(line.split(" ", 1)[1] for line in lines if line.startswith("SCRATCH "))
    assert not os.path.exists(scratch), lines
    assert "UNFLUSHED" in p.stdout
    steps = [line.replace("UNFLUSHED", "") for line in lines if line.replace("UNFLUSHED", "") in ("THREAD done", "AT_EXIT ran", "FINALIZED")]
    assert steps == ["THREAD done", "AT_EXIT ran"] + (["FINALIZED"] if finalize else []), lines
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr[-3000:]
