"""Tiny trials sharing one GPU: trials per GPU-hour at several GPU shares (#19).

Runs `awnn sweep --task spiralhard --strategy fixed` on the local Ray of this
machine once per `--gpus-per-trial` share (1, 0.5, 0.25, 0.125 by default;
`--cpus-per-trial` 1, so the GPU share sets how many trials run at once:
1/share), and once on the CPU cores alone (`--gpus-per-trial 0`, one trial
per core), while a thread samples the GPU's utilisation through NVML
(nvidia-smi when NVML is not importable).  The grid is the SpiralHard fixed
grid or, with `--grid subset` (default, to fit a 10-minute call), its
12-config sub-grid batch {32, 128} x hidden layers {1, 2, 4} x width {16, 256}
(ReLU, lr 0.01), at `--epochs` epochs (the quick budget's 120 by default) and
one re-training run.

Per run, from MLflow and the sampler:
    trials, wall_seconds (the sweep's phases on Ray), end_to_end_seconds (the
    whole command), trials_per_gpu_hour = trials / (wall_seconds / 3600) for
    the one GPU (end-to-end too), gpu_hours (recorded: sum of train seconds x
    share / 3600), train_seconds, gpu_util_mean / _p90 (percent, sampled every
    0.2 s while the command ran; gpu_util_mean_phases: only while the sweep's
    phases ran, Ray's start-up left out), gpu_mem_used_mib_max.
`batched_bound`: the step time of G same-shape configs trained as one batched
model (stacked weights, batched matrix products, one Adam), against one
config's step: the bound on what packing configs into one process could give.

Prints one JSON object last.

Usage:  python benchmarks/gpu_packing.py [--shares 1,0.5,0.25,0.125] [--cpu] [--grid subset|full] [--epochs 120]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tracking.fmt import json_text

ROOT = Path(__file__).resolve().parent.parent

SUBSET = """\
task: spiralhard
strategy: fixed
description: 12-config sub-grid of the paper's Table 3 fixed grid (gpu_packing benchmark)
epochs: 5000
retrain_runs: 1
fixed: {model: fixed, optimizer: adam, activation: relu, lr: 0.01}
grid:
  batch_size: [32, 128]
  hidden_layers: [1, 2, 4]
  width: [16, 256]
