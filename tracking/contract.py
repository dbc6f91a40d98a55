"""The tracking contract: the names this project writes to MLflow and reads
back, in one place - tags (`Tag`), metrics (`Metric`), the params beyond a
trial's TrainConfig keys (`Param`), the status sets, arm naming, the
default store and experiment, the client factory, `redact_uri` and the
assessment summary (README "What MLflow holds").

Words used throughout the code:

* a *family* is a search method: fixed, awnn, tpe, asha, random (tag
  `awnn.strategy`);
* an *arm* is one run of a family inside a comparison: the family's name, or
  `<family>.r<k>` for repeat k of a stochastic family run `--repeats N`
  times (tag `awnn.arm`; comparisons written before arms existed have none,
  and their arm is the family);
* run kinds (tag `awnn.kind`): a comparison, which holds one sweep per arm
  and phase, which holds the trials.

Trial statuses (tag `awnn.status`): `running` while it trains; one of
TERMINAL once it has ended (`stopped`: ended early on purpose by an early-
stopping scheduler such as ASHA); `interrupted` when its driver stopped
before it ended, or its environment ended it (FAULT_KINDS: its data could
not be read, a checkpoint could not be written for want of room or
permission, or its worker process was lost more often than --max-failures
allows): the run is KILLED and `--resume` runs the trial again.
Only SELECTABLE trials' scores are used to select a config or to report
test accuracy.
"""
from __future__ import annotations

import errno
import logging
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "PHASES", "STATUSES", "TERMINAL", "SELECTABLE", "FAULT_KINDS", "STORAGE_ERRNOS", "NO_ROOM_ERRNOS", "DENIED_ERRNOS", "storage_fault_errno", "storage_fault_text", "lost_worker", "environment_failure", "experiment_name", "default_tracking_uri", "tracking_uri_source", "client",
           "redact_uri", "arm_name", "arm_family", "parse_param", "Tag", "TAGS", "tag_equals", "Metric", "METRICS", "PER_LAYER",
           "ARM_HEADLINE", "arm_metric", "savings_metric", "budget_metric", "paper_metric",
           "EPOCH_METRICS", "FINAL_SCORES", "FINAL_METRICS", "is_epoch_metric", "TRUNCATION", "STATUS_COUNTS", "is_metric", "Param", "PARAMS", "TRIAL_PARAMS", "SEARCH_OPTIONS", "assessment_summary", "MlflowTag", "MODEL_ARTIFACT", "MODEL_FILE",
           "fold_key", "fold_of_key"]

KINDS = ("comparison", "sweep", "trial")
PHASES = ("selection", "assessment")
TERMINAL = ("ok", "diverged", "width_capped", "failed", "stopped")
STATUSES = (*TERMINAL, "interrupted", "running")
SELECTABLE = ("ok", "width_capped")
# a trial's final `error_kind` when its environment ended it, not its config: its data cannot be read ("data"), a
# checkpoint cannot be written ("storage"), or its worker process was lost (killed, out of memory, its node died)
# more often than --max-failures allows ("lost").  No retry on the same machines fixes it: the driver stops the
# comparison and closes the trial's run as `interrupted`, and `--resume` runs it again once the data, the disk or
# the nodes are fixed (search/trial.py, tracking/callback.py).
# A fourth, "environment": its process could not import the trial's code or start a thread (a module missing on its
# node, a library or a thread's stack it could not map under an address-space limit, `ulimit -v`): environment_failure.
FAULT_KINDS = ("data", "storage", "lost", "environment")
# "storage": a write that failed for want of room (no space left, a disk quota) or of permission (a read-only disk,
# a folder this user may not write, e.g. after a chmod, an immutable folder, a node whose mount maps the user to nobody)
NO_ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DENIED_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)
STORAGE_ERRNOS = NO_ROOM_ERRNOS + DENIED_ERRNOS


