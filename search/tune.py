"""Ray Tune: Ray start-up and the run of a comparison's trials on one Tuner.

The trial itself (what runs in a Ray worker) is search/trial.py.  One trial
trains one config with `awnn.train.Trainer`.  Per-epoch records
travel to the driver through `tune.report`; to keep Ray's per-report cost
(a few milliseconds of driver work on a 2-core machine) from dominating
trials whose epochs take milliseconds, a report is sent when at least
`report_interval` seconds have passed since the previous one and carries
every epoch since then (`epochs` list).  With `report_interval=0` every
epoch is its own report.  The report's top-level `epoch` is the latest
epoch, so schedulers such as ASHA (time_attr="epoch") see progress.

A trial saves a checkpoint (the trainer's full state, widths included) every
`checkpoint_interval` seconds; a retried trial (FailureConfig) continues
from it: the epoch counter goes on, it does not start over.
"""
from __future__ import annotations

import atexit
import contextlib
import glob
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from . import _ray_speedups, node_files, node_limits, scratch, signals
from .trial import trainable  # the trial function Tune runs (search/trial.py)

__all__ = ["RunSettings", "trainable", "init_ray", "run_plan", "trial_settings", "wait_for_warm_workers", "ray_session_dir", "gcs_gone", "local_node_gone", "watch_cluster", "check_trial_fits", "exit_process", "exit_now"]


def tune_environment() -> None:
    """Ray Tune's documented environment settings this driver relies on (a
    value the user set wins); applied by `init_ray` and `run_plan`, before
    Ray starts or Tune runs.  Private-API tweaks live in search/_ray_speedups.py."""
    # keep Ray quiet and light on a laptop: no per-trial CSV/JSON/TensorBoard files
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ.setdefault("TUNE_RESULT_BUFFER_LENGTH", "1")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Ctrl-C must stop the sweep with a KeyboardInterrupt, not let Tune swallow it
    # and return as if done (the driver would then close the sweep as finished).
    os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
    _quiet_environment_tracebacks()


class _EnvironmentErrorsInOneLine(logging.Filter):
    """A Ray Tune log record of a fault of the trials' environment keeps its
    message and the error's one line, without the traceback (20-25 lines):
    a write that found no room or permission (tracking.contract.STORAGE_ERRNOS:
    e.g. "Saving experiment state to storage ... failed" on a full disk, at
    every save), a trial's worker process lost ("Trial task failed for
    trial ...": killed, out of memory, its node died; tracking.contract.
    lost_worker), which Ray retries or the driver reports in one line, or a
    trial whose allocation found no memory (errors.out_of_memory: a config
    too large for its node; before, 68 lines of traceback at each attempt),
    or a trial that could not import its code (tracking.contract.environment_failure:
    `ulimit -v`, a module missing on its node), which stops the comparison.
    Any other error of a trial keeps its traceback: a bug is found from it."""

    def filter(self, record: logging.LogRecord) -> bool:
        from tracking.contract import environment_failure, lost_worker

        from .errors import out_of_memory, storage_error

        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return self._unhandled(record)
        found = storage_error(error)
        if found is not None:
            detail = os.strerror(found.errno)
        elif environment_failure(error) is not None:  # its code cannot be imported on its node (`ulimit -v`, a module missing): the driver stops
            detail = environment_failure(error)  # (before a lost worker: an actor that could not load its class dies)
        elif lost_worker(error) or record.getMessage().startswith(_RAY_STATE_SAVES):
            # a lost worker (Ray's memory monitor's kills included); or any failed save of Ray Tune's experiment state,
            # which awnn never reads (--resume reads MLflow): e.g. Ray's own race copying a temporary file its atomic
            # save renamed meanwhile (FileNotFoundError)
            cause = getattr(error, "cause", None) or error
            lines = [ln.strip() for ln in str(cause).splitlines() if ln.strip()]
            detail = f"{type(cause).__name__}: {lines[0][:300] if lines else 'no detail'}"
        elif out_of_memory(error) is not None:  # a config too large for its node's memory (Tune retries it: on a shared node it may fit later)
            detail = f"out of memory: {out_of_memory(error)}"
        else:
            return True
        record.msg = f"{record.getMessage().rstrip(': ')}: {detail}"
        record.args, record.exc_info, record.exc_text, record.stack_info = None, None, None, None
        return True


    @staticmethod
    def _unhandled(record: logging.LogRecord) -> bool:
        """Ray's "Unhandled error" of a trial's result nobody fetched (the driver stopped the comparison meanwhile), its
        traceback in the message: an import failure's (`ulimit -v`) kept to its last line."""
        from tracking.contract import environment_failure

        message = record.getMessage()
        if message.startswith(_UNHANDLED):
            found = environment_failure(None, message)
            if found is not None:
                record.msg, record.args = f"{message.split(': ', 1)[0]}: {found}", None
        return True


