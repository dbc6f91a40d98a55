"""What the `awnn` command's process costs around its work: the wall time of a
short command with the garbage-collector policy of search/heap.py on
(the default) and off (AWNN_GC_FREEZE=0, Python's default behaviour).

Runs `python -m search.cli compare --task doublemoon --budget smoke --num-cpus 2`
(a complete comparison whose trials take ~2 s of its ~25 s: start-up, Ray,
MLflow, the report and the exit are the rest) in a fresh folder per run, the
two settings interleaved `--repeats` times.  For each run it records the wall
time and, from the process's own stderr (`AWNN_GC_STATS=1`, printed at exit by
the helper below), the seconds its full collections took.

Prints one JSON object as its last line: per setting the median wall seconds
and the median seconds in full collections, and `saved_seconds`, the
difference of the medians (the figure the test suite gains per command).

Usage:  python benchmarks/cli_overhead.py [--repeats 3] [--command "compare --task doublemoon --budget smoke"]
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracking.fmt import json_text

ROOT = Path(__file__).resolve().parent.parent

# run in the child: times every full collection, and the exit's, on stderr at the very end
PROBE = r"""
import atexit, gc, sys, time
spent = [0.0, 0]
mark = [0.0]
def _cb(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        mark[0] = time.perf_counter()
    else:
        spent[0] += time.perf_counter() - mark[0]
        spent[1] += 1
gc.callbacks.append(_cb)
atexit.register(lambda: sys.stderr.write(f"\nAWNN_GC_STATS {spent[0]:.3f} {spent[1]}\n"))
sys.argv = ["awnn"] + sys.argv[1:]
from search.cli import entry
entry()
"""


def one(command: list[str], freeze: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="awnn-cli-overhead-") as work:
        env = {**os.environ, "AWNN_GC_FREEZE": "1" if freeze else "0", "PYTHONPATH": str(ROOT)}
        env.pop("RAY_ADDRESS", None)
        env.pop("MLFLOW_TRACKING_URI", None)
        start = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", PROBE, *command], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"the command failed ({p.returncode}):\n{p.stderr[-3000:]}")
    stats = [line.split() for line in p.stderr.splitlines() if line.startswith("AWNN_GC_STATS")]
    gc_seconds, collections = (float(stats[-1][1]), int(stats[-1][2])) if stats else (float("nan"), -1)
    return {"wall": wall, "gc_seconds": gc_seconds, "collections": collections}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--command", default="compare --task doublemoon --budget smoke --num-cpus 2")
    args = ap.parse_args()
    command = shlex.split(args.command)
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for r in range(args.repeats):
        for name in (("on", "off") if r % 2 == 0 else ("off", "on")):
            res = one(command, name == "on")
            runs[name].append(res)
            print(f"[cli_overhead] run {r + 1}/{args.repeats} freeze {name}: {res['wall']:.1f} s, "
                  f"{res['collections']} full collections {res['gc_seconds']:.2f} s", file=sys.stderr, flush=True)
    out: dict = {"command": "awnn " + args.command, "repeats": args.repeats}
    for name, rs in runs.items():
        out[f"wall_s_{name}"] = round(statistics.median(r["wall"] for r in rs), 2)
        out[f"full_gc_s_{name}"] = round(statistics.median(r["gc_seconds"] for r in rs), 2)
        out[f"full_collections_{name}"] = statistics.median(r["collections"] for r in rs)
    out["saved_seconds"] = round(out["wall_s_off"] - out["wall_s_on"], 2)
    print(json_text(out))


if __name__ == "__main__":
    main()
