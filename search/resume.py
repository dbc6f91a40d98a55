"""What earlier drivers of a comparison left behind, read back from MLflow
for `--resume`, in one typed record.

An earlier driver may have ended anywhere: killed (SIGKILL, a lost login),
interrupted (Ctrl-C, SIGTERM), or failed, in any phase of any arm, between
arms, or after the comparison was finished (while its report was written).
What it did is in MLflow; this module reads it back:

* `finished`: every trial run with a terminal status, as the outcome the
  protocol needs (the same dict the tracking callback builds);
* `reruns`: trials whose run was left open (or closed as interrupted by an
  interrupted driver and never re-run) with what a re-run needs: its config,
  its grid index and the newest checkpoint of the earlier attempt (a fused
  trial's: its group's, search/fusion.py);
* `wall_seconds`: the seconds the earlier drivers spent in each sweep and in
  the whole comparison (the `wall_seconds` metric they logged as they went),
  so that an arm's wall time adds up over all attempts.

Runs left open by a dead driver are closed here as `interrupted` (MLflow
status KILLED), and the comparison and its unfinished sweeps are reopened
(RUNNING, `awnn.state=running`), all through the driver's single writer.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tracking.contract import TERMINAL, Tag, parse_param, tag_equals
from tracking.store import TrackingWriter

__all__ = ["Rerun", "PriorAttempts", "read_prior_attempts"]

# trial statuses that end a trial for good (an `interrupted` trial is run again)


@dataclass
class Rerun:
    """A trial an earlier driver started but did not finish."""

    config: dict[str, Any]
    index: int
    checkpoint: str | None = None


@dataclass
class PriorAttempts:
    """Everything `--resume` takes over from the earlier drivers (empty for a new comparison)."""

    finished: dict[str, dict[str, Any]] = field(default_factory=dict)  # writer key -> outcome
    reruns: dict[str, Rerun] = field(default_factory=dict)  # writer key -> what a re-run needs
    wall_seconds: dict[str, float] = field(default_factory=dict)  # "cmp" or "<arm>/<phase>" -> seconds
    finished_sweeps: set[str] = field(default_factory=set)  # "<arm>/<phase>" whose run is finished
    reopened_sweeps: set[str] = field(default_factory=set)  # "<arm>/<phase>" an earlier driver left unfinished

    def wall(self, key: str) -> float:
        return self.wall_seconds.get(key, 0.0)


def read_prior_attempts(client, experiment_id: str, comparison: str, writer: TrackingWriter,
                        find_checkpoint: Callable[[str, str | None], str | None], log: Callable[[str], None]) -> PriorAttempts:
    """Read comparison `comparison`'s runs; close what the dead driver left
    open and reopen its unfinished sweeps (writes go through `writer`)."""
    prior = PriorAttempts()
    runs = client.search_runs([experiment_id], filter_string=tag_equals((Tag.COMPARISON, comparison)), max_results=50000)
    closed = 0
    for run in runs:
        tags, metrics = run.data.tags, run.data.metrics
        key = tags.get(Tag.KEY)
        kind = tags.get(Tag.KIND)
        if not key:
            continue
        if kind == "comparison":
            prior.wall_seconds["cmp"] = float(metrics.get("wall_seconds", 0.0))
            continue
        if kind == "sweep":
            writer.adopt(key, run.info.run_id)
            prior.wall_seconds[key] = float(metrics.get("wall_seconds", 0.0))
            if tags.get(Tag.STATE) == "finished":
                prior.finished_sweeps.add(key)
            else:
                writer.reopen_run(key)
                writer.set_tags(key, {Tag.STATE: "running"})
                prior.reopened_sweeps.add(key)
            continue
        status = tags.get(Tag.STATUS, "running")
        if status in TERMINAL:
            if run.info.status == "RUNNING":  # the driver died between tagging the trial's ending and closing its run
                stale = f"stale/{run.info.run_id}"
                writer.adopt(stale, run.info.run_id)
                writer.end_run(stale, "FAILED" if status == "failed" else "FINISHED")
                closed += 1
            if key in prior.finished:  # two finished runs for one trial cannot happen; keep the first, as the analysis does
                continue
            prior.finished[key] = {
                "key": tags.get(Tag.TRIAL_KEY), "status": status, "index": _index(run.data.params),
                "config": _config(run), **dict(metrics),
                "widths": _json_tag(tags, Tag.WIDTHS), "widths_at_best": _json_tag(tags, Tag.WIDTHS_AT_BEST),
            }
            continue
        if status != "interrupted":  # left open by a driver that died: close it
            stale = f"stale/{run.info.run_id}"
            writer.adopt(stale, run.info.run_id)
            writer.set_tags(stale, {Tag.STATUS: "interrupted"})
            writer.end_run(stale, "KILLED")
            closed += 1
        # run again with the same config (a TPE trial's config is in no grid order), from its newest checkpoint
        prior.reruns[key] = Rerun(config=_config(run), index=_index(run.data.params), checkpoint=find_checkpoint(key, tags.get(Tag.GROUP)))
    for key in prior.finished:  # a trial interrupted once and finished later needs no re-run
        prior.reruns.pop(key, None)
    log(f"resume: comparison {comparison}: {len(prior.finished)} trials already finished, "
        f"{len(prior.reruns)} interrupted trials to re-run" + (f" ({closed} runs the earlier driver left open closed as interrupted)" if closed else ""))
    return prior


def find_checkpoint(storage: str, comparison: str, writer_key: str, group: str | None = None) -> str | None:
    """The newest checkpoint an earlier attempt of this trial left in local storage:
    <storage>/<comparison id>[-r<attempt>]/<arm>-<trial key>/checkpoint_* (see search.tune.run_plan);
    a fused trial's (tag awnn.group): its group's, <arm>-<group key>/checkpoint_*."""
    if "://" in storage:
        return None
    arm, _phase, trial = writer_key.split("/", 2)
    trial = group or trial
    best = None
    for d in Path(storage).glob(f"{comparison}*/{arm}-{trial}/checkpoint_*"):
        if (d / "trainer.pt").exists() and (best is None or d.stat().st_mtime > best.stat().st_mtime):
            best = d
    return str(best) if best else None


def _config(run) -> dict[str, Any]:
    """The trial's config as the search gave it (tag awnn.config), so that a
    resumed comparison selects and records exactly what an uninterrupted one
    does; runs logged before that tag existed: from the params."""
    if Tag.CONFIG in run.data.tags:
        return json.loads(run.data.tags[Tag.CONFIG])
    return config_from_params(run.data.params)


def config_from_params(params: dict[str, str]) -> dict[str, Any]:
    """A trial's TrainConfig from its MLflow params (strings back to numbers)."""
    from awnn.config import TrainConfig

    keys = set(TrainConfig.keys())
    return {k: parse_param(v) for k, v in params.items() if k in keys}


def _index(params: dict[str, str]) -> int:
    return int(float(params.get("grid_index", -1)))


def _json_tag(tags: dict[str, str], name: str):
    return json.loads(tags[name]) if name in tags else None