"""


class GpuSampler(threading.Thread):
    """Samples GPU utilisation (%) and memory used (MiB) every `period` s."""

    def __init__(self, period: float = 0.2):
        super().__init__(daemon=True)
        self.period, self.util, self.mem, self.times = period, [], [], []
        self.stop_event = threading.Event()
        self.source = None
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)

            def read():
                u = pynvml.nvmlDeviceGetUtilizationRates(handle)
                return float(u.gpu), pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20

            self.read, self.source = read, "nvml"
        except Exception:  # noqa: BLE001 - no NVML: nvidia-smi, or nothing
            def read():
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout.split("\n")[0]
                u, m = (float(v) for v in out.split(","))
                return u, m

            try:
                read()
                self.read, self.source = read, "nvidia-smi"
            except Exception:  # noqa: BLE001
                self.read = None

    def run(self):
        while self.read is not None and not self.stop_event.wait(self.period):
            try:
                u, m = self.read()
            except Exception:  # noqa: BLE001
                continue
            self.util.append(u)
            self.mem.append(m)
            self.times.append(time.time())

    def summary(self, start: float | None = None, end: float | None = None) -> dict:
        """Over all samples, and (`_phases`) over those taken between `start`
        and `end` (epoch seconds: the sweep's phases, Ray's start-up left out)."""
        if not self.util:
            return {"gpu_util_mean": None, "gpu_util_p90": None, "gpu_mem_used_mib_max": None, "gpu_samples": 0}
        q = sorted(self.util)
        out = {"gpu_util_mean": round(statistics.fmean(q), 1), "gpu_util_p90": q[int(0.9 * (len(q) - 1))],
               "gpu_mem_used_mib_max": round(max(self.mem)), "gpu_samples": len(q), "gpu_sampler": self.source}
        if start is not None and end is not None:
            inside = [u for u, t in zip(self.util, self.times) if start <= t <= end]
            out["gpu_util_mean_phases"] = round(statistics.fmean(inside), 1) if inside else None
        return out


def run_sweep(share: float, grid: str, epochs: int, num_cpus: int, work: Path) -> dict:
    grids = work / "grids"
    grids.mkdir(parents=True, exist_ok=True)
    if grid == "subset":
        (grids / "spiralhard-fixed.yaml").write_text(SUBSET)
    else:
        (grids / "spiralhard-fixed.yaml").write_text((ROOT / "search" / "grids" / "spiralhard-fixed.yaml").read_text())
    budget = work / "budget.yaml"
    budget.write_text(f"epoch_scale: 0\nmin_epochs: {epochs}\nmax_epochs: {epochs}\nretrain_runs: 1\n")
    cmd = [sys.executable, "-m", "search.cli", "sweep", "--task", "spiralhard", "--strategy", "fixed", "--budget", str(budget),
           "--grid-dir", str(grids), "--num-cpus", str(num_cpus), "--cpus-per-trial", "1", "--gpus-per-trial", str(share),
           "--storage", str(work / "results")]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    sampler = GpuSampler()
    sampler.start()
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=work, env=env, text=True, capture_output=True)
    end_to_end = time.monotonic() - t0
    sampler.stop_event.set()
    sampler.join(2)
    if p.returncode != 0:
        return {"share": share, "error": f"sweep exited {p.returncode}: {p.stderr[-1500:]}"}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    exp = client.get_experiment_by_name("awnn-spiralhard")
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    sweeps = [r for r in runs if r.data.tags.get("awnn.kind") == "sweep"]
    trials = [r for r in runs if r.data.tags.get("awnn.kind") == "trial"]
    wall = sum(r.data.metrics["wall_seconds"] for r in sweeps)
    phases = (min(r.info.start_time for r in sweeps) / 1000, max((r.info.end_time or 0) for r in sweeps) / 1000)
    train = sum(r.data.metrics["train_seconds"] for r in trials)
    out = {
        "share": share,
        "concurrent": int(1 / share) if share else num_cpus,
        "trials": len(trials),
        "ok": sum(t.data.tags.get("awnn.status") == "ok" for t in trials),
        "wall_seconds": round(wall, 2),
        "end_to_end_seconds": round(end_to_end, 2),
        "train_seconds": round(train, 2),
        "mean_trial_train_seconds": round(train / max(1, len(trials)), 3),
        "gpu_hours": round(sum(t.data.metrics.get("gpu_hours", 0.0) for t in trials), 6),
        "device_hours": round(sum(t.data.metrics.get("device_hours", 0.0) for t in trials), 6),
        **sampler.summary(*phases),
    }
    if share:
        out["trials_per_gpu_hour"] = round(len(trials) / (wall / 3600), 1)
        out["trials_per_gpu_hour_end_to_end"] = round(len(trials) / (end_to_end / 3600), 1)
    else:
        out["trials_per_hour"] = round(len(trials) / (wall / 3600), 1)
        out["trials_per_hour_end_to_end"] = round(len(trials) / (end_to_end / 3600), 1)
    print(json_text(out), file=sys.stderr, flush=True)
    return out


def batched_step_seconds(layers: int, width: int, batch: int, configs: int, steps: int = 200) -> float:
    """Seconds per training step of `configs` same-shape MLPs trained as one
    batched model (weights stacked (G, out, in), bmm, one Adam) on the GPU."""
    import torch
    import torch.nn.functional as F

    dev = torch.device("cuda")
    dims = [2] + [width] * layers + [2]
    params = []
    for i in range(len(dims) - 1):
        params.append(torch.nn.Parameter(torch.randn(configs, dims[i + 1], dims[i], device=dev) * (2 / dims[i]) ** 0.5))
        params.append(torch.nn.Parameter(torch.zeros(configs, 1, dims[i + 1], device=dev)))
    opt = torch.optim.Adam(params, lr=0.01, foreach=True)
    x = torch.randn(configs, batch, 2, device=dev)
    y = torch.randint(0, 2, (configs * batch,), device=dev)

    def step():
        h = x
        for i in range(0, len(params) - 2, 2):
            h = torch.relu(torch.baddbmm(params[i + 1], h, params[i].transpose(1, 2)))
        out = torch.baddbmm(params[-1], h, params[-2].transpose(1, 2))
        loss = F.cross_entropy(out.reshape(-1, 2), y) * configs  # each config's mean loss, summed
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def batched_bound() -> dict:
    """Step time of G = 1, 6 (activation x lr share a shape in the full grid)
    and 30 configs batched, at two shapes of the grid."""
    rows = []
    for layers, width, batch in ((2, 128, 128), (4, 256, 32)):
        one = batched_step_seconds(layers, width, batch, 1)
        for g in (6, 30):
            t = batched_step_seconds(layers, width, batch, g)
            rows.append({"layers": layers, "width": width, "batch": batch, "configs": g, "step_us_one": round(one * 1e6, 1),
                         "step_us_batched": round(t * 1e6, 1), "speedup_vs_one_at_a_time": round(g * one / t, 2)})
            print(json_text(rows[-1]), file=sys.stderr, flush=True)
    return {"rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shares", default="1,0.5,0.25,0.125")
    ap.add_argument("--cpu", action="store_true", help="also the same grid on the CPU cores alone")
    ap.add_argument("--grid", choices=["subset", "full"], default="subset")
    ap.add_argument("--epochs", type=int, default=120)
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--no-bound", action="store_true", help="skip the batched-model bound")
    args = ap.parse_args()
    import torch

    out: dict = {"grid": args.grid, "epochs": args.epochs, "num_cpus": args.num_cpus, "torch": torch.__version__, "cuda": torch.version.cuda,
                 "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "runs": []}
    shares = [float(s) for s in args.shares.split(",") if s] if torch.cuda.is_available() else []
    for share in shares:
        out["runs"].append(run_sweep(share, args.grid, args.epochs, args.num_cpus, Path(tempfile.mkdtemp(prefix=f"awnn-pack-{share}-"))))
    if args.cpu or not shares:
        out["cpu"] = run_sweep(0.0, args.grid, args.epochs, args.num_cpus, Path(tempfile.mkdtemp(prefix="awnn-pack-cpu-")))
    if torch.cuda.is_available() and not args.no_bound:
        try:
            out["batched_bound"] = batched_bound()
        except Exception as e:  # noqa: BLE001
            out["batched_bound"] = {"error": f"{type(e).__name__}: {e}"}
    ok = [r for r in out["runs"] if "trials_per_gpu_hour" in r]
    if ok:
        best = max(ok, key=lambda r: r["trials_per_gpu_hour"])
        out["best_share"] = best["share"]
        out["trials_per_gpu_hour"] = {str(r["share"]): r["trials_per_gpu_hour"] for r in ok}
        out["gpu_util_mean"] = {str(r["share"]): r["gpu_util_mean"] for r in ok}
    print(json_text(out))


if __name__ == "__main__":
    main()