_UNHANDLED = "Unhandled error"  # ray._private.worker's log of an error no ray.get fetched (Ray 2.60)
_RAY_STATE_SAVES = ("Saving experiment state", "Experiment state snapshotting failed")  # Ray Tune's log of a failed save of its state
_ENVIRONMENT_FILTER = _EnvironmentErrorsInOneLine()
# the Ray Tune loggers that log a failed write into the storage, or a trial's lost worker, with its traceback (Ray 2.60)
_RAY_FAULT_LOGGERS = ("ray.tune.execution.experiment_state", "ray.train._internal.storage", "ray.tune.execution.tune_controller",
                      "ray.tune.tune", "ray._private.worker")  # (the last: "Experiment state snapshotting failed" at the end of a run)


def _quiet_environment_tracebacks() -> None:
    for name in _RAY_FAULT_LOGGERS:
        logger = logging.getLogger(name)
        if _ENVIRONMENT_FILTER not in logger.filters:
            logger.addFilter(_ENVIRONMENT_FILTER)



@dataclass
class RunSettings:
    """Infrastructure, kept apart from the sweepable config."""

    address: str | None = None
    storage: str | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    max_failures: int = 2
    report_interval: float = 2.0
    checkpoint_interval: float = 10.0
    stall_warning: float = 600.0  # driver side: seconds of silence before a running trial is called quiet (search/stall.py); 0: never
    stall_timeout: float = 0.0  # driver side: seconds of silence after which a running trial's process is ended and retried; 0: never
    max_concurrent: int = 0
    num_cpus: int | None = None  # local Ray only; default: all cores
    fuse: int = 1  # selection configs per Ray trial, trained as one stacked model (search/fusion.py); 1: off
    flush_denormal: bool = True  # trials flush float denormals on the CPU (awnn/arith.py); --keep-denormals: False
    extra: dict[str, Any] = field(default_factory=dict)

    def storage_path(self) -> str:
        if self.storage:
            return self.storage if "://" in self.storage else str(Path(self.storage).expanduser().resolve())
        return str((Path.cwd() / "awnn-results").resolve())


def stop_on_fault(first_fault: Callable[[], Any], on_stop: Callable[[Any], None]):
    """A Tune stopper that ends the whole run as soon as `first_fault()` names
    a trial its environment ended (its data cannot be read, a checkpoint
    cannot be written: search/record.py stop_reason), calling `on_stop(fault)`
    once before Tune stops the trials in flight (the driver closes their runs)."""
    tune_environment()
    from ray.tune.stopper import Stopper

    class StopOnFault(Stopper):
        def __init__(self, first_fault, on_stop):
            self.first_fault, self.on_stop, self.stopped = first_fault, on_stop, False

        def __getstate__(self):
            # Ray pickles the run config for Tuner.restore; we resume from MLflow, so the live hooks stay behind
            return {"stopped": self.stopped}

        def __call__(self, trial_id: str, result: dict) -> bool:
            return False

        def stop_all(self) -> bool:
            fault = self.first_fault() if self.first_fault else None
            if fault is not None and not self.stopped:
                self.stopped = True
                self.on_stop(fault)
            return fault is not None

    return StopOnFault(first_fault, on_stop)


# -------------------------------------------------------------------- Ray
def load_ray_tune() -> None:
    """Import Ray and Ray Tune with signals deferred (search/signals.py `deferred`): a driver's first import of them
    (~1.2 s) raises a signal that comes meanwhile once it has ended.  Ray's package registers its exit handler
    (`ray.shutdown`) early in its import; an interrupt that cut the import short left that handler to run at the
    process's exit on the half-made package: "Exception ignored in atexit callback ... module 'ray' has no attribute
    'actor'" under the command's one line (`make test-long`, a SIGINT 0.5 s after the start, 2026-12-07).  Comparison.run
    calls it before anything of Ray's is imported."""
    tune_environment()  # (read as Ray imports)
    with signals.deferred():
        import ray  # noqa: F401
        import ray.tune  # noqa: F401


