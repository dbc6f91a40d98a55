"""The limits a local Ray node's processes inherit from the shell that starts it: `ulimit -v` (RLIMIT_AS, the address
space a process may map), `ulimit -d` (RLIMIT_DATA, since Linux 4.7 its private writable mappings) and `ulimit -f`
(RLIMIT_FSIZE, the largest file it may write: past it, SIGXFSZ ends it), as HPC login nodes and shared workstations
set them.  (`ulimit -n`, open files, needs nothing: Ray raises it to the hard limit, and a comparison ran at 64.)

A process maps far more than it uses.  Measured 2026-12-07 (2 cores, Linux, torch 2.14.1 with its CUDA libraries,
Ray 2.60, VmPeak from /proc): importing torch maps 3.1 GiB; a trial's process at its peak 5.6 GiB; the driver
2.8 GiB, of which `ray.init` adds 1.2 GiB (its threads' stacks and malloc arenas).  Found by trying, the command
`awnn compare --task doublemoon --budget smoke` ended four ways, none of them saying why:

* `ulimit -v 4000000` (3.8 GiB): every trial failed to import torch ("libtorch_cpu.so: failed to map segment from
  shared object"), each with its traceback at each retry: 1,098 lines, 1 min 50 s, a report of nothing, exit 1;
* 2,500,000: the driver aborted inside `ray.init` (a C++ `std::system_error`, "Resource temporarily unavailable",
  creating a thread), exit 134, a 19-line stack;
* 1,000,000: the node's processes could not start: 30 s, "The current node timed out during startup", 33 lines;
* 3,000,000: the workers could not load Ray Tune (pandas: "failed to map segment"), Ray made the trials' actors
  placeholders, and the driver waited with nothing said (stopped after 5 min).

`ulimit -f` 81920 (80 MiB), or 98304 (exactly the local node's 96 MiB object store, a file in /dev/shm): 30 s, then
"The current node timed out during startup" (33 lines); 98560 ran to its report.

Now (a local node only: a cluster's nodes have their own limits):

* `check_local`, before the node starts: a limit that leaves this process less than `DRIVER_GROWTH` to map is one
  line, exit 2 (the driver alone would fail); so is one a trial's process cannot load its code under, as
  `worker_probe` finds by loading it in a child process under the same limit (~3 s, only where a limit is set:
  how much a trial maps depends on the machine, its cores and torch's build, so no fixed number could say), or one
  that leaves it less than WORKER_THREADS for a Ray worker's threads on top (AWNN_LIMIT_PROBE=0: no probe); a limit
  below `NOTE_BELOW` is said in one line; a `ulimit -f` no larger than the object store is one line, exit 2, and one
  under FILE_NOTE_BELOW a note (a checkpoint, the MLflow store or a report past it ends the process writing it);
* `start_failure`, when the node's start fails under a limit: one line naming it;
* a trial that cannot import its code or start a thread (tracking.contract.environment_failure) stops the comparison
  as its environment's fault at its first failure, in one line (search/sweep.py), naming the limit through
  `environment_remedy` where a library or a thread's stack could not be mapped (`mapping_failed`);
* a trial's worker that died (at `ulimit -v` 3,900,000 a worker died creating a thread: Ray's "A worker died or was
  killed ... by an unexpected system error", three times) stops it as a lost worker, whose one line then names the
  limit (`limits_note`).

Measured since, the same command: 1.0, 2.4, 2.9 and 4.6 GiB, one line in 2-6 s, before Ray starts, nothing written;
4.96 GiB (`ulimit -v` 5200000) runs to its report.  Where the probe passes and a trial still does not fit (or with
AWNN_LIMIT_PROBE=0: at 3.8 GiB) the first trial's failure stops it: 6-10 lines in 13 s (Ray's line for each failed
trial and the comparison's), exit 2, resumable.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, NamedTuple

__all__ = ["Limit", "finite_limits", "describe", "remedy", "mapping_failed", "mapped_bytes", "check_local", "start_failure",
           "environment_remedy", "limits_note", "worker_probe", "WORKER_THREADS", "PROBE_SWITCH", "DRIVER_GROWTH", "NOTE_BELOW", "LOCAL_OBJECT_STORE", "FILE_SIZE"]

GIB = 1 << 30
DRIVER_GROWTH = 1 * GIB  # the least `ray.init` adds to the driver's mappings (measured 1.2 GiB on 2 cores: more cores, more)
WORKER_THREADS = GIB // 2  # the least a Ray worker's threads map beyond its imports (measured 1.1 GiB on 2 cores: 27 threads)
NOTE_BELOW = 16 * GIB
FILE_SIZE = "file size"  # RLIMIT_FSIZE's `what`: a write past it ends the process (SIGXFSZ)
LOCAL_OBJECT_STORE = 96 << 20  # a local node's object store (search/tune.py init_ray): a file of this size in /dev/shm
FILE_NOTE_BELOW = GIB  # under this a checkpoint or the MLflow store may pass it
PROBE_SWITCH = "AWNN_LIMIT_PROBE"  # 0: no worker_probe (its refusals left to the trials, which stop the comparison as they fail)  # under this a trial may not fit (its measured peak 5.6 GiB on 2 cores; arenas grow with cores)

# glibc's dlopen when mmap fails (ENOMEM: a limit or no memory), and a thread or allocation the limit refused
_NO_THREAD = "can't start new thread"  # CPython's, where the thread's stack cannot be mapped
_MAPPING_SAYS = ("failed to map segment from shared object", "cannot allocate memory", "resource temporarily unavailable",
                 "std::bad_alloc", "can't allocate memory", _NO_THREAD)


class Limit(NamedTuple):
    """A finite soft limit: what it limits, its `ulimit` flag, its value in bytes, and the hard limit (None: unlimited)."""

    what: str
    flag: str
    soft: int
    hard: int | None


def finite_limits() -> list[Limit]:
    """This process's finite soft limits on mapped memory and on the size of a file it writes (its children, a local
    Ray's processes, inherit them)."""
    try:
        import resource
    except ImportError:  # (not on Windows)
        return []
    out = []
    for name, what, flag in (("RLIMIT_AS", "address space", "-v"), ("RLIMIT_DATA", "data segment", "-d"), ("RLIMIT_FSIZE", FILE_SIZE, "-f")):
        code = getattr(resource, name, None)
        if code is None:
            continue
        soft, hard = resource.getrlimit(code)
        if soft != resource.RLIM_INFINITY:
            out.append(Limit(what, flag, soft, None if hard == resource.RLIM_INFINITY else hard))
    return out


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB // 2 else f"{n / (1 << 20):.1f} MiB"


