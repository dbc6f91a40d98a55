"""Cost of one AWNN training step relative to a fixed-width MLP of the same width.

A full step is: width update (AWNN only), forward, ELBO (plain cross-entropy
for the fixed MLP), backward, Adam step.  Batch 128 of SpiralHard's inner
training split, torch threads 1.  The AWNN width moves during training, so
the AWNN is measured in windows and after each window a fixed MLP with
that window's mean AWNN width per layer runs as many steps (interleaved, so
machine noise hits both alike).  Prints one JSON object as its last line:

    ratio_1_layer, ratio_4_layers            AWNN median step / fixed median step (CPU), both in
                                             awnn.train.Trainer (the AWNN's own overhead)
    ratio_vs_lean_1_layer, ..._4_layers      AWNN median step / the same fixed MLP's median step
                                             in the lean loop (awnn/lean.py: how fixed-grid trials
                                             train since issue #30), i.e. per step, what an AWNN
                                             trial costs against a fixed-grid trial of its width
    awnn_us_*, fixed_us_*, width_*           the raw medians (microseconds) and widths
    gpu: {...}                               the same on CUDA, when a GPU is present,
                                             for every --batch (suffix _b<batch>), with
                                             kernel launches and host syncs per step

On CUDA a step's time is its share of a window of consecutive steps timed
between two synchronisations (throughput, as in training: the host queues
kernels ahead of the GPU, and a host read of the rate stalls that queue),
not the latency of one step between synchronisations, which would hide
the cost of host syncs.  Launches per step come from the torch profiler
(`--profile`): CUDA kernels, memory copies and sets recorded on the device,
and on the host the runtime calls that launch them or wait for the device.

The AWNN runs in the `authors` profile unless `--awnn-profile paper-text` is given
(renormalised importances, optimiser reset on resize, ...: see docs/design.md, "Profiles").

Both trainers use the Trainer's Adam, on a CPU the lean one (awnn/lean_adam.py,
issue #30: torch's fused kernel, ~0.2 ms a step less for both); with
AWNN_LEAN_ADAM=0 both use torch.optim.Adam.  The JSON's `adam` says which.
A lighter optimiser lowers both steps by about the same time, so it raises the
ratio: what is left is the AWNN's own work (width update, importances, rho).

Both run as a trial's process does: one torch thread, and on the CPU float
denormals flushed to zero (search/trial_common.worker_setup; `--keep-denormals`
keeps them, the JSON's `flush_denormal` says which).

Usage:  python benchmarks/step_overhead.py [--steps 1500] [--device cpu|cuda|all] [--batch 128,1024] [--profile]
                                          [--awnn-profile authors|paper-text] [--keep-denormals]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.data import load_task  # noqa: E402
from awnn.lean import LeanTrainer  # noqa: E402
from awnn.stacked_grad import forward_backward  # noqa: E402
from awnn.train import Trainer  # noqa: E402
from search.trial_common import worker_setup  # noqa: E402


def make_stepper(trainer: Trainer):
    """The trainer's own step: width update (AWNN), forward, ELBO, backward, optimiser."""
    prior = trainer.rate_prior(1)
    adaptive = bool(trainer.blocks)

    def step(x, y):
        if adaptive:
            trainer.update_widths()
        trainer.train_step(x, y, prior)

    return step


def make_lean_stepper(lean: LeanTrainer):
    """A fixed-grid trial's step as the lean loop takes it (awnn/stacked.py's
    _train_epoch at N = 1): the written-out forward and backward, the flat Adam."""
    stack = lean.stack
    model, opt = stack.model, stack.optimizer

    def step(x, y):
        forward_backward(model, x.unsqueeze(0), y.unsqueeze(0))
        opt.step()

    return step


def batches(x, y, batch, device, gen):
    while True:
        perm = torch.randperm(len(y), generator=gen).to(device)  # one copy per pass, as the trainer does
        for s in range(0, len(y) - batch + 1, batch):
            idx = perm[s : s + batch]
            yield x[idx], y[idx]


def timed(step, it, n, device) -> list[float]:
    """Per-step times.  On CPU: the training thread's CPU time (torch runs on
    this one thread), which equals wall time on an idle machine and is not
    inflated when other processes compete for the cores.  On CUDA: wall time
    between synchronisations."""
    out = []
    if device.type == "cuda":
        sync, clock = torch.cuda.synchronize, time.perf_counter
    else:
        sync, clock = (lambda: None), time.thread_time
    for _ in range(n):
        x, y = next(it)
        sync()
        t0 = clock()
        step(x, y)
        sync()
        out.append(clock() - t0)
    return out


PROFILE = "authors"