def storage_fault_errno(text: str) -> int | None:
    """The errno (STORAGE_ERRNOS) an error's text (e.g. a Ray trial's error) names, no room first, or None."""
    low = text.lower()
    return next((code for code in STORAGE_ERRNOS if os.strerror(code) in text or f"[errno {code}]" in low), None)


def storage_fault_text(text: str) -> bool:
    """Does an error's text (e.g. a Ray trial's error) say a write failed for want of room or permission?"""
    return storage_fault_errno(text) is not None


MEMORY_MONITOR_SAYS = "killed due to the node running low on memory"  # Ray's memory monitor's OutOfMemoryError (Ray 2.x)


def memory_monitor_kill(text: str) -> str | None:
    """The line of a trial's error text saying that Ray's memory monitor killed
    its worker, or None.  Ray Tune keeps no pickled error for that kill (only
    for task and actor errors: Ray 2.60 Trial.handle_error), so its text is
    what the driver has."""
    return next((ln.strip() for ln in text.splitlines() if MEMORY_MONITOR_SAYS in ln), None)


def environment_failure(error: BaseException | None, text: str = "") -> str | None:
    """The line saying that a trial's process could not import its code or start a thread, or None: an ImportError
    (ModuleNotFoundError included) or Python's "can't start new thread" in `error`'s chain (a Ray task error's `cause`,
    its causes and contexts), else a last line of `text` (the trial's error text) naming one; or, in either, Ray's
    report that a worker could not load the trial's actor class (`_actor_import_failure`).  No config causes it and
    no retry on that node cures it: a module missing there, another version of the project there, a library or a
    thread's stack that could not be mapped into memory (`ulimit -v`), a limit on threads (`ulimit -u`, a container's)."""
    seen: set[int] = set()
    todo: list = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ImportError) or (isinstance(e, RuntimeError) and _NO_THREAD in str(e).lower()):
            cause = getattr(e, "cause", None)
            e = cause if isinstance(cause, BaseException) and type(cause) in type(e).__mro__ else e  # (a RayTaskError(X): X)
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            return f"{type(e).__name__}: {lines[-1][:300] if lines else 'no detail'}"
        found = _actor_import_failure(str(e))  # (a lost actor's error: its worker's exit detail carries the traceback)
        if found:
            return found
        todo += [x for x in (getattr(e, "cause", None), e.__cause__, e.__context__) if isinstance(x, BaseException)]
    last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
    if _names_environment_failure(last):
        return last[:300]
    return _actor_import_failure(text)


_NO_THREAD = "can't start new thread"  # CPython's RuntimeError when the OS refuses a thread (its stack unmapped, a limit)
# Ray's words when a worker cannot load an actor's class (Tune's trial actor: its module, or one it imports, missing on
# that node): Ray gives the actor a placeholder class whose every method raises this, with the import's traceback, and
# the worker then exits; the trial's error is the actor's death (ActorDiedError), its text ending in Ray's own line
_RAY_ACTOR_IMPORT = "failed to import on the worker"


def _names_environment_failure(line: str) -> bool:
    return bool(re.match(r"(\w+\.)*(ImportError|ModuleNotFoundError)\b", line)) or _NO_THREAD in line.lower()


def _actor_import_failure(text: str) -> str | None:
    """The import failure a text of Ray's placeholder actor reports (its innermost ImportError line, else Ray's own)."""
    at = text.find(_RAY_ACTOR_IMPORT)
    if at < 0:
        return None
    lines = [ln.strip() for ln in text[at:].splitlines() if ln.strip()]
    found = next((ln for ln in lines if _names_environment_failure(ln)), None)
    if found:
        return found[:300]
    start = text.rfind("\n", 0, at) + 1
    return text[start:at + len(_RAY_ACTOR_IMPORT)].strip()[:300]


