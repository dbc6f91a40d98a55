"""Every tweak of Ray's private API, in one place, behind one switch.

Each of these buys sweep start-up or phase-change time on small machines
(measured in docs/design.md, "Ray speed-ups"); none changes what a trial computes or
what MLflow records.  They are applied only

* when the switch is on: `AWNN_RAY_SPEEDUPS` unset or `1` (`0` turns every
  one of them off: plain Ray Tune behaviour), and
* when the installed Ray is one they were checked against (`TESTED_RAY`):
  on another version nothing is patched, with one line on stderr, and
* when each patch target still has the shape it was written for (a missing
  target skips that patch; `tests/search/test_ray_speedups.py` fails when a target
  moves, so an upgrade cannot silently turn them into no-ops).

What is changed:

1. `node_system_config`: a local Ray node's `_system_config` (a private
   argument of `ray.init`): `preload_python_modules` makes the node's
   prestarted workers import torch, Ray Tune and the trainer
   (`search/warm.py`) while the driver sets up MLflow; the idle-worker
   killer's threshold is raised to 60 s (Ray counted a preloading worker as
   idle from registration and sometimes killed it the moment it was ready).
2. `use_prestarted_workers`: drops `PL_DISABLE_FORK` from Tune's actor
   environment (`ray.tune.execution.class_cache.DEFAULT_ENV_VARS`) when the
   node was started with it, so Tune's actors may use the warm workers
   (Ray hands a prestarted worker only to an actor with an empty runtime
   environment).
3. `keep_idle_actors`: swaps Tune's actor cache
   (`ray.tune.execution.tune_controller._ObjectCache`) for one that keeps
   idle trial actors until the search ends, so a phase change (selection ->
   re-training) reuses them instead of starting processes; restored when
   the Tune run ends.  An idle actor is pinged before Tune hands it a
   trial (`__ray_ready__`, ~1 ms; at most once a second per actor): one
   that does not answer within `PING_S` (its node died, its worker was
   killed) is let go instead, at Tune's next step.  Without the ping, a
   trial given an actor on a node that died while the actor was idle
   failed at once, without its retries: Tune fails a trial whose reused
   actor is gone while the trial is PENDING (the actor's reset fails).  The
   cache finds Tune's actor manager through the frame that constructs it
   (Tune's controller): the one private lookup of this patch beyond the
   class it replaces.
4. `pending_trials`: sets `TUNE_MAX_PENDING_TRIALS_PG` to the number of
   concurrent slots for the run (Tune's default for a custom searcher is 1,
   which starts the slots' actors one after another); restored afterwards,
   and a value the user set is kept.

5. `lean_local_node`: while `ray.init` starts a local node of the
   command's own, `ray._private.node.Node.start_monitor`,
   `start_log_monitor` and `start_api_server` do nothing: the autoscaler
   monitor of a one-node Ray that nothing scales, the log monitor that
   streams the workers' output to a driver that does not take it
   (`log_to_driver=False`; the workers' logs stay in the session folder),
   and the dashboard's head process, which `include_dashboard=False` still
   starts with one module (usage statistics) and which `ray.init` waits for
   in 0.1 s polls until it has written its address.  Three Python processes
   fewer per start: `ray.init` 2.4-2.5 s -> 1.7-1.8 s and `ray.shutdown`
   ~1.4 s -> ~0.3 s on a 2-core machine (`ray.init` offers no switch for
   them: RayParams `no_monitor` and `include_log_monitor` are set inside it,
   and the dashboard head has none).  Without it the node has no dashboard
   URL (`ray.init(...).dashboard_url` is None) and no state API, which
   nothing here uses.  Restored once `ray.init` returns; a cluster that
   `ray start` runs keeps all three.  Given `prestart=N`, the same context
   also lowers the raylet's `--num_prestart_python_workers` (always the
   node's CPU count, `ray._private.services.start_raylet`) to N: a sweep
   that can never run more than N trials at once warms N workers, not one
   per CPU (each warm worker holds ~370 MB of private memory and took
   ~2.5 CPU-s to import torch and Ray Tune; a one-config sweep on 2 cores
   paid for one it never used).  Ray starts more workers when asked for
   them, so a lower N costs only their warm-up.

6. `driver_without_failure_handler`: the driver's core worker starts
   without Ray's C++ failure-signal handler
   (`ray._private.ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER`, read
   when `ray.init` creates it; set in the driver's process only, so the
   node's processes and trial workers keep theirs).  That handler takes
   SIGTERM from the moment the core worker starts until `init_ray` installs
   the CLI's handler again: a SIGTERM in that window dumped a C++ stack and
   aborted the driver (exit -6, its runs left open; a probe at 3.7 s after
   the start).  Not a speed-up: a fix that needs the same private access.
7. `import_failures_in_one_line`: the driver prints what a node's raylet
   reports to it (`ray._private.worker.print_to_stdstream`, called by
   `listen_error_messages` with `pid="raylet"`) as before, except a report
   of a worker that could not import a trial's code (a module missing on
   that node, another version of the project there, a library it could not
   map under `ulimit -v`: tracking.contract.environment_failure, Ray's
   "failed to import on the worker" included): one line per distinct
   failure, repeats left out.  Before: its whole traceback, twice, at every
   attempt (588 lines for a smoke sweep on a cluster whose only trial node
   lacked a module), above the comparison's own one line.  The failures are
   kept (`worker_import_failures`): a trial whose worker is lost meanwhile
   stops the comparison (search/sweep.py), where Tune's retry otherwise
   waited for a worker that never started (`ulimit -v` 3000000 with the
   limit probe off: 5 min of silence until stopped).  Not a speed-up
   either.  Installed after `ray.init` (the thread looks the function up at
   each message); the traceback stays in the worker's log on its node (and,
   for a placeholder actor, in the trial's `error.txt` under --storage).

One read, no patch: `trial_actor` gives Tune's handle to the Ray actor that
runs a trial (`trial.temporary_state.ray_actor`), so that `--stall-timeout`
can end a silent trial with `ray.kill` (search/stall.py): also one that has
not reported its process yet, and one whose process is stuck in an
uninterruptible read (the actor is marked dead at once).  Off, or on another
Ray, the trial's process is ended by the pid it reported.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import sys
from typing import Any, Iterator

__all__ = ["TESTED_RAY", "SWITCH", "enabled", "node_system_config", "use_prestarted_workers", "keep_idle_actors", "pending_trials",
           "lean_local_node", "driver_without_failure_handler", "import_failures_in_one_line",
           "worker_import_failures", "trial_actor"]

TESTED_RAY = ("2.60.",)  # version prefixes these patches were written and tested against
SWITCH = "AWNN_RAY_SPEEDUPS"
_warned: list[str] = []


def enabled() -> bool:
    """The switch is on and the installed Ray is a tested one."""
    if os.environ.get(SWITCH, "1") == "0":
        return False
    import ray

    version = getattr(ray, "__version__", "")
    if not version.startswith(TESTED_RAY):
        if version not in _warned:
            _warned.append(version)
            print(f"awnn: Ray {version} is not one the Ray speed-ups were tested with ({', '.join(p + 'x' for p in TESTED_RAY)}): "
                  f"running plain Ray Tune (set {SWITCH}=0 to silence this)", file=sys.stderr)
        return False
    return True


def node_system_config() -> dict[str, Any]:
    """`_system_config` for a local node whose prestarted workers import what
    a trial needs (search/warm.py); {} when the speed-ups are off."""
    if not enabled():
        return {}
    return {
        "preload_python_modules": ["search.warm"],
        "idle_worker_killing_time_threshold_ms": 60_000,
    }


def use_prestarted_workers() -> bool:
    """Let Tune's trial actors run in the node's prestarted workers (see the
    module docstring, 2).  Returns whether Tune's environment was changed."""
    if not enabled():
        return False
    try:
        from ray.tune.execution import class_cache
    except ImportError:  # pragma: no cover - another Ray layout
        return False
    env = getattr(class_cache, "DEFAULT_ENV_VARS", None)
    if isinstance(env, dict) and env.get("PL_DISABLE_FORK") == os.environ.get("PL_DISABLE_FORK") == "1":
        env.pop("PL_DISABLE_FORK")
        return True
    return False