def timed_window(step, it, n, device, on_step=None) -> float:
    """Mean time per step of `n` consecutive steps between two synchronisations
    (CUDA: the GPU path's throughput; see the module docstring)."""
    batches_ = [next(it) for _ in range(n)]
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for x, y in batches_:
        step(x, y)
        if on_step is not None:
            on_step()
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / n


def measure(layers: int, device: torch.device, steps: int, windows: int = 8, batch: int = 128) -> dict:
    """AWNN steps in windows; after each window, a fixed MLP with that window's
    mean AWNN width per layer runs as many steps.  The AWNN width drifts while
    it trains, so each window is compared with a fixed MLP of its own width.
    On CUDA each window is timed as a whole (and more, shorter windows are used)."""
    task = load_task("spiralhard")
    x, y = task.tensors("inner", "train", device)
    base = {"task": "spiralhard", "split": "inner", "hidden_layers": layers, "activation": "relu", "batch_size": batch,
            "optimizer": "adam", "lr": 0.01, "device": device.type}
    awnn = Trainer(TrainConfig.from_dict({**base, "model": "awnn", "rate": 0.01, "quantile_k": 0.9, "sigma_theta": 1.0, "awnn_profile": PROFILE}))
    a_step = make_stepper(awnn)
    it = batches(x, y, batch, device, torch.Generator().manual_seed(0))
    timed(a_step, it, 300, device)  # warm-up: capacity buffers, allocator, first width moves
    cuda = device.type == "cuda"
    if cuda:
        windows = max(windows, 4 * windows)
    per_window = max(50, steps // windows)
    a_times: list[float] = []
    f_times: list[float] = []
    l_times: list[float] = []  # the same fixed MLP's step in the lean loop (how fixed-grid trials train)
    widths: list[float] = []
    changes = 0
    n_a = 0
    for _ in range(windows):
        seen = []
        before = list(awnn.model.widths)

        def track():
            nonlocal before, changes
            w = awnn.model.widths
            seen.append(sum(w) / layers)
            changes += w != before
            before = list(w)

        if cuda:
            a_times.append(timed_window(a_step, it, per_window, device, track))
        else:
            for _ in range(per_window):
                a_times += timed(a_step, it, 1, device)
                track()
        n_a += per_window
        width = max(1, round(statistics.fmean(seen)))
        widths.append(width)
        fixed = Trainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
        f_step = make_stepper(fixed)
        timed(f_step, it, 30, device)  # warm-up
        lean = LeanTrainer(TrainConfig.from_dict({**base, "model": "fixed", "width": width}))
        l_step = make_lean_stepper(lean)
        timed(l_step, it, 30, device)
        if cuda:
            f_times.append(timed_window(f_step, it, per_window, device))
            l_times.append(timed_window(l_step, it, per_window, device))
        else:
            f_times += timed(f_step, it, per_window, device)
            l_times += timed(l_step, it, per_window, device)
    a, f, le = statistics.median(a_times), statistics.median(f_times), statistics.median(l_times)
    out = {
        "awnn_us": round(a * 1e6, 1),
        "fixed_us": round(f * 1e6, 1),
        "ratio": round(a / f, 3),
        "lean_fixed_us": round(le * 1e6, 1),
        "ratio_vs_lean": round(a / le, 3),
        "mean_width": round(statistics.fmean(widths), 1),
        "width_change_fraction": round(changes / n_a, 3),
    }
    out["_trainers"] = (awnn, fixed, it)
    return out


# host-side CUDA runtime/driver calls that launch work or wait for the device
_LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaMemcpyAsync", "cudaMemsetAsync",
                 "cudaGraphLaunch")