def lost_worker(error: BaseException | None) -> bool:
    """Is `error` (a Ray trial's error) the loss of the trial's worker process
    rather than an exception of its own code: the process killed or crashed,
    its node dead, or Ray's memory monitor killing it?  A RayTaskError counts
    when its cause is such a loss (a Python exception of the trial does not)."""
    rx = sys.modules.get("ray.exceptions")  # not imported: no Ray error (and no import of Ray from a log filter)
    if error is None or rx is None:
        return False

    lost = tuple(getattr(rx, name) for name in ("RayActorError", "NodeDiedError", "WorkerCrashedError", "OutOfMemoryError",
                                                "LocalRayletDiedError", "ObjectLostError") if hasattr(rx, name))
    if isinstance(error, rx.RayTaskError):  # an exception raised in the trial: a loss only if it carries one
        return isinstance(getattr(error, "cause", None), lost)
    return isinstance(error, lost)
# a re-training run's kept model: artifact folder `model/` of its trial run, file `model.pt` (awnn.models.load_model)
MODEL_ARTIFACT, MODEL_FILE = "model", "model.pt"


def experiment_name(task: str) -> str:
    """The MLflow experiment of a task's comparisons."""
    return f"awnn-{task}"


def default_tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else a SQLite file in the working directory."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def tracking_uri_source(given: str | None) -> str:
    """Where the tracking URI a command uses came from, for its messages: the
    option, the environment, or the default (see default_tracking_uri)."""
    if given:
        return "--tracking-uri"
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return "MLFLOW_TRACKING_URI"
    return "the default tracking store (no --tracking-uri, no MLFLOW_TRACKING_URI)"


def client(uri: str):
    """An MLflow client for `uri` (MLflow is imported on first use).

    Against a tracking server MLflow 3 prints two lines ("View run ... at:",
    "View experiment at:") to stdout for every run it ends, each after one more
    request for the run: 2 lines per trial, hundreds in a comparison, between
    the progress lines.  The comparison's summary names the store once; MLflow's
    public MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT turns them off, unless the
    user set it.

    On a new SQLite file MLflow logs two INFO lines of its own format
    ("2026/11/27 17:51:47 INFO mlflow.store.db.utils: Creating initial MLflow
    database tables...", "... Updating database tables") before the
    command's first line; the command names the store itself.  That logger
    is set to WARNING (its errors stay), unless the user set its level."""
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    schema_log = logging.getLogger("mlflow.store.db.utils")
    if schema_log.level == logging.NOTSET:
        schema_log.setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def redact_uri(uri: str) -> str:
    """The URI without credentials (user:password@, and query keys such as
    secret_key or password), for logs, params and reports."""
    uri = re.sub(r"://[^/@]+@", "://***@", uri)
    return re.sub(r"([?&](?:access_key|secret_key|session_token|password)=)[^&]*", r"\1***", uri)


def arm_name(family: str, repeat: int, repeats: int) -> str:
    """Repeat `repeat` (1-based) of `family` run `repeats` times: `tpe.r2`, or `tpe` when it runs once."""
    return family if repeats == 1 else f"{family}.r{repeat}"


def arm_family(arm: str) -> str:
    """The family of an arm: `tpe.r2` -> `tpe`, `fixed` -> `fixed`."""
    m = re.fullmatch(r"(.+)\.r\d+", arm)
    return m.group(1) if m else arm


def fold_key(fold: int | None, key: str) -> str:
    """A trial key within outer fold `fold` of a cross-validated protocol
    (`f3-sel-0007`, `f3-ass-01`); the key itself under a hold-out (None)."""
    return key if fold is None else f"f{int(fold)}-{key}"


def fold_of_key(key: str) -> int | None:
    """The outer fold a trial key belongs to (`f3-ass-01` -> 3), None under a hold-out."""
    m = re.match(r"f(\d+)-", str(key))
    return int(m.group(1)) if m else None