PRESTART_FLAG = "--num_prestart_python_workers="  # the raylet's argument (ray._private.services.start_raylet)


@contextlib.contextmanager
def lean_local_node(prestart: int | None = None) -> Iterator[bool]:
    """Around `ray.init` of a local node: no autoscaler monitor, no log
    monitor and no dashboard head, and at most `prestart` prestarted workers
    (see the module docstring, 5).  Yields whether it patched."""
    if not enabled():
        yield False
        return
    try:
        from ray._private import services
        from ray._private.node import Node
    except ImportError:  # pragma: no cover - another Ray layout
        yield False
        return
    targets = ("start_monitor", "start_log_monitor", "start_api_server")
    names = [n for n in targets if callable(getattr(Node, n, None))]
    start_process = getattr(services, "start_ray_process", None)
    if len(names) != len(targets) or not callable(start_process):  # a target moved: plain Ray (test_ray_speedups.py fails on it)
        yield False
        return
    saved = {n: Node.__dict__.get(n) for n in names}

    def skipped(self, *args: Any, **kwargs: Any) -> None:
        return None

    def start_ray_process(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if prestart is not None and process_type == "raylet":
            command = [_fewer_prestarted(arg, prestart) for arg in command]
        return start_process(command, process_type, *args, **kwargs)
    try:
        for n in names:
            setattr(Node, n, skipped)
        services.start_ray_process = start_ray_process
        yield True
    finally:
        for n, f in saved.items():
            setattr(Node, n, f)
        services.start_ray_process = start_process


def _fewer_prestarted(arg: str, most: int) -> str:
    """The raylet's prestart argument lowered to `most` (at least one); any other argument as it is."""
    if not arg.startswith(PRESTART_FLAG):
        return arg
    given = arg[len(PRESTART_FLAG):]
    return f"{PRESTART_FLAG}{min(int(given), max(1, most))}" if given.isdigit() else arg


def driver_without_failure_handler() -> bool:
    """Before this process's `ray.init`: its core worker installs no C++ failure-signal handler (see the module
    docstring, 6).  Returns whether it was set."""
    if not enabled():
        return False
    try:
        from ray._private import ray_constants
    except ImportError:  # pragma: no cover - another Ray layout
        return False
    if not isinstance(getattr(ray_constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", None), bool):  # a target moved
        return False
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    return True


def import_failures_in_one_line(out=None) -> bool:
    """After this process's `ray.init`: a raylet's report of a worker that could not import a trial's code is printed as
    one line per distinct failure (see the module docstring, 7).  `out`: where those lines go (default: sys.stdout at
    each print, where Ray prints the report).  Returns whether it is installed."""
    if not enabled():
        return False
    try:
        from ray._private import worker
    except ImportError:  # pragma: no cover - another Ray layout
        return False
    original = getattr(worker, "print_to_stdstream", None)
    if original is None or list(inspect.signature(original).parameters)[:2] != ["data", "ignore_prefix"]:  # a target moved
        return False
    if getattr(original, "_awnn_original", None) is not None:
        original = original._awnn_original
    said = _IMPORT_FAILURES

    def print_to_stdstream(data, ignore_prefix, *args, **kwargs):
        if isinstance(data, dict) and data.get("pid") == "raylet":
            from tracking.contract import environment_failure

            found = environment_failure(None, "\n".join(str(line) for line in data.get("lines") or ()))
            if found is not None:
                if found not in said:
                    said.append(found)
                    print(f"(raylet) a Ray worker could not import a trial's code: {found} (its traceback: the worker's "
                          "log in that node's Ray session folder, logs/; repeats not shown)", file=out or sys.stdout, flush=True)
                return None
        return original(data, ignore_prefix, *args, **kwargs)

    print_to_stdstream._awnn_original = original
    worker.print_to_stdstream = print_to_stdstream
    return True


_IMPORT_FAILURES: list[str] = []  # the distinct failures import_failures_in_one_line has printed, in order


def worker_import_failures() -> list[str]:
    """The import failures of Ray workers that a node reported to this driver so far (import_failures_in_one_line; none
    while it is not installed): a worker that cannot start or load a trial's code there.  A trial whose worker was lost
    meanwhile is retried on workers that fail the same way: search/sweep.py stops the comparison on it."""
    return list(_IMPORT_FAILURES)


PING_S = 2.0  # an idle actor that does not answer a ping within this is let go (keep_idle_actors)
_PING_AGAIN_S = 1.0  # an actor that answered is not pinged again for this long


def _keep_idle_cache_class(base: type) -> type:
    class KeepIdleActors(base):  # type: ignore[misc, valid-type]
        awnn_keeps_idle = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._awnn_owner = sys._getframe(1).f_locals.get("self")  # Tune's controller, constructing its actor cache
            self._awnn_answered: dict = {}  # actor -> when it last answered
            self._awnn_gone: list = []

        def cache_object(self, key, obj) -> bool:
            self._cached_objects[key].append(obj)
            self._num_cached_objects += 1
            return True

        def has_cached_object(self, key) -> bool:
            objs = self._cached_objects[key]
            while objs and not self._awnn_answers(objs[0]):  # (the one pop_cached_object hands out)
                self._awnn_gone.append(objs.pop(0))
                self._num_cached_objects -= 1
            return bool(objs)

        def flush_cached_objects(self, force_all: bool = False):
            while self._awnn_gone:  # Tune removes what this yields (kills it, stops tracking it)
                yield self._awnn_gone.pop(0)
            if not force_all:
                return
            yield from super().flush_cached_objects(force_all=True)

        def _awnn_answers(self, tracked) -> bool:
            import time

            now = time.monotonic()
            if now - self._awnn_answered.get(tracked, -_PING_AGAIN_S) < _PING_AGAIN_S:
                return True
            live = getattr(getattr(self._awnn_owner, "_actor_manager", None), "_live_actors_to_ray_actors_resources", None)
            if live is None:  # not built by Tune's controller, or another layout: no ping (test_ray_speedups fails first)
                return True
            entry = live.get(tracked)
            if entry is None:  # the manager no longer counts it alive
                return False
            import ray

            ref = entry[0].__ray_ready__.remote()
            ready, _ = ray.wait([ref], timeout=PING_S)
            if not ready:
                return False
            try:
                ray.get(ref)
            except Exception:  # noqa: BLE001 - ActorDiedError, ActorUnavailableError, ...: not usable
                return False
            self._awnn_answered[tracked] = time.monotonic()
            return True

    return KeepIdleActors


@contextlib.contextmanager
def keep_idle_actors() -> Iterator[bool]:
    """While the block runs, Tune keeps every idle trial actor until the
    search ends (module docstring, 3); yields whether the patch is active."""
    if not enabled():
        yield False
        return
    try:
        from ray.tune.execution import tune_controller
        from ray.tune.utils.object_cache import _ObjectCache
    except ImportError:  # pragma: no cover - another Ray layout: Tune's default behaviour
        yield False
        return
    base = getattr(tune_controller, "_ObjectCache", None)
    if base is None or getattr(base, "awnn_keeps_idle", False) or not all(
            hasattr(_ObjectCache, m) for m in ("cache_object", "flush_cached_objects")):
        yield bool(base is not None and getattr(base, "awnn_keeps_idle", False))
        return
    tune_controller._ObjectCache = _keep_idle_cache_class(base)
    try:
        yield True
    finally:
        tune_controller._ObjectCache = base


@contextlib.contextmanager
def pending_trials(slots: int) -> Iterator[bool]:
    """While the block runs, Tune may keep `slots` trials pending (module
    docstring, 4); a value the user set wins.  Yields whether it was set."""
    if not enabled() or os.environ.get("TUNE_MAX_PENDING_TRIALS_PG") is not None:
        yield False
        return
    os.environ["TUNE_MAX_PENDING_TRIALS_PG"] = str(max(1, int(slots)))
    try:
        yield True
    finally:
        os.environ.pop("TUNE_MAX_PENDING_TRIALS_PG", None)


def trial_actor(trial: Any) -> Any | None:
    """The Ray actor handle Tune keeps for a running `trial`, or None (the
    switch off, an untested Ray, the attribute moved, no actor yet)."""
    if not enabled():
        return None
    return getattr(getattr(trial, "temporary_state", None), "ray_actor", None)