_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def profile_launches(awnn: Trainer, fixed: Trainer, it, device: torch.device, n: int = 50) -> dict:
    """Per step, for the AWNN (at its current width) and the last window's fixed
    MLP: device activities (kernels, copies, sets), host launch calls and host
    syncs, counted by the torch profiler over `n` steps, and the names of the
    AWNN's extra kernels."""
    from torch.profiler import ProfilerActivity, profile

    out = {}
    names = {}
    for label, trainer in (("awnn", awnn), ("fixed", fixed)):
        step = make_stepper(trainer)
        for _ in range(10):
            step(*next(it))
        torch.cuda.synchronize(device)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                step(*next(it))
            torch.cuda.synchronize(device)
        kernels = launches = syncs = 0
        counts: dict[str, int] = {}
        runtime: dict[str, int] = {}
        for e in prof.events():
            dev = str(getattr(e, "device_type", "")).endswith("CUDA")
            if dev:
                kernels += 1
                counts[e.name] = counts.get(e.name, 0) + 1
                continue
            if e.name.startswith("cu"):
                runtime[e.name] = runtime.get(e.name, 0) + 1
            if e.name in _LAUNCH_CALLS:
                launches += 1
            elif e.name in _SYNC_CALLS:
                syncs += 1
        out[f"{label}_runtime_calls_per_step"] = {k: round(v / n, 2) for k, v in sorted(runtime.items(), key=lambda kv: -kv[1])[:12]}
        # the closing synchronize of the profiled window is not a step's
        out[f"{label}_device_ops_per_step"] = round(kernels / n, 2)
        out[f"{label}_launch_calls_per_step"] = round(launches / n, 2)
        out[f"{label}_host_syncs_per_step"] = round(max(0, syncs - 1) / n, 2)
        names[label] = counts
    extra = {k: round((v - names["fixed"].get(k, 0)) / n, 2) for k, v in names["awnn"].items() if v > names["fixed"].get(k, 0)}
    out["awnn_extra_device_ops"] = dict(sorted(extra.items(), key=lambda kv: -kv[1])[:25])
    return out


def measure_device(device: torch.device, steps: int, batches_: tuple[int, ...] = (128,), profile: bool = False) -> dict:
    """ratio_/awnn_us_/fixed_us_/width_/width_change_fraction_ for 1 and 4 layers
    (suffixed _b<batch> for batches other than 128, or for every batch when
    several are measured)."""
    out: dict = {}
    for batch in batches_:
        suffix = "" if batches_ == (128,) else f"_b{batch}"
        for layers, name in ((1, "1_layer"), (4, "4_layers")):
            r = measure(layers, device, steps, batch=batch)
            awnn, fixed, it = r.pop("_trainers")
            print(f"{device.type} batch {batch} {name}: awnn {r['awnn_us']} us, fixed {r['fixed_us']} us (mean width {r['mean_width']}, "
                  f"width changed at {100 * r['width_change_fraction']:.0f}% of steps), ratio {r['ratio']}; "
                  f"fixed in the lean loop {r['lean_fixed_us']} us, ratio {r['ratio_vs_lean']}", file=sys.stderr)
            key = f"{name}{suffix}"
            out[f"ratio_{key}"] = r["ratio"]
            out[f"ratio_vs_lean_{key}"] = r["ratio_vs_lean"]
            out[f"lean_fixed_us_{key}"] = r["lean_fixed_us"]
            out[f"awnn_us_{key}"] = r["awnn_us"]
            out[f"fixed_us_{key}"] = r["fixed_us"]
            out[f"width_{key}"] = r["mean_width"]
            out[f"width_change_fraction_{key}"] = r["width_change_fraction"]
            if profile and device.type == "cuda":
                try:
                    p = profile_launches(awnn, fixed, it, device)
                except Exception as e:  # noqa: BLE001 - the timings above still count
                    p = {"error": f"{type(e).__name__}: {e}"}
                print(f"  launches per step: {json_text(p)}", file=sys.stderr)
                out[f"profile_{key}"] = p
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    ap.add_argument("--batch", default="128", help="comma-separated batch sizes (default 128)")
    ap.add_argument("--profile", action="store_true", help="CUDA: count kernel launches and host syncs per step (torch profiler)")
    ap.add_argument("--awnn-profile", choices=["authors", "paper-text"], default="authors", help="the AWNN's awnn_profile (default authors)")
    ap.add_argument("--keep-denormals", action="store_true", help="keep float denormals on the CPU (trials flush them by default)")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.awnn_profile
    batches_ = tuple(int(b) for b in args.batch.split(","))
    flushed = worker_setup({"cpus_per_trial": 1, "flush_denormal": not args.keep_denormals})  # as a trial's process
    from awnn import lean_adam

    out: dict = {"batch": batches_[0] if len(batches_) == 1 else list(batches_), "threads": 1, "steps": args.steps, "torch": torch.__version__,
                 "awnn_profile": args.awnn_profile, "adam": "lean (CPU)" if lean_adam.enabled() else "torch.optim.Adam",
                 "flush_denormal": flushed}
    if args.device in ("cpu", "all"):
        out.update(measure_device(torch.device("cpu"), args.steps, batches_))
    if args.device in ("cuda", "all") and torch.cuda.is_available():
        out["gpu"] = {"name": torch.cuda.get_device_name(0), "cuda": torch.version.cuda,
                      **measure_device(torch.device("cuda"), args.steps, batches_, args.profile)}
    elif args.device == "cuda":
        out["gpu"] = None
        print("no CUDA device: GPU figures skipped", file=sys.stderr)
    print(json_text(out))


if __name__ == "__main__":
    main()