def parse_param(v: str) -> Any:
    """An MLflow param (always a string) back to the int, float or bool it was logged as."""
    for cast in (int, float):
        try:
            return cast(v)
        except (TypeError, ValueError):
            pass
    if v in ("True", "False"):
        return v == "True"
    return v


class Tag:
    """Every MLflow tag name this project writes, one owner (what each holds:
    the README's tracking contract).  Writers and readers use these names,
    never the strings (tests/tracking/test_contract.py checks)."""

    ARM = "awnn.arm"
    ARMS = "awnn.arms"
    ATTEMPTS = "awnn.attempts"
    BUDGET = "awnn.budget"
    COMMAND = "awnn.command"
    COMPARISON = "awnn.comparison"
    COMPARISON_KEY = "awnn.comparison_key"
    CONFIG = "awnn.config"
    ERROR = "awnn.error"
    GROUP = "awnn.group"  # a fused trial's group (--fuse): the Ray trial's key, e.g. fuse-sel-0000 (search/fusion.py)
    DEPENDS_ON = "awnn.depends_on"  # sweep runs of an arm whose cost includes another arm's (fixedplus: awnn)
    DRIVER = "awnn.driver"  # a comparison's driver, `<host>|<pid>` (search/lease.py)
    HEARTBEAT = "awnn.heartbeat"  # when its driver last said it works on it, Unix seconds (search/lease.py)
    HIT_MAX_WIDTH = "awnn.hit_max_width"
    KEY = "awnn.key"
    KIND = "awnn.kind"
    LAST_ERROR = "awnn.last_error"
    NODE_ID = "awnn.node_id"
    NODE_IP = "awnn.node_ip"
    NODES = "awnn.nodes"
    ORDER = "awnn.order"
    PHASE = "awnn.phase"
    PID = "awnn.pid"
    PROFILE = "awnn.profile"
    REPEAT = "awnn.repeat"
    REPEATS = "awnn.repeats"
    RESUMED_FROM = "awnn.resumed_from"
    RETRIES = "awnn.retries"
    # which loop trained a trial: lean (awnn.lean, the stacked trainer at N = 1), trainer (awnn.train.Trainer with its lean
    # Adam and written-out step), reference (awnn.train.Trainer with lean=False: AWNN_LEAN_TRIALS=0), fused
    TRAINER = "awnn.trainer"
    # the CPU that trained it: model and torch's kernel ISA (awnn/machine.py), e.g. `AMD EPYC (AVX512)`; attempts on
    # different CPUs joined by "; " (float results differ between CPU models)
    CPU = "awnn.cpu"
    SELECTED_BY_FOLD = "awnn.selected_by_fold"
    SELECTED_CONFIG = "awnn.selected_config"
    SELECTED_KEY = "awnn.selected_key"
    STATE = "awnn.state"
    STATUS = "awnn.status"
    STOPS_EARLY = "awnn.stops_early"
    STRATEGIES = "awnn.strategies"
    STRATEGY = "awnn.strategy"
    TASK = "awnn.task"
    SAVINGS_BASELINE = "awnn.savings_baseline"  # comparison run: the arm its savings are against (tracking/savings.py), or `none`
    TRIAL_KEY = "awnn.trial_key"
    WARM_PIDS = "awnn.warm_pids"
    WIDTHS = "awnn.widths"
    WIDTHS_AT_BEST = "awnn.widths_at_best"


TAGS = tuple(v for k, v in vars(Tag).items() if k.isupper())


class MlflowTag:
    """MLflow's own context tags, which this project sets on every run it
    starts (tracking/store.py context_tags), as MLflow's fluent API would."""

    USER = "mlflow.user"
    SOURCE_NAME = "mlflow.source.name"
    SOURCE_TYPE = "mlflow.source.type"
    GIT_COMMIT = "mlflow.source.git.commit"
    NOTE = "mlflow.note.content"  # a run's description in the MLflow UI: the comparison run's verdict (tracking/report.log_report)