def _memory(limits: list[Limit]) -> list[Limit]:
    return [lim for lim in limits if lim.what != FILE_SIZE]


def describe(limits: list[Limit]) -> str:
    """'a process's address space is limited to 3.8 GiB here (`ulimit -v` 4000000)', one clause per limit (`ulimit`
    counts KiB for -v and -d, and, in bash, 1024-byte blocks for -f)."""
    def subject(lim: Limit) -> str:
        return "a file a process writes" if lim.what == FILE_SIZE else f"a process's {lim.what}"

    return "; ".join(f"{subject(lim)} is limited to {_gib(lim.soft)} here (`ulimit {lim.flag}` {lim.soft // 1024})" for lim in limits)


def remedy(limits: list[Limit]) -> str:
    """What to do: raise each limit in the shell that runs the command (`ulimit -S` up to the hard limit, where that is
    finite), or, where it is the hard limit too (bash's `ulimit -v N` sets both), run where it is higher."""
    raise_, fixed = [], []
    for lim in limits:
        if lim.hard is None:
            raise_.append(f"`ulimit {lim.flag} unlimited`")
        elif lim.hard > lim.soft:
            raise_.append(f"`ulimit -S {lim.flag} {lim.hard // 1024}` (its hard limit)")
        else:
            fixed.append(f"`ulimit {lim.flag}`")
    parts = []
    if raise_:
        parts.append("raise it in the shell that runs the command: " + " and ".join(raise_))
    if fixed:
        parts.append(f"{' and '.join(fixed)} {'is' if len(fixed) == 1 else 'are'} also this shell's hard limit, which only a new shell "
                     "(or root) raises: run it from a shell or node without it")
    return "; ".join(parts)


