"""The adaptive layer's element-wise step work in one C pass each way
(awnn/csrc/importance_step.c), built once per machine and loaded with ctypes.

Why (issue #30): at SpiralHard's sizes a CPU step is a few dozen small torch
calls, each a few microseconds of dispatch; the `authors` profile's
importances, their product with the activations or weights and rho's
gradient were ~11 of them per layer, most of the AWNN step's excess over a
fixed-grid trial's step (`benchmarks/step_floor.py`).  Two C calls replace
them.  Only work a fixed-width layer does not have goes to C (see the C
source): the step ratio compares like with like.

Build: the system C compiler (`$CC`, else `cc`, `gcc` or `clang`) with
`-O3 -shared -fPIC`, into the user's cache (`awnn.aside.cache_dir()`), named
by a hash of the source, the flags and the machine's architecture, made aside
and put in place whole (two processes building at once: one library wins,
both load a whole file).  Plain C, no CPU-specific flags: one library serves
every CPU of its architecture (a cache shared over NFS included).

Where it is not used (awnn/fast_step.py then does the same arithmetic with
torch ops, its reference path):

* `AWNN_NATIVE=0` (the switch);
* no C compiler, a failed build, an unwritable cache, a library that does
  not load: one line on stderr per process, then the torch path;
* tensors the kernels were not written for (not float32/float64, not on the
  CPU, layouts other than dense rows): the caller checks, per step.

tests/awnn/test_native.py compares it with the torch path (one float32 step,
whole float64 runs over width moves) and covers the build's failures.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import torch

from . import aside

__all__ = ["SWITCH", "SOURCE", "FLAGS", "enabled", "kernels", "library_path", "Kernels"]

SWITCH = "AWNN_NATIVE"
SOURCE = Path(__file__).resolve().parent / "csrc" / "importance_step.c"
FLAGS = ("-O3", "-std=c99", "-shared", "-fPIC")
ABI_VERSION = 2  # awnn_abi_version() of the source this module calls
BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_loaded: dict[str, "Kernels | None"] = {}  # library path -> its kernels (None: it failed, said once)


def enabled() -> bool:
    """The switch: on unless AWNN_NATIVE=0."""
    return os.environ.get(SWITCH, "1") != "0"


def compiler() -> str | None:
    """The C compiler to build with: $CC where set (a command, found on PATH or a path), else cc, gcc, clang."""
    cc = os.environ.get("CC")
    if cc:
        return shutil.which(cc)
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return found
    return None


def library_path() -> Path:
    """Where this source's library is kept for this machine's architecture."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join(FLAGS).encode())
    h.update(f"{sys.platform}-{platform.machine()}".encode())
    return aside.cache_dir() / f"importance_step-{h.hexdigest()[:16]}.so"


class Kernels:
    """The loaded library's two calls, per dtype (see the C source for the arithmetic)."""

    def __init__(self, lib: ctypes.CDLL):
        P, L, D, I = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_double, ctypes.c_int
        if lib.awnn_abi_version() != ABI_VERSION:
            raise OSError(f"the library's ABI version is {lib.awnn_abi_version()}, this module's {ABI_VERSION}")
        self.forward_fn, self.backward_fn = {}, {}
        for dtype, suffix in ((torch.float32, "f32"), (torch.float64, "f64")):
            fwd = getattr(lib, f"awnn_forward_{suffix}")
            fwd.argtypes = [P, L, D, D, D, P, P, P, L, L, P]
            fwd.restype = None
            bwd = getattr(lib, f"awnn_backward_{suffix}")
            bwd.argtypes = [P, P, L, L, L, P, P, P, D, D, D, P, P]
            bwd.restype = None
            self.forward_fn[dtype], self.backward_fn[dtype] = fwd, bwd

    def forward(self, j1: torch.Tensor, c0: float, neg_rate: float, e: float, big_e: torch.Tensor, p: torch.Tensor,
                m: torch.Tensor, scaled: torch.Tensor) -> None:
        """The importances into big_e and p, m * p into scaled.  The caller guarantees: one CPU
        dtype the library has, j1, big_e, p (D,) and scaled (rows, D) dense, m (rows, D) with
        dense rows (stride(1) 1)."""
        self.forward_fn[m.dtype](j1.data_ptr(), j1.shape[0], c0, neg_rate, e, big_e.data_ptr(), p.data_ptr(),
                                 m.data_ptr(), m.shape[0], m.stride(0), scaled.data_ptr())

    def backward(self, g: torch.Tensor, m: torch.Tensor, j1: torch.Tensor, big_e: torch.Tensor, p: torch.Tensor,
                 s: float, sigma: float, c: float, grad_rho: torch.Tensor, out: torch.Tensor) -> None:
        """grad_rho[0] = sum(g * m * dp) + c and out = g * p (out may be g); g and out dense
        (rows, D), m's rows dense."""
        self.backward_fn[g.dtype](g.data_ptr(), m.data_ptr(), m.shape[0], m.stride(0), j1.shape[0], j1.data_ptr(),
                                  big_e.data_ptr(), p.data_ptr(), s, sigma, c, grad_rho.data_ptr(), out.data_ptr())


def kernels() -> Kernels | None:
    """The kernels, built where this machine has none yet; None where they
    cannot be had (the switch is off, or the build or load failed: said once
    per process on stderr)."""
    if not enabled():
        return None
    try:
        path = library_path()
    except Exception as e:  # noqa: BLE001 - no home folder: the torch path
        return _failed("-", f"no cache folder ({e})")
    key = str(path)
    if key in _loaded:
        return _loaded[key]
    with _lock:
        if key in _loaded:
            return _loaded[key]
        try:
            result: Kernels | None = _load(path)
        except Exception as e:  # noqa: BLE001 - every failure of a build or load: the torch path, said once
            return _failed(key, str(e))
        _loaded[key] = result
        return result


def _load(path: Path) -> Kernels:
    """The library at `path`, built where there is none; one there that does not
    load (damaged, another build's ABI) is removed and built again, once."""
    if path.exists():
        try:
            return Kernels(ctypes.CDLL(str(path)))
        except OSError:
            aside.remove(path)
    _build(path)
    return Kernels(ctypes.CDLL(str(path)))


def _failed(key: str, why: str) -> None:
    _loaded[key] = None
    first = why.strip().splitlines()[0] if why.strip() else "unknown error"
    print(f"awnn: the C step kernels are not available ({first[:300]}): the AWNN step uses torch ops "
          f"(slower on a CPU; set {SWITCH}=0 to silence this)", file=sys.stderr)
    return None


def _build(path: Path) -> None:
    """Compile the source to `path`, made aside and put in place whole."""
    cc = compiler()
    if cc is None:
        raise OSError("no C compiler found ($CC, cc, gcc, clang)")
    path.parent.mkdir(parents=True, exist_ok=True)
    aside.remove_abandoned(path)
    made = aside.aside_path(path)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", str(made), str(SOURCE), "-lm"], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise OSError(f"{Path(cc).name} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()}")
        aside.place(made, path)
    finally:
        aside.remove(made)