class Metric:
    """Every MLflow metric name this project writes (README "What MLflow holds").

    Trial runs: EPOCH_METRICS and the PER_LAYER names per epoch (step =
    epoch; the trainer's epoch records, logged as they come), FINAL_METRICS
    once (step = the last epoch); no name is in both.  Sweep runs: counts by
    status, cost, wall time, and on assessment sweeps the test-accuracy
    summary.  The comparison run: wall_seconds."""

    # per epoch (trial)
    TRAIN_LOSS = "train_loss"  # the objective minimised: train_nll (+ train_prior for AWNN)
    # re-training runs of an adaptive MLP: post-hoc truncation of the kept model (paper 5.4), step = % of each layer's neurons kept
    TRUNC_TEST_ACC = "trunc_test_acc"
    TRUNC_WIDTH_TOTAL = "trunc_width_total"
    TRUNC_PARAMS = "trunc_params"
    TRUNC_INFER_US = "trunc_infer_us"  # measured inference time per test sample, microseconds
    TRAIN_NLL = "train_nll"  # the ELBO's data term alone (mean cross-entropy): comparable across fixed and AWNN
    TRAIN_PRIOR = "train_prior"  # AWNN: train_loss - train_nll, the priors' terms / N
    TRAIN_ACC = "train_acc"
    VAL_LOSS = "val_loss"
    VAL_ACC = "val_acc"
    WIDTH_TOTAL = "width_total"
    TRAIN_SECONDS = "train_seconds"  # training seconds so far (summed over attempts): its last value is the trial's
    GPU_MEM_MIB = "gpu_mem_mib"  # GPU trials: peak GPU memory allocated so far
    # final (trial)
    TEST_ACC = "test_acc"
    TEST_LOSS = "test_loss"
    BEST_VAL_ACC = "best_val_acc"  # (runs written before EPOCH_METRICS also have it per epoch: the running best)
    BEST_VAL_LOSS = "best_val_loss"
    BEST_EPOCH = "best_epoch"
    EPOCHS_RUN = "epochs_run"
    N_TRAIN = "n_train"
    FINAL_WIDTH_TOTAL = "final_width_total"
    COMPUTE_SECONDS = "compute_seconds"
    DEVICE_HOURS = "device_hours"  # CPU trials: CPU_SECONDS (capped at wall x CPUs) / 3600; GPU trials: WALL_DEVICE_HOURS
    CPU_SECONDS = "cpu_seconds"  # CPU time the trial's process spent training, every attempt (tracking/callback.py)
    WALL_DEVICE_HOURS = "wall_device_hours"  # compute_seconds x allocated CPUs (or x the GPU share) / 3600: counts machine load
    GPU_HOURS = "gpu_hours"
    ATTEMPTS = "attempts"
    RETRIES = "retries"
    # sweep (and comparison: wall_seconds)
    N_TRIALS = "n_trials"
    N_OK = "n_ok"
    N_DIVERGED = "n_diverged"
    N_FAILED = "n_failed"
    N_WIDTH_CAPPED = "n_width_capped"
    N_STOPPED = "n_stopped"
    WALL_SECONDS = "wall_seconds"
    TEST_ACC_MEAN = "test_acc_mean"
    TEST_ACC_STD = "test_acc_std"
    RUNS_OK = "runs_ok"
    TPE_REPEATS = "tpe_repeats"  # a tpe selection sweep: its study's asks of a config trained already, not trained (search/tpe.py)


METRICS = tuple(v for k, v in vars(Metric).items() if k.isupper())
# the comparison run's headline metrics (logged with its report, so the MLflow runs table answers the question),
# `<arm>.<name>` for each arm; test accuracy both as a fraction (test_acc_mean, as the trial runs' test_acc) and
# in % as the terminal and the report show it (test_acc_pct, test_acc_std_pct)
ARM_HEADLINE = ("selection_device_hours", "total_device_hours", "test_acc_mean", "test_acc_std", "test_acc_pct", "test_acc_std_pct",
                "test_runs", "width_total", "trials", "truncation_cut_pct")
