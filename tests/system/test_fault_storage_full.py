"""A full disk under `--storage`, for real: the comparison runs with its
storage on a small tmpfs mounted in a mount namespace of its own (`unshare`;
the mount ends with the command), so trials and Ray Tune really get ENOSPC
when they write a checkpoint or their state.

What must hold: the driver stops at the first trial that cannot write
(no retry on the same disk can), says so in one line that names the
storage, its free space and `--resume` (exit 2, no traceback of ours); the
trials in flight are interrupted, none is recorded as a failure of its
config, nothing stays RUNNING; once there is room, `--resume` finishes the
comparison with exactly one finished run per config.  Both executions: a
fused group (`--fuse`, the fixed grid's selection) and trials of one config.
(Sweeps of one strategy: the driver is the one `compare` runs.)
A disk full before the start fails before Ray starts."""
from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import AWNN, ROOT, run_awnn
from machine import limit
from fault_helpers import store_client

pytestmark = [pytest.mark.slow, pytest.mark.fault]

# mount a tmpfs of size $1 on $2 (private to this process and its children), then run the rest
MOUNT = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'


def _unshare() -> list[str] | None:
    """The `unshare` prefix that gives a command a mount namespace of its own
    where it may mount a tmpfs (as root, or as a user mapped to root), or None."""
    prefixes = [["unshare", "--mount", "--propagation", "private"]] if os.geteuid() == 0 else []
    prefixes.append(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"])
    for prefix in prefixes:
        try:
            p = subprocess.run([*prefix, "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", "/tmp"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return prefix
    return None


UNSHARE = _unshare()
needs_unshare = pytest.mark.skipif(UNSHARE is None, reason="needs unshare(1) with mount namespaces (to mount a small tmpfs)")


def on_small_disk(args: list[str], storage: Path, size: str, cwd: Path, timeout: float = 600, prefix: list[str] = ()) -> subprocess.CompletedProcess:
    """`awnn ARGS` with `storage` a tmpfs of `size` that only it sees (run by `prefix`, a command that runs its arguments)."""
    e = os.environ.copy()
    e.pop("RAY_ADDRESS", None)
    e.pop("MLFLOW_TRACKING_URI", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    storage.mkdir(parents=True, exist_ok=True)
    return subprocess.run([*UNSHARE, "sh", "-c", MOUNT, "sh", size, str(storage), *prefix, *AWNN, *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, env=e)


def trial_runs(tracking: str) -> list:
    c = store_client(tracking)  # (polled while a driver makes the store)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    return c.search_runs([exp.experiment_id], max_results=5000) if exp else []


# the fixed grid's selection trains in fused groups (--fuse, the CPU default); AWNN's configs with --fuse 1 one a trial.
# The resume is checked once (a fused group resumed after an interruption: tests/system/test_fault_fused.py)
CASES = {"fused-group": ("fixed", [], None),
         "one-config-trials": ("awnn", ["--fuse", "1"], {"selection": 6, "assessment": 2})}


@needs_unshare
@pytest.mark.parametrize("case", list(CASES))
def test_a_full_storage_stops_the_sweep_in_one_line_and_resume_finishes_it(tmp_path, case):
    strategy, extra, expected = CASES[case]
    storage = tmp_path / "storage"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # a checkpoint at every report, a report every epoch: the 300 KiB disk fills within the first trials
    args = ["sweep", "--task", "doublemoon", "--budget", "smoke", "--strategy", strategy, "--num-cpus", "2",
            "--storage", str(storage), "--tracking-uri", tracking, "--checkpoint-interval", "0", "--report-interval", "0", *extra]
    p = on_small_disk(args, storage, "300k", tmp_path)
    assert p.returncode == 2, p.stderr[-4000:]
    errors = [line for line in p.stderr.splitlines() if line.startswith("awnn sweep: error:")]
    assert len(errors) == 1, p.stderr[-4000:]
    line = errors[0]
    assert "No space left on device" in line and f"--storage {storage}: " in line and "free of 300.0 KiB" in line and "--resume" in line, line
    assert "StorageFault: cannot copy a checkpoint into the storage (--storage)" in line and re.search(r"error: trial \w+/selection/sel-\d+: ", line)  # the trial saw it, and which
    # no traceback: not ours, nor Ray Tune's of every failed save of its state (one line each: search/tune.py)
    assert "Traceback" not in p.stderr, p.stderr[-4000:]

    runs = trial_runs(tracking)
    assert runs and not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    trials = [r for r in runs if r.data.tags["awnn.kind"] == "trial"]
    hit = [r for r in trials if "No space left on device" in r.data.tags.get("awnn.last_error", "")]
    assert hit and all((r.info.status, r.data.tags["awnn.status"]) == ("KILLED", "interrupted") for r in hit)
    assert not [r.info.run_name for r in trials if r.data.tags["awnn.status"] == "failed"]  # a full disk is no config's failure
    assert all(r.data.metrics.get("retries", 0) == 0 for r in hit)  # not retried on the same full disk
    cmp_run = next(r for r in runs if r.data.tags["awnn.kind"] == "comparison")
    assert cmp_run.info.status == "FAILED" and cmp_run.data.tags["awnn.state"] == "failed"

    if expected is None:
        return
    # room again (the tmpfs went with the command; the folder is on the real disk now): --resume finishes it
    run_awnn(args + ["--resume"], cwd=tmp_path, check=True, timeout=600)
    runs = trial_runs(tracking)
    done = [r for r in runs if r.data.tags["awnn.kind"] == "trial" and r.info.status != "KILLED"]
    per_config = Counter((r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in done)
    assert set(per_config.values()) == {1} and Counter(phase for phase, _ in per_config) == expected
    assert {r.data.tags["awnn.status"] for r in done} == {"ok"}
    assert {(r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in hit} <= set(per_config)
    cmp_run = next(r for r in runs if r.data.tags["awnn.kind"] == "comparison")
    assert cmp_run.info.status == "FINISHED" and cmp_run.data.tags["awnn.state"] == "finished"


@needs_unshare
def test_a_storage_already_full_fails_before_ray_starts(tmp_path):
    storage = tmp_path / "storage"
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # 8 KiB: room for the folder, not for the 64 KiB the check writes
    p = on_small_disk(["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "awnn", "--num-cpus", "2",
                       "--storage", str(storage), "--tracking-uri", tracking], storage, "8k", tmp_path, timeout=120)
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1] == f"awnn compare: error: --storage {storage}: cannot write in {storage} (No space left on device)"
    assert "comparison doublemoon-" not in p.stdout + p.stderr  # nothing started


@needs_unshare
def test_a_full_disk_under_the_sqlite_store_ends_without_a_report_from_it_and_resume_applies_the_writes(tmp_path):
    """The MLflow SQLite file's disk fills mid-comparison: trials go on (only
    the driver writes to MLflow, retrying), the writes MLflow did not take
    are saved to the spool file, and the comparison is not reported from the
    incomplete store: exit 1 with one line saying so; MLflow's own error log
    of every retried call stays out of the output.  With room again,
    `--resume` applies the saved writes and writes the report, the same
    comparison, one finished run per config."""
    db_dir, keep = tmp_path / "db", tmp_path / "keep"
    db_dir.mkdir()
    keep.mkdir()
    tracking = f"sqlite:///{db_dir / 'mlflow.db'}"
    args = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed", "--num-cpus", "2",
            "--tracking-uri", tracking, "--storage", str(tmp_path / "results")]
    e = os.environ.copy()
    e.pop("RAY_ADDRESS", None)
    e.pop("MLFLOW_TRACKING_URI", None)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    # (the writer's wait for the store at the end, 120 s by default; 3 s here, scaled to this machine: on a host at half
    # speed the wait ended before SQLite had said "database or disk is full" once, and the last line had no reason)
    e["AWNN_TRACKING_FLUSH_TIMEOUT"] = f"{limit(3):g}"
    # 1.5 MiB: room for MLflow's schema and the first trials' runs, not for the comparison; the store is copied out
    # of the tmpfs (which ends with the command) for the resume
    script = 'mount -t tmpfs -o size=1500k tmpfs "$1" && cd "$3" && "${@:4}"; rc=$?; cp "$1/mlflow.db" "$2/"; exit $rc'
    p = subprocess.run([*UNSHARE, "bash", "-c", script, "bash", str(db_dir), str(keep), str(tmp_path), *AWNN, *args],
                       capture_output=True, text=True, timeout=600, env=e)
    assert p.returncode == 1, p.stderr[-4000:]
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("awnn compare: comparison doublemoon-") and "ran to its end, but MLflow did not take the writes of" in last, p.stderr[-3000:]
    assert f"the disk of {db_dir / 'mlflow.db'}: " in last and " free of 1.5 MiB)" in last, last  # (the tmpfs: whatever SQLite said)
    assert "they are saved in" in last and "--resume: it applies them and writes the report" in last, last
    assert "database or disk is full" in last or "disk I/O error" in last, last
    assert p.stderr.count("database or disk is full") <= 4 and "Traceback" not in p.stderr, p.stderr[-3000:]  # no log of every retry
    assert not list((tmp_path / "results").glob("reports/*/report.html"))  # no report from an incomplete store
    spool = list((tmp_path / "results").glob("pending-mlflow-*.jsonl"))
    assert len(spool) == 1

    (keep / "mlflow.db").rename(db_dir / "mlflow.db")  # room again: the store on the real disk, as it was
    r = run_awnn(args + ["--resume"], cwd=tmp_path, check=True, timeout=600)
    assert "resume: applied" in r.stderr and not spool[0].exists(), r.stderr[-3000:]
    runs = MlflowClient(tracking).search_runs([MlflowClient(tracking).get_experiment_by_name("awnn-doublemoon").experiment_id], max_results=5000)
    cmp_runs = [r for r in runs if r.data.tags["awnn.kind"] == "comparison"]
    assert len(cmp_runs) == 1 and cmp_runs[0].info.status == "FINISHED" and cmp_runs[0].data.tags["awnn.state"] == "finished"
    done = [r for r in runs if r.data.tags["awnn.kind"] == "trial" and r.info.status != "KILLED"]
    per_config = Counter((r.data.tags["awnn.arm"], r.data.tags["awnn.phase"], r.data.tags["awnn.trial_key"]) for r in done)
    assert set(per_config.values()) == {1} and len(per_config) == 30 + 2
    assert {r.data.tags["awnn.status"] for r in done} == {"ok"} and {r.info.status for r in done} == {"FINISHED"}
    assert list((tmp_path / "results").glob("reports/*/report.html"))


@needs_unshare
def test_a_full_temporary_folder_on_the_node_is_a_storage_fault_naming_it(tmp_path):
    """A trial writes its checkpoint in the node's temporary folder before Ray
    copies it into --storage: a full one is the same fault (StorageFault,
    naming that folder), not torch's 'unexpected pos' RuntimeError, and
    nothing is left behind in it."""
    full = tmp_path / "tmp"
    full.mkdir()
    code = ("import os, tempfile, torch\n"
            "from search.trial_common import StorageFault, report_with_checkpoint\n"
            "try:\n"
            "    report_with_checkpoint({'epoch': 1}, {'w': torch.zeros(1 << 20)})\n"
            "except StorageFault as e:\n"
            "    print('FAULT', e, os.listdir(tempfile.gettempdir()))\n")
    e = os.environ.copy()
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e["TMPDIR"] = str(full)
    p = subprocess.run([*UNSHARE, "sh", "-c", MOUNT, "sh", "256k", str(full), AWNN[0], "-c", code],
                       capture_output=True, text=True, timeout=120, env=e)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith(f"FAULT cannot write a checkpoint in this node's temporary folder {full}/awnn-ckpt-"), p.stdout + p.stderr[-2000:]
    assert "No space left on device []" in p.stdout  # and the half-written folder is gone


@needs_unshare
def test_a_report_that_does_not_fit_its_disk_is_one_line_and_leaves_nothing_half_written(tmp_path, smoke_comparison):
    """`awnn report --out` on a disk with room for the write check (64 KiB)
    but not for the report: before, matplotlib's OSError came out as a
    40-line traceback (exit 1).  Now one line naming --out, the error and
    the room there (exit 2), and the folder holds no staged or cut file."""
    out, listing = tmp_path / "small", tmp_path / "listing.txt"
    # in the namespace that sees the small disk: the report, then what the disk holds (written outside it)
    then_list = ["sh", "-c", 'd=$1 l=$2; shift 2; "$@"; rc=$?; find "$d" -mindepth 1 > "$l"; exit $rc', "sh", str(out), str(listing)]
    p = on_small_disk(["report", "--tracking-uri", smoke_comparison["tracking_uri"], "--out", str(out / "rep")], out, "200k", tmp_path,
                      timeout=300, prefix=then_list)
    assert p.returncode == 2, p.stderr[-4000:]
    assert listing.read_text().split() in ([], [str(out / "rep")]), listing.read_text()  # at most the (empty) folder it made
    assert "Traceback" not in p.stderr, p.stderr[-4000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"awnn report: error: --out {out / 'rep'}: cannot write the report (No space left on device: "), line
    assert "free of 200.0 KiB there, less than the report needs); nothing in it changed" in line, line


@needs_unshare
def test_a_full_optuna_storage_stops_tpe_in_one_line_and_resume_catches_the_study_up(tmp_path):
    """TPE's study on a disk that fills up mid-selection.  Before: Ray Tune
    logged a 60-line traceback for every trial whose end Optuna could not
    store ("Error stopping trial"), the sweep went on asking configs of a
    study that no longer recorded them, and the driver died in a traceback
    (exit 1).  Now: one line naming --optuna-storage, the error and the room
    there (exit 2); after room is made (the same tmpfs, grown), `--resume`
    finishes, and the study holds one COMPLETE trial per trial key, nothing
    left RUNNING (the ends the earlier driver could not store are told from
    MLflow; an ask whose trial never ran is told failed)."""
    import math

    import optuna

    empty = tmp_path / "empty.db"  # the room an empty study takes with this Optuna and SQLite, plus ~25 smoke trials' rows
    optuna.create_study(storage=f"sqlite:///{empty}", study_name="x")
    size = f"{math.ceil((empty.stat().st_size + 28 * 1024) / 4096) * 4}k"
    disk, copy, listing = tmp_path / "db", tmp_path / "o-copy.db", tmp_path / "rc.txt"
    args = ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "tpe", "--tpe-trials", "30", "--num-cpus", "2",
            "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--optuna-storage", f"sqlite:///{disk / 'o.db'}", "--storage", str(tmp_path / "st")]
    # in the namespace that sees the small disk: the run, room made (the tmpfs grown), the same command with --resume, the study copied out
    script = ('disk=$1 copy=$2 rcs=$3; shift 3; "$@" 2> "$rcs.err1"; echo $? > "$rcs"; mount -o remount,size=4m "$disk" && '
              '"$@" --resume 2> "$rcs.err2"; echo $? >> "$rcs"; cp "$disk/o.db" "$copy"')
    p = on_small_disk(args, disk, size, tmp_path, prefix=["sh", "-c", script, "sh", str(disk), str(copy), str(listing)])
    first, second = listing.read_text().split()
    err1 = Path(f"{listing}.err1").read_text()
    assert first == "2", err1[-4000:]
    assert "Traceback" not in err1, err1[-4000:]
    (line,) = [ln for ln in err1.splitlines() if ln.startswith("awnn compare: error:")]
    assert f"--optuna-storage sqlite:///{disk / 'o.db'}: TPE's study " in line and "could not be written (OperationalError: database or disk is full" in line, line
    assert "--resume" in line, line
    assert second == "0", Path(f"{listing}.err2").read_text()[-4000:] + p.stdout[-3000:]

    (summary,) = optuna.get_all_study_summaries(f"sqlite:///{copy}")
    study = optuna.load_study(study_name=summary.study_name, storage=f"sqlite:///{copy}")
    states = Counter(t.state.name for t in study.trials)
    assert states["RUNNING"] == 0, states
    complete = Counter(t.user_attrs.get("awnn_trial_key") for t in study.trials if t.state.name == "COMPLETE")
    assert sorted(complete) == [f"sel-{i:04d}" for i in range(30)] and set(complete.values()) == {1}, complete


@needs_unshare
def test_a_full_ray_temporary_folder_is_named_not_the_storage(tmp_path):
    """Ray's temporary folder (/tmp/ray, where Ray Tune stages its state
    before copying it into --storage) fills up, --storage has room.  Before,
    the line blamed --storage and gave its free space (gigabytes); now it gives
    the room of both, the short one being Ray's folder, and RAY_TMPDIR.  Where
    the folder fills only at Ray Tune's last snapshot (all trials done), the
    comparison is complete: exit 0, Tune's error in one line, the report out."""
    args = ["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2", "--storage", str(tmp_path / "st"),
            "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"]
    # a tmpfs over /tmp/ray that only this command sees: Ray's logs take ~0.1-0.25 MiB, Tune's staged state of this
    # comparison grows to ~0.7-0.85 MiB (its peak ~1 MiB in all): 640 KiB fills mid-run, with room for Ray to start
    p = on_small_disk(args, Path("/tmp/ray"), "640k", tmp_path, timeout=300)
    assert "Traceback" not in p.stderr, p.stderr[-4000:]
    if p.returncode == 0:  # on a loaded machine the folder may fill only at Tune's last snapshot, after every trial ended
        assert "Experiment state snapshotting failed: No space left on device" in p.stderr, p.stderr[-4000:]  # one line (search/tune.py)
        assert "Report: " in p.stdout, p.stdout[-3000:]
        return
    assert p.returncode == 2, p.stderr[-4000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("awnn compare: error:")]
    assert "No space left on device" in line and f"--storage {tmp_path / 'st'}: " in line, line
    assert re.search(r"Ray's temporary folder /tmp/ray/session_\S+: [0-9.]+ \w?B free of 640\.0 KiB", line), line
    assert "RAY_TMPDIR" in line and "--resume" in line, line
