"""Which CPU computed a result: its model name and the instruction set
torch's CPU kernels dispatch to.  Float results differ between CPU models
(another vendor's BLAS paths, other vector widths), so a comparison records
it with every trial run (search/trial_common.py `attempt_info`, tag
`awnn.cpu`) and the report says when its runs span more than one
(tracking/execution.py); the benchmarks print it beside their timings."""
from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["cpu_model", "cpu_identity"]


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo's first `model name`), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                name = " ".join(line.split(":", 1)[1].split())
                if name:
                    return name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_identity() -> str:
    """`<model> (<torch's kernel ISA>)`, e.g. `AMD EPYC (AVX512)`: what decides a float result on the CPU."""
    try:
        import torch

        kernels = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - an old or CPU-less torch build: the model alone
        kernels = ""
    return f"{cpu_model()} ({kernels})" if kernels else cpu_model()