# and its savings against the comparison's baseline (tracking/savings.py: the baseline's device-hours / the arm's,
# > 1 = cheaper): `<arm>.savings_vs_<baseline>`, `<arm>.total_savings_vs_<baseline>`, each with `_lo` / `_hi`
SAVINGS_KINDS = ("savings", "total_savings")
SAVINGS_BOUNDS = ("", "_lo", "_hi")


def arm_metric(arm: str, name: str) -> str:
    """The comparison run's headline metric `name` of arm `arm`."""
    return f"{arm}.{name}"


def savings_metric(arm: str, baseline: str, kind: str = "savings", bound: str = "") -> str:
    """`awnn.savings_vs_fixed`, `awnn.total_savings_vs_fixed_lo`: an arm's savings against the baseline on the comparison run."""
    assert kind in SAVINGS_KINDS and bound in SAVINGS_BOUNDS
    return f"{arm}.{kind}_vs_{baseline}{bound}"


_SAVINGS_NAME = re.compile(r".+\.(?:total_)?savings_vs_[^.]+(?:\.r\d+)?(?:_lo|_hi)?")

# the comparison run's verdict against the budget (tracking/budget_curve.py): per arm and share f of each trial's epochs
# `budget_curve.<arm>.f<f>.<BUDGET_ARM>` and `budget_curve.<arm>.f<f>.savings_vs_<baseline>`, and BUDGET_STILL_MOVING (1 or 0);
# the paper-budget projection (tracking/paper_projection.py): `paper_budget.<arm>.<PAPER_ARM>`
BUDGET_ARM = ("best_val_acc", "selection_device_hours")
BUDGET_STILL_MOVING = "budget_still_moving"
PAPER_ARM = ("device_hours", "wall_hours")


def budget_metric(arm: str, fraction: float, name: str) -> str:
    """`budget_curve.fixed.f0.125.best_val_acc`, `budget_curve.awnn.f0.5.savings_vs_fixed`."""
    return f"budget_curve.{arm}.f{fraction:g}.{name}"


def paper_metric(arm: str, name: str) -> str:
    """`paper_budget.awnn.device_hours`: the paper budget's projected cost of an arm."""
    return f"paper_budget.{arm}.{name}"


_BUDGET_NAME = re.compile(r"budget_curve\.(.+)\.f[0-9.]+\.(\w+)")

# a re-training run's truncation curve (step = % of neurons kept): tracking/truncation.py reads them
TRUNCATION = (Metric.TRUNC_TEST_ACC, Metric.TRUNC_WIDTH_TOTAL, Metric.TRUNC_PARAMS, Metric.TRUNC_INFER_US)
PER_LAYER = ("width_", "rate_")  # + the layer's name: per-epoch width and rate of each adaptive layer
# a trial run's series, step = epoch (what changes from epoch to epoch; train_nll first: the data loss, comparable across models)
EPOCH_METRICS = (Metric.TRAIN_NLL, Metric.TRAIN_PRIOR, Metric.TRAIN_LOSS, Metric.TRAIN_ACC, Metric.VAL_LOSS, Metric.VAL_ACC,
                 Metric.WIDTH_TOTAL, Metric.TRAIN_SECONDS, Metric.GPU_MEM_MIB)
# the final metrics a trial run gets from the trainer's final summary (the cost metrics come from the callback)
FINAL_SCORES = (Metric.TEST_ACC, Metric.BEST_VAL_ACC, Metric.BEST_VAL_LOSS, Metric.BEST_EPOCH, Metric.EPOCHS_RUN, Metric.N_TRAIN, Metric.TEST_LOSS)
# every metric a trial run gets once, at step = its last epoch
FINAL_METRICS = (*FINAL_SCORES, Metric.FINAL_WIDTH_TOTAL, Metric.COMPUTE_SECONDS, Metric.CPU_SECONDS, Metric.DEVICE_HOURS,
                 Metric.WALL_DEVICE_HOURS, Metric.GPU_HOURS, Metric.ATTEMPTS, Metric.RETRIES)
