"""A trial run's description in the MLflow UI (tag `mlflow.note.content`,
Markdown, shown at the top of the run's page): which of its metrics are
curves over the epochs and which are one number at its last epoch, and
what the less obvious ones mean.  MLflow has no per-metric descriptions, so
this is where a user opening a trial learns them (docs/tracking.md has the
full list)."""
from __future__ import annotations

from typing import Any

from .contract import Metric as M

__all__ = ["trial_note"]


def _names(*names: str) -> str:
    return ", ".join(f"`{n}`" for n in names)


def trial_note(params: dict[str, Any], spec: dict[str, Any]) -> str:
    """The description of the trial run of `spec` (the search's trial spec) with these params."""
    awnn = params.get("model") == "awnn"
    kind = "AWNN" if awnn else "Fixed-width"
    head = f"**{kind} trial `{spec['key']}`** ({spec['phase']}) of arm `{spec['strategy']}`."
    loss = (f"`{M.TRAIN_NLL}` is the training data loss (mean cross-entropy), the one to compare across fixed and AWNN runs; "
            f"`{M.TRAIN_PRIOR}` the priors' terms / N; `{M.TRAIN_LOSS}` = their sum, the objective minimised."
            if awnn else
            f"`{M.TRAIN_NLL}` is the training data loss (mean cross-entropy), the one to compare across fixed and AWNN runs; "
            f"here `{M.TRAIN_LOSS}` is the same (a fixed network has no prior terms).")
    layers = "`width_<layer>`, `rate_<layer>` (the learned width and rate of each adaptive layer)" if awnn else "`width_<layer>` (constant)"
    per_epoch = (f"**Curves, step = epoch:** {_names(M.TRAIN_NLL, *((M.TRAIN_PRIOR,) if awnn else ()), M.TRAIN_LOSS, M.TRAIN_ACC, M.VAL_LOSS, M.VAL_ACC, M.WIDTH_TOTAL)}, "
                 f"{layers}, `{M.TRAIN_SECONDS}` (training seconds so far; its last value is the trial's). {loss}")
    once = (f"**One value, at the last epoch:** {_names(M.BEST_VAL_ACC, M.BEST_VAL_LOSS, M.BEST_EPOCH)} (the selected epoch), "
            f"`{M.TEST_ACC}` (re-training runs: at the selected epoch), {_names(M.EPOCHS_RUN, M.FINAL_WIDTH_TOTAL)} and the cost: "
            f"`{M.DEVICE_HOURS}` (what the comparison's savings count), {_names(M.COMPUTE_SECONDS, M.CPU_SECONDS, M.WALL_DEVICE_HOURS, M.GPU_HOURS, M.ATTEMPTS, M.RETRIES)}.")
    return f"{head}\n\n{per_epoch}\n\n{once}\n\nEvery name: docs/tracking.md, \"What MLflow holds\"."