def init_ray(settings: RunSettings, log: Callable[[str], None] = print, trials_at_once: int | None = None) -> None:
    """Join a cluster (`--address` / RAY_ADDRESS) or start a local Ray sized to this machine
    (a new one, also where `ray start` runs a cluster here: that one is joined with `--address auto`).
    `trials_at_once`: the most trials the command can run together (search/phase_plan.py, most_at_once); a
    local node then starts (and warms) no more worker processes ahead of its trials than that."""
    tune_environment()  # before Ray's import: some of it is read then
    import ray

    if ray.is_initialized():
        return
    address = settings.address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=True, logging_level="ERROR")
    if address:
        from .errors import TokenRefused, client_address_error, connect_error

        refused = client_address_error(address, from_env=not settings.address)
        if refused is not None:
            raise refused
        _check_reachable(address)
        _ray_speedups.driver_without_failure_handler()
        try:
            with _stderr_held() as held:  # (Ray's client writes a line a second while the cluster refuses its token)
                try:
                    context = ray.init(address=address, **kwargs)
                except Exception as e:  # noqa: BLE001 - one readable line for any connection failure
                    _cut_short_init()
                    error = connect_error(address, e, held.text())
                    held.drop = isinstance(error, TokenRefused)  # (Ray's retries said so 20 times: the line says it once)
                    raise error from None
                except BaseException:
                    _cut_short_init()
                    raise
        finally:
            signals.restore()  # ray.init replaced our SIGTERM handler (a SIGTERM meanwhile: signals.ray_sigterm)
        _ray_speedups.import_failures_in_one_line()  # a node's report of a trial that cannot import its code: one line
        _SESSION["dir"] = context.address_info.get("session_dir")
        _SESSION["gcs"] = context.address_info.get("gcs_address")
        _SESSION.pop("raylet_socket", None)  # a cluster's nodes come and go: its GCS is watched, not a node
        return
    node_files.prepare(log)  # a root folder the node's Unix sockets fit in (a long TMPDIR: a Slurm job's), before it starts
    node_files.prepare_token()  # and its token, where Ray cannot write ~/.ray (a container's HOME=/)
    node_limits.check_local(log)  # and the memory limits its processes inherit (`ulimit -v`)
    num_cpus = settings.num_cpus or os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if num_cpus > usable:
        log(f"warning: --num-cpus {num_cpus} is more than the {usable} CPUs this process may use: up to {num_cpus} trials "
            "share them, so each trial's time and device-hours grow (the report counts what trials took)")
    # Ray starts one idle worker process per CPU with the node.  Have them
    # import what a trial needs (torch, Ray Tune, the trainer) while the
    # driver still sets up MLflow and the Tuner, and let Tune's trial actors
    # use them: each slot's first trial then skips ~4 s of process start and
    # imports on a 2-core machine (private Ray API: search/_ray_speedups.py).
    prestart = min(num_cpus, trials_at_once) if trials_at_once else num_cpus  # Ray's own: one per CPU
    system_config = _ray_speedups.node_system_config() if _warm_workers(settings) else {}
    if system_config:
        warm_dir = scratch.make("awnn-warm-")
        atexit.register(scratch.remove, warm_dir)  # also when no sweep gets to wait_for_warm_workers
        os.environ["AWNN_WARM_DIR"] = warm_dir  # the node and its workers inherit the driver's environment
        os.environ.setdefault("PL_DISABLE_FORK", "1")  # likewise: see _ray_speedups.use_prestarted_workers
    # address "local": a new Ray of our own even where `ray start` left a cluster on this machine, which a bare
    # ray.init() would join (refusing num_cpus: "When connecting to an existing cluster, num_cpus and num_gpus must
    # not be provided"); that cluster is used when asked for: --address / RAY_ADDRESS (`auto` included)
    try:
        _ray_speedups.driver_without_failure_handler()
        # (no autoscaler, log monitor or dashboard head for a node of our own, `prestart` workers: private Ray API)
        with _ray_speedups.lean_local_node(prestart=prestart) as lean:
            context = ray.init(address="local", num_cpus=num_cpus, object_store_memory=node_limits.LOCAL_OBJECT_STORE, _system_config=system_config or None, **kwargs)
    except Exception as e:
        _cut_short_init()
        line = node_limits.start_failure(e)  # a start that failed under `ulimit -v`: say so (else Ray's own error)
        if line is None:
            raise
        from .errors import SearchError

        raise SearchError(line) from None
    except BaseException:
        _cut_short_init()
        raise
    finally:
        signals.restore()  # ray.init replaced our SIGTERM handler (a SIGTERM meanwhile: signals.ray_sigterm)
    _ray_speedups.import_failures_in_one_line()  # (`ulimit -v` with the probe off: a worker's import failure, one line)
    _SESSION["dir"] = context.address_info.get("session_dir")
    _SESSION["gcs"] = context.address_info.get("gcs_address")  # a node of our own: its GCS dies with us (or before us)
    _SESSION["raylet_socket"] = context.address_info.get("raylet_socket_name")  # (a local node only: local_node_gone)
    # its pid now, while it surely runs: looked up at the watch's first poll (2 s into a sweep), a raylet killed
    # before it was never found and its death never seen (the driver ran its sweeps on the actors left: exit 0)
    _SESSION["raylet_pid"] = _raylet_pid(_SESSION["raylet_socket"] or "")
    if system_config:
        _ray_speedups.use_prestarted_workers()
        _WARMING.update(dir=warm_dir, workers=prestart if lean else num_cpus)