# the sweep-run counts of trials by status
STATUS_COUNTS = {"ok": Metric.N_OK, "diverged": Metric.N_DIVERGED, "failed": Metric.N_FAILED,
                 "width_capped": Metric.N_WIDTH_CAPPED, "stopped": Metric.N_STOPPED}


def is_epoch_metric(name: str) -> bool:
    """Is `name` one of a trial run's per-epoch series (EPOCH_METRICS, or a per-layer width or rate)?"""
    return name in EPOCH_METRICS or (name not in METRICS and any(name.startswith(p) and len(name) > len(p) for p in PER_LAYER))


def is_metric(name: str) -> bool:
    """Is `name` a metric of the contract (a per-layer one included)?"""
    if name in METRICS or any(name.startswith(p) and len(name) > len(p) for p in PER_LAYER):
        return True
    m = _BUDGET_NAME.fullmatch(name)
    if m:
        return m.group(2) in BUDGET_ARM or m.group(2).startswith("savings_vs_")
    if _SAVINGS_NAME.fullmatch(name):
        return True
    if name == BUDGET_STILL_MOVING or (name.startswith("paper_budget.") and name.rpartition(".")[2] in PAPER_ARM and name.count(".") >= 2):
        return True
    arm, _, base = name.rpartition(".")
    return bool(arm) and base in ARM_HEADLINE


class Param:
    """MLflow param names beyond a trial's TrainConfig keys (those are the
    trial run's params, every default filled in: awnn/config.py owns them)."""

    # trial runs
    TRIAL_KEY = "trial_key"
    PHASE = "phase"
    GRID_INDEX = "grid_index"
    # sweep runs
    GRID_FILE = "grid_file"
    GRID_DIGEST = "grid_digest"
    BUDGET = "budget"
    EPOCHS = "epochs"
    RETRAIN_RUNS = "retrain_runs"
    CONFIGS = "configs"
    TRIALS = "trials"
    FAMILY = "family"
    REPEAT = "repeat"
    SEARCH_SEED = "search_seed"
    SELECTED_KEY = "selected_key"
    OPTUNA_STORAGE = "optuna_storage"
    OPTUNA_STUDY = "optuna_study"
    TPE_ASK_WINDOW = "tpe_ask_window"  # its study's trials in flight at most (search/tpe.py, "The ask window")
    TPE_TRIALS = "tpe_trials"
    RANDOM_TRIALS = "random_trials"
    ASHA_GRACE_PERIOD = "asha_grace_period"
    AWNN_ASHA_GRACE_PERIOD = "awnn_asha_grace_period"  # awnn-asha's (the AWNN grid's epochs set its default)
    FIXEDPLUS_WIDTHS = "fixedplus_widths"  # fixedplus: mean | per-layer
    ASHA_REDUCTION_FACTOR = "asha_reduction_factor"
    ASHA_MAX_T = "asha_max_t"
    ASHA_RUNGS = "asha_rungs"
    # comparison run (+ BUDGET, OPTUNA_STORAGE and the SEARCH_OPTIONS)
    TASK = "task"
    STRATEGIES = "strategies"
    CPUS_PER_TRIAL = "cpus_per_trial"
    GPUS_PER_TRIAL = "gpus_per_trial"
    STORAGE = "storage"
    DATA_ROOT = "data_root"
    RAY_ADDRESS = "ray_address"
    SEED = "seed"
    REPEATS = "repeats"
    PROTOCOL = "protocol"  # holdout | cv<k>
    FLUSH_DENORMAL = "flush_denormal"  # trials flushed float denormals on the CPU (awnn/arith.py; --keep-denormals: False)
    FUSE = "fuse"  # --fuse: at most this many selection configs per Ray trial, trained as one stacked model (1: off)
    FOLDS = "folds"  # outer folds (cv<k> only; part of the --resume key)
    DATA_SUMMARY = "data_summary"  # task `table`: what the driver read, one line (rows; features from columns, numeric and text; classes with counts)
    DATA_DIGEST = "data_digest"  # SHA-256 (16 hex) of the data's files on the driver (awnn/data/digest.py; none for data made from a seed); task `table`: part of the --resume key
    FOLDS_DIGEST = "folds_digest"  # digest of the drawn fold of every example (cv<k> only)
    LABEL = "label"  # task `table`: the class label's column --label named, as given (the digest names it where it is not the last)
    DROP_COLUMNS = "drop_columns"  # task `table`: the columns --drop-columns left out, as given (the digest names them too)
    CPU = "cpu"  # the config values a CPU budget changed, JSON (sweep runs: that grid's; comparison: per grid file)
    # comparison run: what the `paper` budget would run, per family, JSON (trials, epochs, epochs_by_hidden_layers,
    # retrain_runs, folds, patience), and the Ray cluster's CPUs and GPUs: the report's paper-budget projection
    PAPER_BUDGET = "paper_budget"
    CLUSTER_CPUS = "cluster_cpus"
    CLUSTER_GPUS = "cluster_gpus"


