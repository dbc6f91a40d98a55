"""search/_ray_speedups.py: a comparison gives the same results with the
Ray speed-ups on and off (the session's `smoke_comparison` ran with them on).
Each patch and the switch are checked without Ray in
tests/search/test_ray_speedups.py."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn
from search import _ray_speedups as speedups

pytestmark = pytest.mark.slow


def _trial_results(uri: str) -> dict:
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], max_results=1000)
    trials = {r.data.tags["awnn.trial_key"] + "@" + r.data.tags["awnn.strategy"]: (r.data.tags["awnn.status"], r.data.metrics["best_val_acc"],
              r.data.metrics.get("test_acc"), r.data.tags.get("awnn.widths"))
              for r in runs if r.data.tags.get("awnn.kind") == "trial"}
    selected = {r.data.tags["awnn.strategy"]: r.data.tags["awnn.selected_key"] for r in runs
                if r.data.tags.get("awnn.kind") == "sweep" and r.data.tags.get("awnn.phase") == "selection"}
    (cmp,) = [r for r in runs if r.data.tags.get("awnn.kind") == "comparison"]
    return {"trials": trials, "selected": selected, "warm_pids": cmp.data.tags.get("awnn.warm_pids")}


def test_comparison_without_speedups_gives_the_same_results(smoke_comparison, tmp_path):
    """The session's smoke comparison ran with the speed-ups on; its AWNN arm
    run again with AWNN_RAY_SPEEDUPS=0 (the fixed grid's 30 trials left out
    to keep the suite short) runs every trial once with the same outcome,
    selects the same config, and warms no workers."""
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2", "--strategies", "awnn"], cwd=tmp_path,
                 env={speedups.SWITCH: "0"})
    assert p.returncode == 0, p.stderr[-3000:]
    off = _trial_results(f"sqlite:///{tmp_path / 'mlflow.db'}")
    on = _trial_results(smoke_comparison["tracking_uri"])
    on_awnn = {k: v for k, v in on["trials"].items() if k.endswith("@awnn")}
    assert len(off["trials"]) == len(on_awnn) == 6 + 2
    assert off["trials"] == on_awnn
    assert off["selected"] == {"awnn": on["selected"]["awnn"]}
    assert on["warm_pids"] and not off["warm_pids"]


# a local Ray started as the driver starts it; prints the command lines of the node's processes (its children)
NODE = """
import os, sys
sys.path.insert(0, sys.argv[1])
from search.tune import RunSettings, init_ray
init_ray(RunSettings(num_cpus=1))
me = str(os.getpid())
for pid in os.listdir("/proc"):
    try:
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        line = open(f"/proc/{pid}/cmdline").read().replace(chr(0), " ")
    except OSError:
        continue
    if stat[1] == me:
        print(line)
sys.stdout.flush()
import signal, time
os.kill(os.getpid(), signal.SIGTERM)  # (patch 6: no C++ failure handler in the driver; Ray's own Python handler exits 15)
time.sleep(5)
"""


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_local_node_of_the_drivers_own_starts_no_monitor_no_log_monitor_no_dashboard_head_and_its_driver_no_failure_handler(tmp_path, switch):
    """Patch 5 in a real node: no autoscaler monitor, no log monitor and no dashboard head process (three Python
    processes fewer); the switch off starts all three, as plain Ray does.  Patch 6 in the same driver: a SIGTERM finds no C++ failure handler
    (which dumps a stack, "*** SIGTERM received", and may abort)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, speedups.SWITCH: switch}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", NODE, str(ROOT)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 15, out.stderr[-3000:]
    assert ("SIGTERM received" in out.stderr) == (switch == "0"), out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any("raylet" in line for line in lines) and any("gcs_server" in line for line in lines), lines
    monitors = [line for line in lines if "autoscaler/_private/monitor.py" in line or "_private/log_monitor.py" in line]
    assert len(monitors) == (0 if switch == "1" else 2), monitors
    heads = [line for line in lines if "dashboard/dashboard.py" in line]  # the dashboard's head (not the raylet's agent)
    assert len(heads) == (0 if switch == "1" else 1), heads


# a local Ray for a command that can run one trial at a time, on two CPUs; prints how many worker processes its
# raylet started ahead of any work, once they had time to start (and, warmed, to import torch & co.)
PRESTART = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from search.tune import RunSettings, init_ray, wait_for_warm_workers
init_ray(RunSettings(num_cpus=2), trials_at_once=1)
print("warm", len(wait_for_warm_workers()), flush=True)

def children(pid):
    out = []
    for p in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            line = open(f"/proc/{p}/cmdline").read().replace(chr(0), " ")
        except OSError:
            continue
        if stat[1] == str(pid):
            out.append((int(p), line))
    return out

(raylet,) = [p for p, line in children(os.getpid()) if "raylet/raylet" in line]
workers = lambda: [line for _, line in children(raylet) if line.startswith("ray::") and "Agent" not in line]
deadline = time.monotonic() + 20
while len(workers()) < int(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(1.5)
print("workers", len(workers()), flush=True)
"""


@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_local_node_for_one_trial_at_a_time_starts_and_warms_one_worker_not_one_per_cpu(tmp_path, switch):
    """Patch 5's prestart: `init_ray(..., trials_at_once=1)` on two CPUs starts one worker process ahead of the
    trials (and warms it), not two; with the switch off Ray starts one per CPU, as plain Ray does (and warms none)."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, speedups.SWITCH: switch}
    env.pop("RAY_ADDRESS", None)
    expected = 1 if switch == "1" else 2
    out = subprocess.run([sys.executable, "-c", PRESTART, str(ROOT), str(expected)], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["warm", str(1 if switch == "1" else 0), "workers", str(expected)], out.stdout