def _cut_short_init() -> None:
    """`ray.init` ended by an exception (Ctrl-C, a signal, a failed start): Ray may be half set up in this process.  An
    interrupt that lands inside its core worker's constructor (Python code runs in it) leaves a half-made C++ worker
    whose teardown in Ray's exit handlers crashes the process (SIGSEGV, exit -11, after the command's last line):
    exit_process then ends the process without them.  (Ray's node processes share its fate: they get SIGKILL when it
    ends.)"""
    _SESSION["init_cut_short"] = True


_SESSION: dict[str, Any] = {}  # the Ray session init_ray started or joined: its folder on this machine (init_ray -> run_plan)
def ray_session_dir() -> str | None:
    """The session folder of the Ray this process started or joined (init_ray), where Ray Tune stages its state."""
    return _SESSION.get("dir")


def gcs_gone() -> bool:
    """True when the GCS of the Ray this process started or joined
    (init_ray) no longer accepts connections.

    A signal to the command's whole process group or cgroup (`timeout`, a
    job scheduler's SIGTERM, systemd) reaches a local node's processes too:
    the GCS exits at once while the driver handles the signal as Ctrl-C; a
    cluster's head node can die under a driver.  At exit, Ray Tune's and
    Ray's exit handlers then call the dead GCS and wait for it
    (`gcs_rpc_server_reconnect_timeout_s`, 60 s) before Ray aborts the
    process: exit 1 instead of 130 and an alarming "Failed to connect to
    GCS" line (reproduced with `timeout`).  search/cli.py's `entry` exits
    without those handlers when this is true."""
    address = _SESSION.get("gcs")
    if not address:
        return False
    import socket

    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
    except OSError:  # refused or no answer: nothing listens there any more
        return True
    except ValueError:  # an address of another form: assume it lives
        return False
    return False


def _raylet_pid(socket_name: str) -> int | None:
    """The pid of the raylet serving `socket_name` (its command line names
    it), found in /proc; None where there is no /proc or no such process."""
    proc = "/proc"
    if not socket_name or not os.path.isdir(proc):
        return None
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and os.path.basename(args[0]) == b"raylet" and f"--raylet_socket_name={socket_name}".encode() in args:
            return int(entry)
    return None


def local_node_gone() -> str | None:
    """Why the node of the local Ray this process started (init_ray without
    --address) is gone, or None while it lives (or it cannot be told).

    Its raylet runs the node: killed (an OOM killer picks it as readily as a
    trial) or crashed, its trials' actors die, Ray Tune retries them and
    waits for a node that can hold them, and a local Ray gets none: the
    driver hung without end, printing nothing (reproduced: SIGKILL to the
    raylet mid-sweep).  Its pid is found as the node starts (init_ray; where
    that found none, here), from the socket its command line names (public in ray.init's address_info), then polled; no call to
    Ray and no connection to the raylet."""
    socket_name = _SESSION.get("raylet_socket")
    if not socket_name:
        return None
    pid = _SESSION.get("raylet_pid")
    if pid is None:
        pid = _SESSION["raylet_pid"] = _raylet_pid(socket_name) or 0
    if not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"the local Ray's node ended: its raylet (pid {pid}) exited (killed, e.g. by an out-of-memory killer, or crashed)"
    except PermissionError:  # alive, another user's (a pid reused): nothing to tell
        return None
    with contextlib.suppress(OSError):  # a zombie (exited, not yet reaped by its parent) is gone too
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[-1].split()[0] == "Z":
                return f"the local Ray's node ended: its raylet (pid {pid}) exited (killed, e.g. by an out-of-memory killer, or crashed)"
    return None


def gcs_lost_after_s() -> float:
    """How long the GCS may not answer before `watch_cluster` stops the
    driver: AWNN_GCS_LOST_S, else 60% of Ray's own wait for a GCS that went
    away (`RAY_gcs_rpc_server_reconnect_timeout_s`, 60 s; a GCS with fault
    tolerance that restarts within it is waited for), so that the driver
    ends on its own terms before Ray's core worker aborts it."""
    value = os.environ.get("AWNN_GCS_LOST_S")
    if value:
        return float(value)
    return 0.6 * float(os.environ.get("RAY_gcs_rpc_server_reconnect_timeout_s", "60"))


def _amount(x: float) -> str:
    return f"{x:g}"


