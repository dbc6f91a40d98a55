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