def limits_note(on_cluster: bool) -> str:
    """'; <the limits>, under which ...: <remedy>' for a lost worker's one line where this shell's limits bind a local
    node's processes (a worker that cannot map a thread's stack dies: "A worker died ... unexpected system error",
    found at `ulimit -v` 3900000), else ''."""
    limits = [] if on_cluster else finite_limits()
    if not limits:
        return ""
    return (f"; {describe(limits)}, and a process that goes past such a limit dies so (a mapping refused: a trial's maps 5.6 GiB "
            f"at its peak on 2 cores; a file written past `ulimit -f`): {remedy(limits)}")


def mapping_failed(text: str) -> bool:
    """Does an error's text say a process could not map a library or memory (a limit, or no memory)?"""
    low = text.lower()
    return any(s in low for s in _MAPPING_SAYS)


def mapped_bytes(limit: Limit) -> int | None:
    """What this process maps now under `limit` (VmSize for the address space, VmData for the data segment), or None."""
    key = "VmSize:" if limit.what == "address space" else "VmData:"
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


_PROBE = """
import search.warm
peak = None
try:
    with open("/proc/self/status") as f:
        peak = next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmPeak:")), None)
except OSError:
    pass
print(repr((peak, search.warm.failed)))
"""
_probed: dict = {}


def worker_probe() -> tuple[int | None, str | None]:
    """(the most this machine's trial imports map, bytes or None where /proc is not; what failed, or None): a child
    process under this process's limits imports what a local Ray's worker imports before its first trial
    (search/warm.py: torch, Ray Tune, the trainer).  Once a process (~3 s of CPU on 2 cores, only under a limit)."""
    if "result" not in _probed:
        import ast
        import subprocess
        from pathlib import Path

        env = {k: v for k, v in os.environ.items() if k != "AWNN_WARM_DIR"}
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        try:
            p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            _probed["result"] = (None, f"{type(e).__name__}: {e}")
        else:
            said = p.stdout.strip().splitlines()
            if p.returncode == 0 and said:
                _probed["result"] = ast.literal_eval(said[-1])
            else:  # (killed, aborted: a C++ error's line, else its exit)
                lines = [ln.strip() for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith(("File ", "^", "Traceback"))]
                why = next((ln for ln in reversed(lines) if "Error" in ln or "what():" in ln), lines[-1] if lines else "")
                why = f"a C++ error, {why.split(':', 1)[1].strip()}" if why.startswith("what():") else why
                _probed["result"] = (None, (why or f"exit {p.returncode}")[:300])
    return _probed["result"]