def trial_fit(settings: RunSettings) -> tuple[bool, str]:
    """Whether one node of the Ray this process started or joined can hold a
    trial: Tune asks for its CPUs and GPUs as one placement-group bundle,
    which Ray places on a single node.  Returns (fits, what the nodes have).

    Without this, a trial the cluster can never place waits for ever: Tune's
    own warning about it is a log line at WARNING (after 60 s), below the
    ERROR level the driver gives Ray's logs, and the progress line reads
    "0 running" (`awnn compare --gpus-per-trial 1` on a CPU-only machine)."""
    import ray

    cpu, gpu = settings.cpus_per_trial, settings.gpus_per_trial
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    fits = any(r.get("CPU", 0) >= cpu and r.get("GPU", 0) >= gpu for r in nodes)
    have = sorted({(r.get("CPU", 0), r.get("GPU", 0)) for r in nodes}, reverse=True)
    shown = "; ".join(f"{_amount(c)} CPU{'s' * (c != 1)} and {_amount(g)} GPU{'s' * (g != 1)}" for c, g in have[:4])
    return fits, (f"{len(nodes)} node{'s' * (len(nodes) != 1)} with " + (shown or "nothing")
                  + ("; ..." if len(have) > 4 else ""))


def check_trial_fits(settings: RunSettings, log: Callable[[str], None] = print) -> None:
    """Stop at once (a local Ray) or say so (a cluster) when no node can hold a trial.

    A local Ray's nodes are what this command started: nothing will join,
    so asking more than they have is an OptionError (exit 2, before any
    MLflow run).  A cluster's nodes can join later (an autoscaler,
    `ray start --address`): the driver says what is missing and waits, as
    Ray does."""
    fits, have = trial_fit(settings)
    if fits:
        return
    ask = (f"a trial needs {_amount(settings.cpus_per_trial)} CPU{'s' * (settings.cpus_per_trial != 1)} and "
           f"{_amount(settings.gpus_per_trial)} GPU{'s' * (settings.gpus_per_trial != 1)} on one node "
           f"(--cpus-per-trial, --gpus-per-trial)")
    if not (settings.address or os.environ.get("RAY_ADDRESS")):
        from .errors import OptionError

        hint = " (torch sees no CUDA device here)" if settings.gpus_per_trial > 0 and not _cuda_seen() else ""
        raise OptionError(f"{ask}, but the local Ray has {have}{hint}; ask for less, give --num-cpus, "
                          "or join a cluster that has them with --address")
    log(f"warning: {ask}, but the cluster has {have}: trials wait until a node that can hold one joins "
        "(an autoscaler, `ray start --address`); Ctrl-C stops, --resume continues")


def _cuda_seen() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - only a hint
        return False


def watch_cluster(on_lost: Callable[[str], None], interval: float = 2.0) -> Callable[[], None]:
    """Check the GCS every `interval` s on a daemon thread; once it has not
    answered for `gcs_lost_after_s()`, call `on_lost(message)` there (once).
    Returns the function that stops the watch.

    Without it, a driver whose cluster lost its head (or whose local GCS
    died alone) hung 60 s, then Ray's core worker aborted it: exit 1, Ray's
    "Failed to connect to GCS within 60 seconds", the trial runs left
    RUNNING.  Tune's loop calls the GCS from the main thread inside C
    (`update_avail_resources`), where no interrupt reaches it: `on_lost`
    (Comparison.cluster_lost) does the closing from this thread."""
    import threading

    if not _SESSION.get("gcs"):
        return lambda: None
    stop = threading.Event()
    limit = gcs_lost_after_s()

    def watch() -> None:
        last_answer = time.monotonic()
        while not stop.wait(interval):
            if not gcs_gone():
                last_answer = time.monotonic()
                node = local_node_gone()
                if node is not None:  # no node will ever join a local Ray: nothing can run
                    on_lost(f"{node}; no trial can run: stopping; run the same command with --resume")
                    return
            elif time.monotonic() - last_answer >= limit:
                on_lost(f"the Ray cluster's GCS at {_SESSION['gcs']} has not answered for {limit:.0f} s (its head node died, or the network "
                        "to it): stopping; run the same command with --resume once the cluster is back")
                return

    threading.Thread(target=watch, name="awnn-gcs-watch", daemon=True).start()
    return stop.set


EXIT_GRACE_S = 15.0  # the interpreter's exit handlers' time (Ray's shutdown takes ~3 s) before exit_process ends it anyway


