"""awnn env: versions and devices, for bug reports."""
from __future__ import annotations

import importlib
import platform
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("env", help="print versions of Python, torch, Ray, MLflow and the devices seen")
    p.set_defaults(func=run)


def run(args) -> int:
    lines = [f"python: {sys.version.split()[0]} ({platform.platform()})"]
    for mod in ["awnn", "torch", "ray", "mlflow", "optuna", "torch_geometric", "torchvision", "pandas", "numpy"]:
        try:
            m = importlib.import_module(mod)
            lines.append(f"{mod}: {getattr(m, '__version__', '?')}")
        except Exception as e:  # noqa: BLE001 - report whatever failed
            lines.append(f"{mod}: not available ({type(e).__name__})")
    import torch

    lines.append(f"cuda: {torch.cuda.is_available()} ({torch.cuda.device_count()} devices)")
    import os

    lines.append(f"cpus: {os.cpu_count()}")
    print("\n".join(lines))
    return 0
