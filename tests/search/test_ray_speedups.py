"""search/_ray_speedups.py: every private-Ray tweak, each target still where
it was written for, and one switch that turns them all off.  A comparison
that gives the same results either way is in
tests/search/test_ray_speedups_ray.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ray
from search import _ray_speedups as speedups


@pytest.fixture()
def switch(monkeypatch):
    def set_(value: str | None):
        if value is None:
            monkeypatch.delenv(speedups.SWITCH, raising=False)
        else:
            monkeypatch.setenv(speedups.SWITCH, value)
    return set_


def test_installed_ray_is_a_tested_one():
    """Upgrading Ray (Makefile pin, cluster image) must come with a re-check
    of every patch below; this fails first."""
    assert ray.__version__.startswith(speedups.TESTED_RAY), ray.__version__


def test_every_patch_target_still_exists():
    # 1. ray.init's private _system_config, and the two keys in this Ray's raylet
    import inspect

    assert 'kwargs.pop("_system_config"' in inspect.getsource(inspect.unwrap(ray.init)).replace("'", '"')
    raylet = Path(ray.__file__).parent / "core" / "src" / "ray" / "raylet" / "raylet"
    blob = raylet.read_bytes()
    for key in speedups.node_system_config():
        assert key.encode() in blob, key
    # 2. Tune's actor environment (read in a fresh process: a sweep in this one may have changed it)
    code = "from ray.tune.execution import class_cache as c; print(type(c.DEFAULT_ENV_VARS).__name__, c.DEFAULT_ENV_VARS.get('PL_DISABLE_FORK'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["dict", "1"]
    # 3. Tune's actor cache, with the attributes the replacement uses
    from ray.tune.execution import tune_controller
    from ray.tune.utils.object_cache import _ObjectCache

    assert tune_controller._ObjectCache is _ObjectCache
    cache = _ObjectCache(may_keep_one=True)
    assert hasattr(cache, "_cached_objects") and hasattr(cache, "_num_cached_objects")
    assert inspect.isgeneratorfunction(_ObjectCache.flush_cached_objects)
    assert "force_all" in inspect.signature(_ObjectCache.flush_cached_objects).parameters
    # ... and what its ping of an idle actor reads: the controller builds its cache itself, and keeps its actor
    # manager, which maps a tracked actor to its Ray handle; the cache hands out the first of a key's actors
    from ray.air.execution._internal.actor_manager import RayActorManager

    init = inspect.getsource(tune_controller.TuneController.__init__)
    assert "self._actor_cache = _ObjectCache(" in init and "self._actor_manager = " in init
    assert "self._live_actors_to_ray_actors_resources" in inspect.getsource(RayActorManager.__init__)
    assert "ray_actors_resources[" in inspect.getsource(tune_controller.TuneController._maybe_reuse_cached_actor)
    assert "self._cached_objects[key].pop(0)" in inspect.getsource(_ObjectCache.pop_cached_object)
    assert "has_cached_object" in inspect.getsource(tune_controller.TuneController._maybe_reuse_cached_actor)
    # 4. the variable Tune's controller reads
    assert "TUNE_MAX_PENDING_TRIALS_PG" in inspect.getsource(tune_controller)
    # 5. the three starts a local head node makes, where and as the lean node skips them (the dashboard head's
    # result unused: a statement of its own, the URL it sets read only through Node.webui_url, None on a head node)
    from ray._private.node import Node

    head = inspect.getsource(Node.start_head_processes)
    assert "self.start_monitor()" in head and "self.start_log_monitor()" in inspect.getsource(Node.start_ray_processes)
    assert list(inspect.signature(Node.start_monitor).parameters) == ["self"]
    assert list(inspect.signature(Node.start_log_monitor).parameters) == ["self"]
    assert "\n        self.start_api_server(" in head
    assert list(inspect.signature(Node.start_api_server).parameters) == ["self", "include_dashboard", "raise_on_failure"]
    assert "self._webui_url = None" in inspect.getsource(Node.__init__)
    # ... and the raylet's prestart argument, passed through the module's start_ray_process as a "raylet"
    from ray._private import services

    raylet = inspect.getsource(services.start_raylet)
    assert f'"{speedups.PRESTART_FLAG}{{}}".format(' in raylet and "start_ray_process(\n        command,\n        ray_constants.PROCESS_TYPE_RAYLET," in raylet
    assert ray_constants_raylet() == "raylet"
    assert list(inspect.signature(services.start_ray_process).parameters)[:2] == ["command", "process_type"]
    # 6. the constant the driver's core worker reads when ray.init creates it (a bool, read from the compiled module)
    from ray._private import ray_constants

    assert isinstance(ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER, bool)
    assert b"RAY_DISABLE_FAILURE_SIGNAL_HANDLER" in (Path(ray.__file__).parent / "_raylet.so").read_bytes()
    # 7. the function the driver's error thread prints a raylet's reports with, looked up at each report
    from ray._private import worker as ray_worker

    assert list(inspect.signature(ray_worker.print_to_stdstream).parameters) == ["data", "ignore_prefix"]
    listen = inspect.getsource(ray_worker.listen_error_messages)
    assert "print_to_stdstream(" in listen and '"pid": "raylet"' in listen and '"lines": [error_message]' in listen
    # the read: Tune keeps a trial's actor handle in its temporary state (trial_actor, for --stall-timeout)
    from ray.tune.experiment.trial import Trial, _TemporaryTrialState

    assert hasattr(_TemporaryTrialState(), "ray_actor")
    assert "self.temporary_state.ray_actor = ray_actor" in inspect.getsource(Trial.set_ray_actor)


def ray_constants_raylet() -> str:
    from ray._private import ray_constants

    return ray_constants.PROCESS_TYPE_RAYLET


def test_the_raylets_prestart_argument_is_lowered_never_raised_and_nothing_else_changes():
    f, flag = speedups._fewer_prestarted, speedups.PRESTART_FLAG
    assert f(f"{flag}8", 3) == f"{flag}3"
    assert f(f"{flag}2", 5) == f"{flag}2"  # never more than Ray's own
    assert f(f"{flag}2", 0) == f"{flag}1"  # at least one
    assert f(f"{flag}x", 1) == f"{flag}x"  # not a number: left to Ray
    assert f("--num_cpus=8", 1) == "--num_cpus=8"


def test_switch_off_changes_nothing(switch):
    from ray.tune.execution import tune_controller

    switch("0")
    before = tune_controller._ObjectCache
    assert not speedups.enabled()
    assert speedups.node_system_config() == {}
    assert speedups.use_prestarted_workers() is False
    from ray._private.node import Node

    from ray._private import services

    monitor, start_process = Node.start_monitor, services.start_ray_process
    with speedups.keep_idle_actors() as kept, speedups.pending_trials(4) as pending, speedups.lean_local_node(prestart=1) as lean:
        assert services.start_ray_process is start_process
        assert kept is False and pending is False and lean is False
        assert Node.start_monitor is monitor
        assert tune_controller._ObjectCache is before
        assert "TUNE_MAX_PENDING_TRIALS_PG" not in os.environ
    from types import SimpleNamespace

    assert speedups.trial_actor(SimpleNamespace(temporary_state=SimpleNamespace(ray_actor="handle"))) is None


def test_patches_apply_and_are_undone(switch, monkeypatch):
    from ray.tune.execution import tune_controller

    switch(None)
    monkeypatch.delenv("TUNE_MAX_PENDING_TRIALS_PG", raising=False)
    before = tune_controller._ObjectCache
    assert speedups.enabled()
    assert set(speedups.node_system_config()) == {"preload_python_modules", "idle_worker_killing_time_threshold_ms"}
    from ray._private.node import Node

    from ray._private import services

    monitor, log_monitor, api_server = Node.start_monitor, Node.start_log_monitor, Node.start_api_server
    start_process = services.start_ray_process
    with speedups.lean_local_node(prestart=1) as lean:
        assert services.start_ray_process is not start_process
        assert lean and Node.start_monitor is not monitor and Node.start_log_monitor is not log_monitor
        assert Node.start_api_server is not api_server
        assert Node.start_monitor(None) is None  # skipped
        assert Node.start_api_server(None, include_dashboard=False, raise_on_failure=False) is None  # (its keywords)
    assert (Node.start_monitor, Node.start_log_monitor, Node.start_api_server) == (monitor, log_monitor, api_server)
    assert services.start_ray_process is start_process
    with speedups.keep_idle_actors() as kept, speedups.pending_trials(3) as pending:
        assert kept and pending
        assert tune_controller._ObjectCache is not before and tune_controller._ObjectCache.awnn_keeps_idle
        assert os.environ["TUNE_MAX_PENDING_TRIALS_PG"] == "3"
        # the replacement keeps an idle actor instead of evicting it
        cache = tune_controller._ObjectCache(may_keep_one=True)
        assert cache.cache_object("cpu", "actor-a") and cache.cache_object("cpu", "actor-b")
        assert list(cache.flush_cached_objects()) == []
        assert sorted(cache.flush_cached_objects(force_all=True)) == ["actor-a", "actor-b"]
    assert tune_controller._ObjectCache is before
    assert "TUNE_MAX_PENDING_TRIALS_PG" not in os.environ
    from types import SimpleNamespace

    assert speedups.trial_actor(SimpleNamespace(temporary_state=SimpleNamespace(ray_actor="handle"))) == "handle"
    assert speedups.trial_actor(SimpleNamespace()) is None  # (moved: no handle, the pid path)
    # a value the user set is theirs
    monkeypatch.setenv("TUNE_MAX_PENDING_TRIALS_PG", "7")
    with speedups.pending_trials(3) as pending:
        assert pending is False and os.environ["TUNE_MAX_PENDING_TRIALS_PG"] == "7"


def test_a_raylets_report_of_a_worker_that_could_not_import_a_trials_code_is_one_line_and_others_are_rays(switch, monkeypatch, capsys):
    """Each attempt of a trial whose node lacked a module printed its traceback twice through the driver (588 lines for
    a smoke sweep): now one line per distinct failure; any other report of a raylet is printed by Ray as before."""
    from ray._private import worker as ray_worker

    from ray_texts import ACTOR_IMPORT_DEATH

    switch(None)
    original = ray_worker.print_to_stdstream
    monkeypatch.setattr(ray_worker, "print_to_stdstream", original)  # (restored after the test)
    assert speedups.import_failures_in_one_line() is True
    assert speedups.import_failures_in_one_line() is True  # a second install wraps Ray's own, not the first wrapper
    assert ray_worker.print_to_stdstream._awnn_original is original
    traceback = ACTOR_IMPORT_DEATH.split("Worker exit detail: ", 1)[1]
    for _ in range(3):  # three attempts, the same failure
        ray_worker.print_to_stdstream({"lines": [traceback], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    mapped = "Traceback (most recent call last):\n  ...\nImportError: libtorch_cpu.so: failed to map segment from shared object"
    ray_worker.print_to_stdstream({"lines": [mapped], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    other = "A worker died or was killed while executing a task by an unexpected system error."
    ray_worker.print_to_stdstream({"lines": [other], "pid": "raylet", "is_err": False}, ignore_prefix=False)
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0] == ("(raylet) a Ray worker could not import a trial's code: ModuleNotFoundError: No module named "
                        "'pyarrow_missing_on_this_node' (its traceback: the worker's log in that node's Ray session folder, logs/; "
                        "repeats not shown)")
    assert lines[1].startswith("(raylet) a Ray worker could not import a trial's code: ImportError: libtorch_cpu.so")
    assert other in lines[2] and len(lines) == 3 and "Traceback" not in out, out  # (Ray's own print, its prefix)

    switch("0")
    monkeypatch.setattr(ray_worker, "print_to_stdstream", original)
    assert speedups.import_failures_in_one_line() is False and ray_worker.print_to_stdstream is original


def test_untested_ray_version_runs_plain_tune(switch, monkeypatch, capsys):
    switch(None)
    monkeypatch.setattr(ray, "__version__", "9.99.0")
    monkeypatch.setattr(speedups, "_warned", [])
    assert not speedups.enabled()
    assert speedups.node_system_config() == {}
    assert not speedups.enabled()
    err = capsys.readouterr().err
    assert err.count("Ray 9.99.0 is not one the Ray speed-ups were tested with") == 1