def exit_process(code: int) -> None:
    """End the `awnn` command's process with `code`, in bounded time.

    With Ray started or joined, the interpreter's exit handlers include Ray
    Tune's and Ray's, which call the GCS; where it is gone (the command's
    process group got the signal, a cluster's head died) each call waits
    60 s and Ray then aborts the process with exit 1.  So: a local node whose
    GCS is already gone, or a `ray.init` cut short (`_cut_short_init`), ends the process at once;
    otherwise the handlers run as usual, but a watchdog ends the process
    with `code` after EXIT_GRACE_S (the race where the GCS dies while they
    run), and the process ends without the interpreter's finalization
    (`_exit_handlers_then_exit`).  Everything of ours is written before this: MLflow's runs are
    closed and the report is out when `main` returns."""
    import sys
    import threading

    if gcs_gone() or _SESSION.get("init_cut_short"):
        exit_now(code)
    watchdog = threading.Timer(EXIT_GRACE_S, exit_now, (code,))
    watchdog.daemon = True  # (daemon threads still run while the exit handlers do)
    watchdog.start()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        # here rather than in Ray's exit handler, which first sleeps 0.5 s "so that log messages finish printing"
        # (a driver that runs its own node takes none: log_to_driver is off); the same shutdown otherwise, and an
        # error in it is left to that handler, which tries again and prints it (0.55 s of each command's exit, 2026-11-28)
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001
            pass
    _exit_handlers_then_exit(code)


FINALIZE_SWITCH = "AWNN_EXIT_FINALIZE"  # =1: the interpreter's own exit, its finalization included (the reference path)


def _exit_handlers_then_exit(code: int) -> None:
    """The interpreter's exit without its finalization: what it does first, in its order (non-daemon threads joined,
    after the threading module's own exit hooks, which stop idle executors; then every exit handler: Ray's, MLflow's,
    logging's, tempfile's, search/signals.py's last), then `exit_now`.

    The finalization that `sys.exit` would run next (modules torn down, the heap freed) runs while Ray's C++ threads
    (its GCS client's io thread, gRPC's, arrow's pools: ~12 after `ray.shutdown()`) are still there, and one that
    calls into Python then aborts the process: `make test-long` saw exit -6, "Fatal Python error: ... the GIL is
    released ... Python runtime state: finalizing", after a comparison's report (docs/cluster.md).  It also took
    0.28-0.33 s per command with search/heap.py's freeze on (0.07 s without it; probe of a process that imported
    torch, Ray and MLflow and ran a local Ray, 3 runs each).  Our streams are flushed and our files closed before
    this (`main` has returned).  `AWNN_EXIT_FINALIZE=1`, or a Python without `threading._shutdown` and
    `atexit._run_exitfuncs` (CPython's, 3.10 to 3.13), takes `sys.exit` as before."""
    import sys
    import threading

    if os.environ.get(FINALIZE_SWITCH, "0") == "1" or not (hasattr(threading, "_shutdown") and hasattr(atexit, "_run_exitfuncs")):
        sys.exit(code)
    threading._shutdown()
    atexit._run_exitfuncs()
    exit_now(code)


def exit_now(code: int) -> None:
    """End the process with `code` without the interpreter's exit handlers
    (see `gcs_gone`), after the cleanup of ours they would have run
    and with every stream flushed."""
    import logging
    import sys

    from .lease import release_comparisons

    warm_dir = _WARMING.get("dir") or os.environ.get("AWNN_WARM_DIR")
    if warm_dir and warm_dir.startswith(tempfile.gettempdir()):
        scratch.remove(warm_dir)
    release_comparisons()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, a stream closed: nothing more to write
            pass
    os._exit(code)


_WARMING: dict[str, Any] = {}  # the local node's workers still warming up (init_ray -> run_plan)


def wait_for_warm_workers(timeout: float = 60.0) -> list[int]:
    """Wait (at most `timeout` s) until the local node's prestarted workers
    have imported what a trial needs (search/warm.py marks each); returns
    their process ids ([] when init_ray did not warm any; not those whose imports
    failed, `<pid>.failed`: their trials fail as they start and stop the comparison).  Starting Tune
    earlier gains nothing: Ray would start fresh processes for the trial
    actors next to the busy ones, and all of them would share the CPUs.
    The bound only matters where a worker never gets there (it died): the
    warm-up ends ~3 s after ray.init returns on a 2-core machine, but 20 s (the bound
    until 2026-12-02) ran out on a loaded one, whose trials then ran in cold
    processes beside the warming ones."""
    if not _WARMING:
        return []
    warm_dir, n = _WARMING.pop("dir"), _WARMING.pop("workers")
    deadline = time.monotonic() + timeout
    try:
        while len(os.listdir(warm_dir)) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return sorted(int(f) for f in os.listdir(warm_dir) if f.isdigit())
    finally:
        scratch.remove(warm_dir)


def _warm_workers(settings: RunSettings) -> bool:
    """Warm the local Ray's prestarted workers?  They are one per CPU: worth
    it when each trial takes one CPU and no GPU (the default), so that every
    warm worker becomes a trial slot; AWNN_WARM_WORKERS=0/1 overrides."""
    flag = os.environ.get("AWNN_WARM_WORKERS", "")
    if flag in ("0", "1"):
        return flag == "1"
    return settings.cpus_per_trial == 1 and settings.gpus_per_trial == 0


