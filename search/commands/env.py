"""awnn env: versions and devices, for bug reports."""
from __future__ import annotations

import os
import platform
import sys

from . import command_parser

# distribution names (what pip installed); read from the installed metadata, not by importing them
PACKAGES = ["awnn-search", "torch", "ray", "mlflow", "optuna", "torch-geometric", "torchvision", "pandas", "numpy"]


def add_parser(sub) -> None:
    p = command_parser(sub, "env", "print versions of Python, torch, Ray, MLflow and the devices seen",
                       "Versions of Python and of the installed packages, the CUDA devices and the CPUs: "
                       "paste its output into a bug report.", ["awnn env"])
    p.set_defaults(func=run)


def run(args) -> int:
    from importlib.metadata import PackageNotFoundError, version

    lines = [f"python: {sys.version.split()[0]} ({platform.platform()})"]
    for name in PACKAGES:
        try:
            lines.append(f"{name}: {version(name)}")
        except PackageNotFoundError:
            lines.append(f"{name}: not installed")
    import torch  # the one import needed: which devices this process sees

    lines.append(f"cuda: {torch.cuda.is_available()} ({torch.cuda.device_count()} devices)")
    lines.append(f"cpus: {os.cpu_count()}")
    print("\n".join(lines))
    return 0