PARAMS = tuple(v for k, v in vars(Param).items() if k.isupper())
TRIAL_PARAMS = (Param.TRIAL_KEY, Param.PHASE, Param.GRID_INDEX)  # a trial run's params beyond its config
# the comparison-run params of the search options (part of the --resume key when they apply)
SEARCH_OPTIONS = (Param.SEED, Param.REPEATS, Param.TPE_TRIALS, Param.RANDOM_TRIALS, Param.ASHA_GRACE_PERIOD, Param.AWNN_ASHA_GRACE_PERIOD,
                  Param.ASHA_REDUCTION_FACTOR, Param.FIXEDPLUS_WIDTHS, Param.FOLDS, Param.CPU)


def tag_equals(*pairs: tuple[str, str]) -> str:
    """An MLflow search filter: every (tag name, value) pair must match."""
    return " and ".join(f"tags.`{name}` = '{value}'" for name, value in pairs)


def assessment_summary(accs, folds=None) -> dict[str, Any]:
    """The assessment summary of a strategy, as logged on its assessment sweep
    run and as the report shows it: mean and sample standard deviation
    (ddof=1) of the re-training runs' test accuracies, and their number
    (`accs`: the runs with a selectable status and a finite test_acc).  One
    run: std 0; none: NaN.

    Under a cross-validated protocol (`folds`: each run's outer fold, as
    `fold_of_key` reads it from its key; None under a hold-out) the runs of a
    fold are averaged first, and mean and std are over the folds' means, as
    Errica et al. (2020) report them."""
    import statistics

    accs = [float(a) for a in accs]
    folds = list(folds) if folds is not None else []
    if any(f is not None for f in folds):
        by_fold: dict[Any, list[float]] = {}
        for a, f in zip(accs, folds):
            by_fold.setdefault(f, []).append(a)
        means = [statistics.fmean(v) for _, v in sorted(by_fold.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))]
        return {
            Metric.TEST_ACC_MEAN: statistics.fmean(means) if means else math.nan,
            Metric.TEST_ACC_STD: statistics.stdev(means) if len(means) > 1 else (0.0 if means else math.nan),
            Metric.RUNS_OK: len(accs),
        }
    return {
        Metric.TEST_ACC_MEAN: statistics.fmean(accs) if accs else math.nan,
        Metric.TEST_ACC_STD: statistics.stdev(accs) if len(accs) > 1 else (0.0 if accs else math.nan),
        Metric.RUNS_OK: len(accs),
    }
