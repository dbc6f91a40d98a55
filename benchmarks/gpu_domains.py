"""Every domain trains on CUDA for a few epochs (issue #19).

For each task, the first config of its fixed and of its AWNN grid
(`search/grids/<task>-<strategy>.yaml`: `fixed` plus the first value of every
grid key) is trained for `--epochs` epochs on the GPU: ResNet-20 on digits
(bundled) and on MNIST / CIFAR-10 data written in their real on-disk formats
(IDX files, pickled python batches), GIN on a TU-format graph set (NCI1
layout), the 6+6 Transformer on parallel text (Multi30k layout).  The data
files are written by the test suite's own writers (tests/data_helpers.py).

Prints one line per run on stderr and one JSON object last:
    {"device": ..., "torch": ..., "cuda": ..., "runs": [{task, model, status,
     epochs_run, seconds_per_epoch, widths, best_val_acc, peak_mem_mib}, ...],
     "all_ok": bool}

Usage:  python benchmarks/gpu_domains.py [--epochs 3] [--device cuda] [--tasks digits,mnist,...] [--small]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from tracking.fmt import json_text  # noqa: E402  (strict JSON: a NaN is null)

import torch  # noqa: E402
import yaml  # noqa: E402

from awnn.config import TrainConfig  # noqa: E402
from awnn.train import train  # noqa: E402

TASKS = ("digits", "mnist", "cifar10", "nci1", "multi30k")


def first_config(task: str, strategy: str) -> dict:
    spec = yaml.safe_load((ROOT / "search" / "grids" / f"{task}-{strategy}.yaml").read_text())
    cfg = dict(spec.get("fixed") or {})
    cfg.update({k: v[0] for k, v in (spec.get("grid") or {}).items()})
    cfg["task"] = task
    return cfg


def write_data(root: Path, small: bool) -> None:
    from data_helpers import make_cifar, make_mnist, write_multi30k, write_tu

    k = 1 if small else 10
    make_mnist(str(root), n_train=200 * k, n_test=50 * k)
    make_cifar(str(root), per_batch=40 * k, n_test=40 * k)
    write_tu(str(root), "NCI1", n_graphs=60 * k)
    write_multi30k(str(root), sizes=(("train", 200 * k), ("val", 24 * k), ("test", 24 * k)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--small", action="store_true", help="tiny data and models (a CPU dry run)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="awnn-gpu-domains-"))
    write_data(root, args.small)
    runs = []
    for task in args.tasks.split(","):
        for strategy in ("fixed", "awnn"):
            cfg = {**first_config(task, strategy), "epochs": args.epochs, "device": args.device, "data_root": str(root), "patience": 0}
            if args.small and task == "multi30k":
                cfg.update(d_model=32, heads=2, encoder_layers=1, decoder_layers=1)
            if torch.cuda.is_available():
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            row = {"task": task, "model": strategy}
            try:
                r = train(TrainConfig.from_dict(cfg, source=f"{task}-{strategy}"))
                row.update(status=r.status, epochs_run=r.epochs_run, seconds_per_epoch=round(r.train_seconds / max(1, r.epochs_run), 3),
                           widths=r.widths, best_val_acc=round(r.best_val_acc, 4))
            except Exception as e:  # noqa: BLE001 - every domain is reported, a failure too
                row.update(status="error", error=f"{type(e).__name__}: {e}"[:500])
            row["wall_seconds"] = round(time.perf_counter() - t0, 2)
            if torch.cuda.is_available():
                row["peak_mem_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
            print(json_text(row), file=sys.stderr, flush=True)
            runs.append(row)
    out = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else args.device, "torch": torch.__version__,
           "cuda": torch.version.cuda, "epochs": args.epochs, "runs": runs,
           "all_ok": all(r["status"] in ("ok", "width_capped") for r in runs)}
    print(json_text(out))


if __name__ == "__main__":
    main()
