"""The paper's Fixed+ (App. D): the config the `fixedplus` arm re-trains.

No search of its own: after the awnn arm, a fixed-width network with the
selected AWNN config's layers, activation, batch size and learning rate and
the width AWNN learned, re-trained R times with the fixed protocol
(search/phases.py calls `fixedplus_config` for its re-training phase).
"""
from __future__ import annotations

from typing import Any, Mapping

from tracking.contract import SELECTABLE, fold_of_key

from .budget import Budget
from .protocol import budget_config
from .strategies import Arm

__all__ = ["fixedplus_config"]


def fixedplus_config(arm: Arm, selected: Mapping[str, Any] | None, outcomes: list[Mapping[str, Any]],
                     budget: Budget) -> dict[int | None, dict[str, Any]]:
    """The paper's Fixed+ (App. D) as a "selected" trial per outer fold (None:
    the hold-out): the fixed grid's first config, with the keys it shares with
    the AWNN arm's selected config taken from that config (layers, activation,
    batch size, learning rate, ...) and the width AWNN learned: over the AWNN
    re-training runs of that fold that finished with widths at their selected
    epoch, the mean of their mean over hidden layers (`mean`), or each
    layer's mean (`per-layer`: `layer_widths`).  Empty when there is none."""
    if not selected:
        return {}
    by_fold: dict[int | None, list[list[int]]] = {}
    for o in outcomes:
        w = o.get("widths_at_best")
        if o.get("status") in SELECTABLE and isinstance(w, (list, tuple)) and w:
            by_fold.setdefault(fold_of_key(o.get("key", "")), []).append([int(v) for v in w])
    src_cfg = dict(selected.get("config") or {})
    base = dict(arm.grid.configs()[0])
    shared = {k: src_cfg[k] for k in arm.grid.grid if k in src_cfg and k != "width"}
    out: dict[int | None, dict[str, Any]] = {}
    for fold, runs in sorted(by_fold.items(), key=lambda kv: -1 if kv[0] is None else kv[0]):
        layers = min(len(w) for w in runs)
        per_layer = [max(1, round(sum(w[i] for w in runs) / len(runs))) for i in range(layers)]
        mean = max(1, round(sum(sum(w[:layers]) / layers for w in runs) / len(runs)))
        cfg = {**base, **shared, "model": "fixed", "width": mean}
        if arm.options.fixedplus_widths == "per-layer":
            cfg["layer_widths"] = ",".join(map(str, per_layer))
        if fold is not None:
            cfg["fold"] = fold
        cfg = budget_config(cfg, arm.grid, budget)
        key = f"from-{selected.get('key', 'awnn')}" if fold is None else f"f{fold}-from-awnn"
        out[fold] = {"key": key, "config": cfg, "index": -1, "status": "ok", "learned_widths": per_layer, "runs": len(runs)}
    return out