class _Held:
    """What `_stderr_held` holds: `text()` so far; `drop` True: not written back."""

    def __init__(self, file) -> None:
        self.file, self.drop = file, False

    def text(self) -> str:
        if self.file is None:
            return ""
        self.file.flush()
        self.file.seek(0)
        return self.file.read().decode(errors="replace")


@contextlib.contextmanager
def _stderr_held() -> Iterator[_Held]:
    """While it is open, what this process writes to its stderr (fd 2: Python's and Ray's C++ logging alike) goes to
    a temporary file; at its end fd 2 is given back and the text written to it, unless the holder's `drop` was set.
    For joining a cluster: while the cluster's GCS refuses the driver's token, Ray's client writes a warning a second
    for ~20 s ("Failed to get cluster ID from GCS server: Unauthenticated ... InvalidAuthToken"), then raises only
    "Failed to connect to Ray cluster"; the held text tells the two apart (search/errors.py, connect_error).  Where no
    temporary file can be made, nothing is held."""

    try:
        file = tempfile.TemporaryFile()
        saved = os.dup(2)
    except OSError:
        yield _Held(None)
        return
    held = _Held(file)
    try:
        sys.stderr.flush()
        os.dup2(file.fileno(), 2)
        yield held
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        text = "" if held.drop else held.text()
        file.close()
        if text:
            sys.stderr.write(text)
            sys.stderr.flush()


# An HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server (a Ray GCS) answers with a SETTINGS
# frame of its own (its 9-byte header's type byte 0x4) at once, ~1 ms on a 2-core machine
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
GCS_ANSWER_S = 10.0  # how long a GCS may take to answer that preface (a real one: milliseconds)


def _check_reachable(address: str, timeout: float = 5.0, answer_timeout: float | None = None) -> None:
    """Fail in seconds when nothing listens at a `host:port` address, or what listens there is no Ray GCS: `ray.init`
    itself keeps retrying an unreachable GCS for minutes, and one that answers in another protocol (the dashboard's
    port 8265, an MLflow server, anything given the wrong port) for more than 5 minutes, a warning every 30 s (found
    2026-12-07).  The GCS speaks gRPC (HTTP/2): it answers an HTTP/2 preface with a SETTINGS frame.  Not probed where
    Ray's TLS is on (RAY_USE_TLS: the GCS expects a TLS handshake first)."""
    import socket

    from .errors import connect_error

    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if address == "auto" or not sep or not port.isdigit():
        return  # "auto" or an unusual form: left to ray.init
    host = host.strip("[]") or "127.0.0.1"
    try:
        conn = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as e:
        raise connect_error(address, ConnectionError(f"nothing answers at {host}:{port}: {e.strerror or type(e).__name__}")) from None
    wait = GCS_ANSWER_S if answer_timeout is None else answer_timeout
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true"):
            return
        reply = b""
        try:
            conn.settimeout(wait)
            conn.sendall(_HTTP2_PREFACE)
            while len(reply) < 9:
                chunk = conn.recv(9 - len(reply))
                if not chunk:
                    break
                reply += chunk
        except socket.timeout:
            what = f"accepts connections but did not answer as a Ray GCS within {wait:.0f} s"
        except OSError as e:
            what = f"ended the connection ({e.strerror or type(e).__name__}) instead of answering as a Ray GCS"
        else:
            if len(reply) == 9 and reply[3] == 0x4:
                return  # an HTTP/2 server's SETTINGS: gRPC, as a GCS
            what = ("closed the connection instead of answering as a Ray GCS" if not reply else
                    "is an HTTP server (a web page or an API: the dashboard's port, 8265?), not a Ray GCS"
                    if reply.startswith(b"HTTP/") or reply.lstrip().startswith(b"<") else
                    "answers in another protocol than a Ray GCS's (gRPC)")
    raise connect_error(address, ConnectionError(
        f"what listens at {host}:{port} {what}: give the cluster head's GCS address (host:6379, as `ray start --head` "
        "prints it)"))


# ------------------------------------------------------------------ plan
def trial_settings(settings: RunSettings) -> dict[str, Any]:
    """The part of the settings every trial needs (travels in its config)."""
    from .code_identity import source_files

    from .shared_storage import mark

    return {**{k: v for k, v in asdict(settings).items() if k in ("cpus_per_trial", "gpus_per_trial", "report_interval", "checkpoint_interval", "flush_denormal")},
            "code_files": source_files(),  # (each trial runs the driver's code: search/code_identity.py)
            "storage_marker": mark(settings.storage_path())}  # (and sees its --storage: written here, search/shared_storage.py)


