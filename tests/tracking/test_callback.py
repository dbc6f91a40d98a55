"""The tracking callback without Ray: fake Tune trials driven through its
hooks, a real TrackingWriter on a real MLflow SQLite store.  It logs each
trial, announces reports and ends through its two hooks (once per trial),
and keeps nothing the search side reads."""
from __future__ import annotations

import json
import pickle
from types import SimpleNamespace

import pytest

from machine import limit
from search.budget import resolve_budget
from search.strategies import StrategyOptions, make_arms
from tracking.callback import TrialTracker
from tracking.contract import Tag, client
from tracking.store import TrackingWriter, init_tracking


@pytest.fixture
def setup(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon")
    writer.start_run("cmp", name="compare-x", tags={Tag.KIND: "comparison"})
    writer.start_run("awnn/selection", name="awnn-selection", parent="cmp", tags={Tag.KIND: "sweep"})
    results, finished = [], []
    tracker = TrialTracker(writer, tags={Tag.COMPARISON: "cmp-1", Tag.TASK: "doublemoon"}, cpus_per_trial=2, gpus_per_trial=0,
                           on_result=lambda k, r: results.append((k, r.get("epoch"))), on_finished=lambda k, o: finished.append((k, o)))
    arm = make_arms("doublemoon", ["awnn"], StrategyOptions(), resolve_budget("smoke"))[0]
    specs = arm.selection_specs(resolve_budget("smoke"))
    trials = [SimpleNamespace(config={"spec": sp.to_dict()}, last_result={}, error_file=None, error_msg="RuntimeError: boom\n")
              for sp in specs[:3]]
    yield SimpleNamespace(uri=uri, writer=writer, tracker=tracker, trials=trials, results=results, finished=finished)
    writer.close(timeout=30)


def report(tracker, trial, epoch, attempt="a1", final=None, node=("10.0.0.1", "n1")):
    result = {"epoch": epoch, "attempt": attempt, "attempt_start_seconds": 0.0, "train_seconds": 36.0 * epoch, "node_ip": node[0],
              "node_id": node[1], "pid": "123", "best_val_acc": 0.5 + 0.1 * epoch,
              "epochs": [{"epoch": epoch, "val_acc": 0.5 + 0.1 * epoch, "width_total": 10 + epoch, "status": "ok", "width_capped": False}]}
    if final:
        result["final"] = final
    trial.last_result = result
    tracker.on_trial_result(0, [], trial, result)


def test_trials_are_logged_and_announced_once(setup):
    t, (ok, bad, open_) = setup.tracker, setup.trials
    for trial in (ok, bad, open_):
        t.on_trial_start(0, [], trial)
        t.on_trial_start(0, [], trial)  # a retried trial starts again: one run
    report(t, ok, 1)
    report(t, ok, 2, final={"status": "ok", "best_val_acc": 0.7, "best_val_loss": 0.4, "best_epoch": 2, "epochs_run": 2,
                            "widths": [12], "widths_at_best": [11]})
    t.on_trial_complete(0, [], ok)
    t.on_trial_complete(0, [], ok)  # announced once
    report(t, bad, 1, node=("10.0.0.2", "n2"))
    t.on_trial_recover(0, [], bad)
    t.on_trial_error(0, [], bad)
    report(t, open_, 1)
    t.interrupt_open()  # the driver stops: the trial in flight closes as interrupted

    key = lambda trial: f"awnn/selection/{trial.config['spec']['key']}"  # noqa: E731
    assert [k for k, _ in setup.results] == [key(ok), key(ok), key(bad), key(open_)]
    assert [k for k, _ in setup.finished] == [key(ok), key(bad)]
    outcome = dict(setup.finished[0][1])
    assert outcome["status"] == "ok" and outcome["widths"] == [12] and outcome["widths_at_best"] == [11]
    assert outcome["compute_seconds"] == pytest.approx(72.0) and outcome["device_hours"] == pytest.approx(72.0 * 2 / 3600)
    assert outcome["config"] == ok.config["spec"]["config"] and outcome["key"] == ok.config["spec"]["key"]
    failed = setup.finished[1][1]
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: boom" and failed["retries"] == 1

    assert setup.writer.flush(timeout=60)
    runs = {r.data.tags[Tag.TRIAL_KEY]: r for r in client(setup.uri).search_runs([setup.writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")}
    r_ok, r_bad, r_open = (runs[trial.config["spec"]["key"]] for trial in (ok, bad, open_))
    assert (r_ok.info.status, r_ok.data.tags[Tag.STATUS]) == ("FINISHED", "ok")
    assert (r_bad.info.status, r_bad.data.tags[Tag.STATUS], r_bad.data.tags[Tag.ERROR]) == ("FAILED", "failed", "RuntimeError: boom")
    assert (r_open.info.status, r_open.data.tags[Tag.STATUS]) == ("KILLED", "interrupted")
    assert r_ok.data.metrics["best_val_acc"] == 0.7 and r_ok.data.metrics["final_width_total"] == 12
    assert json.loads(r_ok.data.tags[Tag.WIDTHS_AT_BEST]) == [11] and r_ok.data.tags[Tag.STRATEGY] == "awnn"
    assert r_ok.data.tags[Tag.COMPARISON] == "cmp-1" and r_ok.data.tags[Tag.NODE_IP] == "10.0.0.1"
    assert r_bad.data.tags[Tag.RETRIES] == "1" and r_bad.data.tags[Tag.NODES] == "10.0.0.2"
    history = client(setup.uri).get_metric_history(r_ok.info.run_id, "val_acc")
    assert sorted((m.step, round(m.value, 6)) for m in history) == [(1, 0.6), (2, 0.7)]
    assert r_open.data.metrics["compute_seconds"] == pytest.approx(36.0)


def test_a_trial_a_scheduler_stops_is_announced_as_stopped(setup):
    t, trial = setup.tracker, setup.trials[0]
    t.on_trial_start(0, [], trial)
    report(t, trial, 1)
    t.on_trial_complete(0, [], trial)  # no final summary: stopped before its last epoch
    assert [o["status"] for _, o in setup.finished] == ["stopped"]
    assert setup.finished[0][1]["best_val_acc"] == pytest.approx(0.6)


def test_pickled_tracker_leaves_the_writer_and_hooks_behind(setup):
    state = pickle.loads(pickle.dumps(setup.tracker))
    assert state.writer is None and state.on_result is None and state.on_finished is None and state.on_fault is None


def test_a_trial_ray_retries_or_fails_before_it_started_still_gets_its_run(setup):
    """Ray can retry a trial, or end it with an error, before it ever reported
    `on_trial_start` (its actor failed while being placed: its node died, a
    worker could not start).  Each config still gets exactly one run, with the
    retry and the error on it, and no write is addressed to a run that does
    not exist (the writer drops none; everything is written at once)."""
    import time

    t, (retried, lost, ok) = setup.tracker, setup.trials
    lost.error_msg = "RayActorError: The actor died unexpectedly before finishing this task (node died)\n"
    t.on_trial_recover(0, [], retried)  # retried before it started: Ray placed it again
    t.on_trial_start(0, [], retried)
    report(t, retried, 1, final={"status": "ok", "best_val_acc": 0.6, "best_val_loss": 0.5, "best_epoch": 1, "epochs_run": 1,
                                 "widths": [8], "widths_at_best": [8]})
    t.on_trial_complete(0, [], retried)
    t.on_trial_error(0, [], lost)  # failed for good before it started
    t.on_trial_start(0, [], ok)
    report(t, ok, 1)
    t0 = time.monotonic()
    assert setup.writer.flush(timeout=30) and time.monotonic() - t0 < limit(10)
    assert setup.writer.dropped == {}
    runs = {r.data.tags[Tag.TRIAL_KEY]: r for r in client(setup.uri).search_runs([setup.writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")}
    assert sorted(runs) == sorted(trial.config["spec"]["key"] for trial in setup.trials)
    r_retried, r_lost = runs[retried.config["spec"]["key"]], runs[lost.config["spec"]["key"]]
    assert (r_retried.info.status, r_retried.data.tags[Tag.STATUS], r_retried.data.tags[Tag.RETRIES]) == ("FINISHED", "ok", "1")
    assert r_retried.data.tags[Tag.LAST_ERROR] == "RuntimeError: boom" and r_retried.data.metrics["retries"] == 1
    assert (r_lost.info.status, r_lost.data.tags[Tag.STATUS]) == ("FAILED", "failed")
    assert "node died" in r_lost.data.tags[Tag.ERROR] and r_lost.data.metrics["attempts"] == 0
    assert [o["status"] for _, o in setup.finished] == ["ok", "failed"]


def test_a_write_to_a_key_without_a_run_is_dropped_not_retried(tmp_path, caplog):
    """A write addressed to a key no run was started for is a bug of the
    caller, not an outage of the store: it is dropped and logged, and the
    writes queued behind it are made at once (retried, it would hold back
    every later write for the writer's whole retry time)."""
    import logging
    import time

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    writer = TrackingWriter(uri, "awnn-doublemoon", retry_seconds=600)
    try:
        with caplog.at_level(logging.ERROR, logger="tracking.store"):
            writer.set_tags("nobody/selection/sel-0000", {"a": 1})
            writer.log_metrics("nobody/selection/sel-0000", [("m", 1.0, 1), ("m", 2.0, 2)])
            writer.start_run("child", name="child", parent="no-such-parent")
            writer.start_run("cmp", name="compare-x", tags={Tag.KIND: "comparison"})
            writer.log_metrics("cmp", [("wall_seconds", 3.0, 0)])
            t0 = time.monotonic()
            assert writer.flush(timeout=30) and time.monotonic() - t0 < limit(10)
        assert writer.dropped == {"nobody/selection/sel-0000": 2, "no-such-parent": 1}
        assert writer.failures == 0  # not counted as an outage
        assert sum("no MLflow run started for 'nobody/selection/sel-0000'" in r.getMessage() for r in caplog.records) == 1
        run = client(uri).get_run(writer.run_id("cmp"))
        assert run.data.metrics["wall_seconds"] == 3.0
        assert writer.run_id("child", timeout=0.1) is None
    finally:
        writer.close(timeout=30)


def test_resumed_from_names_the_checkpoint_the_trial_really_continued_from(setup):
    """A re-run trial is handed its newest checkpoint (tag at start); when that
    file was torn the trial continues from an older one, or from epoch 0, and
    its first report says so: the tag follows the report."""
    t, (torn, none, fine) = setup.tracker, setup.trials
    for trial in (torn, none, fine):
        trial.config["spec"]["resume_from"] = f"/ckpt/{trial.config['spec']['key']}/checkpoint_000003"
        t.on_trial_start(0, [], trial)
    used = [(torn, "/ckpt/older/checkpoint_000002"), (none, ""), (fine, fine.config["spec"]["resume_from"])]
    for trial, value in used:
        result = {"epoch": 3, "attempt": "a1", "attempt_start_seconds": 0.0, "train_seconds": 1.0, "pid": "1", "resumed_from": value, "epochs": []}
        t.on_trial_result(0, [], trial, result)
    assert setup.writer.flush(timeout=30)
    runs = {r.data.tags[Tag.TRIAL_KEY]: r for r in client(setup.uri).search_runs([setup.writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")}
    tag = lambda trial: runs[trial.config["spec"]["key"]].data.tags[Tag.RESUMED_FROM]  # noqa: E731
    assert tag(torn) == "/ckpt/older/checkpoint_000002"
    assert tag(none) == "none: no readable checkpoint, started at epoch 0"
    assert tag(fine) == fine.config["spec"]["resume_from"]


@pytest.mark.parametrize("how", ["data final", "storage final", "ray storage error on retry", "ray storage error at the end",
                                 "lost worker after its retries", "lost to ray's memory monitor",
                                 "environment: an import under ulimit -v, at its first failure", "environment: no thread, at the end",
                                 "environment: an actor whose class its node could not import, at its first failure"])
def test_a_trial_its_environment_ended_stays_open_and_closes_as_interrupted(setup, how, tmp_path):
    """A trial ended by its environment, not its config (its data cannot be
    read, a checkpoint finds no room, its worker process is lost once more than
    --max-failures allows: tracking.contract.FAULT_KINDS), is no
    outcome: it is announced once through on_fault, never as finished, and
    its run stays open until the driver stops and closes it as interrupted
    (KILLED), with the error, its compute, and --resume's re-run to come.
    Also when Ray reports the error (a write of Ray's own found no room)."""
    faults = []
    setup.tracker.on_fault = lambda k, o: faults.append((k, o))
    t, (ok, victim, other) = setup.tracker, setup.trials
    for trial in (ok, victim, other):
        t.on_trial_start(0, [], trial)
    report(t, victim, 1)
    error = {"data": "DataError: /d/labels.txt: no such file (on node-1)",
             "storage": "StorageFault: cannot copy a checkpoint into the storage (--storage): No space left on device (on node-1)",
             "ray": "OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device",
             "lost": "its worker process was lost 2 times (ActorDiedError: The actor died unexpectedly before finishing this task.)"}.get(how.split()[0])
    if how.endswith("monitor"):
        error = ("its worker process was lost 1 time (OutOfMemoryError: 2 worker(s) were killed due to the node running low on memory. "
                 "Memory on the node (IP: 10.0.0.2, ID: ab12) was 22.40GB used / 23.47GB limit (0.954))")
    kind = {"data": "data", "lost": "lost", "environment:": "environment"}.get(how.split()[0], "storage")
    if how.startswith("environment: an import"):  # its code cannot be imported there: no retry waited for
        import cloudpickle
        from ray.exceptions import RayTaskError

        mapped = ImportError("libtorch_cpu.so: failed to map segment from shared object")
        error = "ImportError: libtorch_cpu.so: failed to map segment from shared object (on 10.0.0.2)"
        victim.pickled_error_file = str(tmp_path / "error.pkl")
        with open(victim.pickled_error_file, "wb") as f:  # as Ray Tune keeps it: the task error made an instance of its cause
            tb = 'Traceback (most recent call last):\n  File "/w/awnn/lean.py", line 38, in <module>\n    import torch\nImportError: x'
            cloudpickle.dump(RayTaskError("train", tb, mapped, ip="10.0.0.2", pid=17332).as_instanceof_cause(), f)
        t.on_trial_recover(0, [], victim)
        assert faults and not t.retries
        t.on_trial_error(0, [], victim)
    elif how.startswith("environment: an actor"):  # Ray's placeholder actor: the trial's error is the actor's death
        import cloudpickle
        from ray.exceptions import RayActorError

        from ray_texts import ACTOR_IMPORT_DEATH

        error = "ModuleNotFoundError: No module named 'pyarrow_missing_on_this_node' (on 10.0.3.7)"
        victim.error_msg = "An unexpected internal error occurred while the worker was executing a task."  # (its last line)
        victim.pickled_error_file = str(tmp_path / "error.pkl")
        with open(victim.pickled_error_file, "wb") as f:
            cloudpickle.dump(RayActorError(error_msg=ACTOR_IMPORT_DEATH), f)
        t.on_trial_recover(0, [], victim)
        assert faults and not t.retries  # no retry waited for: the same node fails it again
        t.on_trial_error(0, [], victim)
    elif how.startswith("environment: no thread"):
        error = "RuntimeError: can't start new thread"
        victim.error_msg = f"Traceback (most recent call last):\n  File ...threading.py\n{error}\n"
        t.on_trial_error(0, [], victim)
    elif how.startswith("lost worker"):  # Ray retried it once, then lost it again: its pickled error is the loss, its text says nothing of it
        import cloudpickle
        from ray.exceptions import ActorDiedError

        victim.error_msg = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR"
        victim.pickled_error_file = str(tmp_path / "error.pkl")
        with open(victim.pickled_error_file, "wb") as f:
            cloudpickle.dump(ActorDiedError(), f)
        t.on_trial_recover(0, [], victim)  # a loss Ray retries is no fault yet
        assert not faults and t.retries[f"awnn/selection/{victim.config['spec']['key']}"] == 1
        t.on_trial_error(0, [], victim)
        t.on_trial_error(0, [], victim)
    elif how.endswith("monitor"):  # Ray Tune pickles no error for it (not a task's or an actor's): its error file's text says it
        from ray.exceptions import OutOfMemoryError

        said = OutOfMemoryError("2 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.2, "
                                "ID: ab12) was 22.40GB used / 23.47GB limit (0.954)\nRefer to the documentation on how to address "
                                "the out of memory issue: https://docs.ray.io/...")
        victim.error_file = str(tmp_path / "error.txt")
        with open(victim.error_file, "w") as f:  # as Ray 2.60's Trial.handle_error writes it, an earlier failure first
            f.write(f"Failure # 1 (occurred at 2026-11-28_16-49-32)\nRuntimeError: an earlier one\nFailure # 2 (occurred at 2026-11-28_16-49-40)\n{said}\n")
        t.on_trial_error(0, [], victim)
    elif how.endswith("final"):
        report(t, victim, 2, final={"status": "failed", "error": error, "error_kind": how.split()[0]})
        t.on_trial_complete(0, [], victim)
        t.on_trial_complete(0, [], victim)  # (Tune's end of it again: still one fault, no outcome)
    else:
        victim.error_msg = f"Traceback (most recent call last):\n  File ...\n{error}\n"
        (t.on_trial_recover if how.endswith("retry") else t.on_trial_error)(0, [], victim)
        t.on_trial_error(0, [], victim)
    report(t, other, 1, final={"status": "failed", "error": "RuntimeError: boom", "train_seconds": 36.0})  # a config's own failure
    t.on_trial_complete(0, [], other)
    key = lambda trial: f"awnn/selection/{trial.config['spec']['key']}"  # noqa: E731
    assert [k for k, _ in faults] == [key(victim)]
    assert faults[0][1]["error"] == error and faults[0][1]["error_kind"] == kind
    assert [k for k, _ in setup.finished] == [key(other)]  # the config's own failure is an outcome; the fault is not

    assert setup.writer.flush(timeout=60)
    trial_runs = lambda: {r.data.tags[Tag.TRIAL_KEY]: r for r in client(setup.uri).search_runs(  # noqa: E731
        [setup.writer.experiment_id], filter_string=f"tags.`{Tag.KIND}` = 'trial'")}
    run = trial_runs()[victim.config["spec"]["key"]]
    assert (run.info.status, run.data.tags[Tag.STATUS]) == ("RUNNING", "running")  # open until the driver stops
    assert run.data.tags[Tag.LAST_ERROR] == error
    t.interrupt_open()
    assert setup.writer.flush(timeout=60)
    runs = trial_runs()
    run = runs[victim.config["spec"]["key"]]
    assert (run.info.status, run.data.tags[Tag.STATUS], run.data.tags[Tag.LAST_ERROR]) == ("KILLED", "interrupted", error)
    assert Tag.ERROR not in run.data.tags and run.data.metrics["compute_seconds"] == pytest.approx(72.0 if how.endswith("final") else 36.0)
    assert (runs[other.config["spec"]["key"]].info.status, runs[other.config["spec"]["key"]].data.tags[Tag.STATUS]) == ("FAILED", "failed")
    assert (runs[ok.config["spec"]["key"]].info.status, runs[ok.config["spec"]["key"]].data.tags[Tag.STATUS]) == ("KILLED", "interrupted")


def test_a_lost_worker_is_told_from_an_exception_of_the_trial():
    """tracking.contract.lost_worker: Ray's errors of a process or node lost
    (directly, or carried by a RayTaskError) are losses; an exception the
    trial's own code raised (a RayTaskError of a ValueError, a CUDA out of
    memory RuntimeError) is not, nor is no error."""
    from ray import exceptions as rx

    from tracking.contract import lost_worker

    for loss in (rx.ActorDiedError(), rx.NodeDiedError("node gone"), rx.WorkerCrashedError(), rx.OutOfMemoryError("low memory"),
                 rx.ActorUnavailableError("unavailable", None), rx.RayTaskError("train", "tb", rx.ActorDiedError())):
        assert lost_worker(loss), type(loss).__name__
    for own in (ValueError("bad config"), RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                rx.RayTaskError("train", "tb", ValueError("x")), rx.RayTaskError("train", "tb", MemoryError()), None):
        assert not lost_worker(own), repr(own)


def test_storage_errors_are_told_from_other_errors():
    from search.errors import storage_error
    from tracking.contract import storage_fault_text

    assert storage_fault_text("OSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert storage_fault_text("OSError: [Errno 122] Disk quota exceeded: '/s/x'") and storage_fault_text("[Errno 30] Read-only file system")
    assert not storage_fault_text("RuntimeError: boom") and not storage_fault_text("OSError: [Errno 2] No such file or directory: 'x'")
    assert not storage_fault_text("ValueError: [errno 280] other")
    try:  # a storage error under another (Ray's wrapper): found in the chain
        try:
            open("/dev/full", "wb", buffering=0).write(b"x")
        except OSError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as outer:
        found = storage_error(outer)
    assert found is not None and found.errno == 28
    assert storage_error(RuntimeError("no")) is None and storage_error(FileNotFoundError(2, "gone")) is None


def test_a_write_this_user_may_not_make_is_a_storage_fault_with_its_own_remedy():
    """EACCES/EPERM (a chmod, an immutable folder, a node whose mount maps the
    user to nobody) are storage faults like a full disk (before: the trial was
    retried on the same folder, then recorded as a failure of its config), and
    the line says to make the folder writable, not to make room."""
    import errno

    from search.errors import storage_error, storage_remedy
    from search.trial_common import _named_path
    from tracking.contract import storage_fault_errno

    pyarrow_text = ("PermissionError: [Errno 1] Cannot create directory '/s/cmp/awnn-ass-02'. Detail: [errno 1] Operation not "
                    "permitted")
    assert storage_fault_errno(pyarrow_text) == errno.EPERM
    assert storage_fault_errno("PermissionError: [Errno 13] Permission denied: '/s/x'") == errno.EACCES
    assert storage_fault_errno("[Errno 28] No space left on device; PermissionError: [Errno 13] Permission denied") == errno.ENOSPC
    assert storage_fault_errno("OSError: [Errno 11] Resource temporarily unavailable") is None  # '[errno 1]' is not in '[errno 11]'
    assert storage_error(RuntimeError("wrapped")) is None
    assert storage_error(PermissionError(errno.EACCES, "Permission denied", "/s/x")).errno == errno.EACCES
    assert "make room" in storage_remedy(errno.ENOSPC) and "make room" in storage_remedy(None)
    denied = storage_remedy(errno.EACCES)
    assert "writable" in denied and "every node" in denied and "make room" not in denied
    assert "every node" not in storage_remedy(errno.EROFS, "--optuna-storage", nodes=False)
    assert _named_path(OSError(errno.EPERM, pyarrow_text)) == " (at /s/cmp/awnn-ass-02)"
    assert _named_path(PermissionError(errno.EACCES, "Permission denied", "/s/x")) == " (at /s/x)"
    assert _named_path(OSError(errno.ENOSPC, "No space left on device")) == ""