def check_local(log: Callable[[str], None] | None = None, limits: list[Limit] | None = None, note: bool = True,
                probe: Callable[[], tuple[int | None, str | None]] | None = None) -> None:
    """Before a local node starts, under a finite limit: one too low for the driver alone, or for a worker to load
    what a trial needs (`worker_probe`, plus WORKER_THREADS for its threads), is a SearchError (one line, exit 2); one
    below NOTE_BELOW is said through `log` (default: stderr) when `note`."""
    from .errors import SearchError

    limits = finite_limits() if limits is None else limits
    if not limits:
        return
    files = [lim for lim in limits if lim.what == FILE_SIZE]
    for lim in files:
        if lim.soft <= LOCAL_OBJECT_STORE:  # (2026-12-07: `ulimit -f` 98304, exactly the store, timed out; 98560 ran to its report)
            raise SearchError(f"{describe([lim])}: a local Ray's object store is a {_gib(LOCAL_OBJECT_STORE)} file, which its node "
                              f"could not write (its start timed out after 30 s); {remedy([lim])}, or join a cluster with --address")
    for lim in _memory(limits):
        used = mapped_bytes(lim)
        if used is not None and lim.soft - used < DRIVER_GROWTH:
            raise SearchError(f"{describe([lim])}, and this process maps {_gib(used)} already: starting a local Ray adds at least "
                              f"{_gib(DRIVER_GROWTH)} to it and a trial's process maps several GiB (torch's libraries alone 3.1 GiB "
                              f"with its CUDA build); {remedy([lim])}, or join a cluster with --address")
    memory = _memory(limits)
    peak, failed = (probe or worker_probe)() if memory and os.environ.get(PROBE_SWITCH, "1") != "0" else (None, None)
    if failed:
        raise SearchError(f"{describe(memory)}: a trial's process cannot load what it needs under it ({failed}); {remedy(memory)}, "
                          "or join a cluster with --address")
    space = next((lim for lim in limits if lim.what == "address space"), None)
    if peak is not None and space is not None and space.soft < peak + WORKER_THREADS:
        raise SearchError(f"{describe([space])}: loading what a trial needs maps {_gib(peak)} here, and a Ray worker's threads "
                          f"{_gib(WORKER_THREADS)} or more on top (measured 1.1 GiB on 2 cores); {remedy([space])}, or join a "
                          "cluster with --address")
    if not note:
        return
    low = [lim for lim in memory if lim.soft < NOTE_BELOW]
    if low:
        maps = f"{_gib(peak)} for its imports here and its threads about 1 GiB more" if peak is not None else "several GiB"
        (log or _stderr)(f"note: {describe(low)}: a trial's process maps {maps}, far more than it uses; a trial that cannot "
                         "start under it stops the comparison, in one line")
    small = [lim for lim in files if lim.soft < FILE_NOTE_BELOW]
    if small:
        (log or _stderr)(f"note: {describe(small)}: a process that writes a file past it is ended (SIGXFSZ): a trial's checkpoint "
                         "(a lost worker, named so), the MLflow store or a report's file (this command, at once)")


def start_failure(error: BaseException, limits: list[Limit] | None = None) -> str | None:
    """The one line for a local node whose start failed (`error`) under a finite limit, or None without one."""
    limits = finite_limits() if limits is None else limits
    if not limits:
        return None
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    said = f"{type(error).__name__}: {lines[0][:200]}" if lines else type(error).__name__
    return (f"a local Ray could not start ({said}); {describe(limits)}, which its processes may need more than "
            f"(a trial's maps 5.6 GiB at its peak on 2 cores); {remedy(limits)}, or join a cluster with --address")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)



def environment_remedy(error: str, on_cluster: bool) -> str:
    """What a trial that could not import its code or start a thread (`error`, its line: tracking.contract.
    environment_failure) needs, for the comparison's one line: the limit and how to raise it (a local node, whose
    limits are this shell's), else what to look at on the node."""
    if mapping_failed(error):
        what = "start a thread" if _NO_THREAD in error.lower() else "map a library into memory"
        limits = [] if on_cluster else _memory(finite_limits())
        if limits:
            return f"its process could not {what}: {describe(limits)}; {remedy(limits)}"
        return (f"its process could not {what}: a limit on that node's processes (`ulimit -v` or `ulimit -u` where its Ray "
                "node was started, a container's memory or pids limit) or too little free memory there; raise the limit there, "
                "or free memory")
    if "StorageNotShared" in error:  # (search/shared_storage.py)
        return ("give --storage a folder every node mounts at the same path (NFS, a shared volume) or an s3:// URI, or "
                "mount it on that node")
    if "CodeMismatch" in error:  # (search/code_identity.py)
        return ("install the driver's version of this project on that node (`pip install -e '.[all]'` from the same commit; a "
                "cluster's image: rebuild cluster/Dockerfile), or set AWNN_CODE_CHECK=0 to run the nodes' code as it is")
    return ("that node's Python cannot import the trial's code: install this project there as here (`pip install -e '.[all]'`, "
            "the same version; a cluster's image: cluster/Dockerfile)")