def run_plan(searcher, num_samples: int, settings: RunSettings, experiment: str, callbacks: list, scheduler=None, stop=None) -> None:
    """Run every trial `searcher` suggests (at most `num_samples`) on Ray Tune.

    One Tuner for a whole comparison: its actors are reused from trial to
    trial and from phase to phase, so worker start-up (importing torch) is
    paid once per slot, not once per phase.  Results reach the caller
    through `callbacks` (the driver-side tracker) and the searcher."""
    tune_environment()
    from ray import tune

    from . import heap

    heap.settle()  # (the command's own process: the import-time heap leaves the collector's walks)
    resources = {"cpu": settings.cpus_per_trial, "gpu": settings.gpus_per_trial}
    # idle actors are kept from phase to phase, and every slot's actor starts
    # at once (Tune keeps one trial pending at a time for a custom searcher):
    # private Ray API, search/_ray_speedups.py
    with _ray_speedups.keep_idle_actors(), _ray_speedups.pending_trials(concurrent_slots(settings)):
        tuner = tune.Tuner(
            tune.with_resources(trainable, resources),
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                scheduler=scheduler,
                num_samples=num_samples,
                reuse_actors=True,
                max_concurrent_trials=settings.max_concurrent or None,
                trial_name_creator=lambda t: t.config["spec"]["strategy"] + "-" + t.config["spec"]["key"],
                trial_dirname_creator=lambda t: t.config["spec"]["strategy"] + "-" + t.config["spec"]["key"],
            ),
            run_config=tune.RunConfig(
                name=experiment,
                stop=stop,
                storage_path=settings.storage_path(),
                verbose=0,
                callbacks=callbacks,
                failure_config=tune.FailureConfig(max_failures=settings.max_failures),
                checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                progress_reporter=_make_silent_reporter(),
            ),
        )
        try:
            tuner.fit()
        finally:
            remove_empty_trial_folders(settings.storage_path(), experiment)
        remove_driver_staging(_SESSION.get("dir"), experiment)


def remove_driver_staging(session_dir: str | None, experiment: str) -> int:
    """Remove Tune's driver-side staging copy of `experiment` from the Ray
    session folder on this machine (`<session>/artifacts/<time>/<experiment>`)
    once the Tuner has finished; returns how many folders were removed.

    Tune writes its experiment state there (a whole comparison's trials: ~15 MB
    for `make demo`) and syncs it to the storage path, where it stays.  Ray
    never deletes session folders, so every comparison left its copy in
    /tmp/ray (873 MB after a day of test runs; /tmp is RAM on some machines).
    Called after a normal return only: a run that fails keeps it for a look.
    Only this experiment's folder goes: a cluster's session (`--address`) is
    shared with other drivers, and Ray's own logs stay."""
    if not session_dir:
        return 0
    artifacts = Path(session_dir) / "artifacts"
    removed = 0
    for staged in artifacts.glob(f"*/{glob.escape(experiment)}") if artifacts.is_dir() else ():
        shutil.rmtree(staged, ignore_errors=True)
        removed += not staged.exists()
        try:
            staged.parent.rmdir()  # its Tuner's time folder, when nothing else is in it
        except OSError:
            pass
    return removed


def remove_empty_trial_folders(storage: str, experiment: str) -> int:
    """Remove the trial folders Tune left empty in `<storage>/<experiment>/`.

    Tune's own result files (result.json, progress.csv) are off
    (TUNE_DISABLE_AUTO_CALLBACK_LOGGERS, tune_environment): MLflow is the
    record of every result, and --resume reads it from there, not through
    Tuner.restore or ExperimentAnalysis.  What stays in a trial folder is a
    checkpoint: an interrupted trial's training state (trainer.pt, for
    --resume) or a re-training run's kept model (model.pt, also logged to
    MLflow).  A folder with nothing in it is removed (local storage only).
    Returns how many were removed."""
    if "://" in storage:
        return 0
    root = Path(storage) / experiment
    removed = 0
    for d in root.iterdir() if root.is_dir() else ():
        try:
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
                removed += 1
        except OSError:  # another process wrote there meanwhile, or it is gone: leave it
            pass
    return removed


def concurrent_slots(settings: RunSettings) -> int:
    """How many trials the cluster can run at once (at least 1)."""
    import ray

    total = ray.cluster_resources()
    slots = []
    if settings.cpus_per_trial > 0:
        slots.append(int(total.get("CPU", 0) // settings.cpus_per_trial))
    if settings.gpus_per_trial > 0:
        slots.append(int(total.get("GPU", 0) // settings.gpus_per_trial))
    n = min(slots) if slots else 1
    if settings.max_concurrent:
        n = min(n, settings.max_concurrent)
    return max(1, n)


def _make_silent_reporter():
    from ray.tune import ProgressReporter

    class Silent(ProgressReporter):
        def should_report(self, trials, done=False):
            return False

        def report(self, trials, done, *sys_info):
            pass

    return Silent()
