"""The verdict over draws: one comparison run with several `--train-seed`s.

A comparison's savings CIs resample its trials, not the draw of its training:
how wide an AWNN's trials grow, and so its device-hours, moves with the
training seed (docs/results.md, "How far a seed moves the standard verdict":
over four draws of the standard SpiralHard comparison AWNN's selection was
1.13x-2.52x cheaper than the fixed grid's).  `awnn compare --train-seed S`
runs another draw; this module reads the draws back and says whether the
savings hold over them.

Draws of a comparison are the finished comparisons in its MLflow experiment
(one store or several, e.g. draws run on other machines) with the same task,
budget, arms, repeats, protocol, execution (fuse, resources per trial) and
search options, and another train seed.  Of two finished comparisons with
one seed (the same command run twice: on one CPU model it trains every trial
alike) the newer counts and the other is listed as set aside.

Per draw: each arm's selection and total device-hours, its savings against
the baseline (tracking/savings.py: one definition), its selected config and
its mean test accuracy.  Over the draws, per arm: the range and median of
each savings, in how many draws the arm was cheaper, and the *pooled*
savings: the baseline's mean device-hours over the draws / the arm's (the
cost a user who runs this search many times pays on average).  Draws on
other CPU models are named: their float rounding moves AWNN's trials as much
as a seed does (docs/results.md).
"""
from __future__ import annotations

import errno
import json
import math
import statistics
from pathlib import Path
from typing import Any

from . import contract as C
from .contract import Tag, redact_uri
from .reader import AnalysisError, ComparisonData, find_comparison, load_comparison
from .checks import TrackingUnavailable, check_writable, free_space
from .files import staged_folder
from .fmt import fh, fpct
from .savings import baseline_of, fx, rounded, savings
from .tables import strategy_table

__all__ = ["find_draws", "draws_summary", "draws_markdown", "verdict_line", "write_draws", "MATCH_KEYS"]

# what two comparisons must share to be draws of one comparison (ComparisonData.comparison's keys)
MATCH_KEYS = ("task", "data_digest", "budget", "strategies", "repeats", "protocol", "folds", "search", "fuse", "cpus_per_trial", "gpus_per_trial", "cpu")
_N_BOOT = 200  # each draw's own savings CI is not shown here: a few resamples keep savings() cheap


def _budget_without_seed(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in (info.get("budget_params") or {}).items() if k != "train_seed"}


def _signature(info: dict[str, Any]) -> tuple:
    return tuple(repr(info.get(k)) for k in MATCH_KEYS) + (repr(sorted(_budget_without_seed(info).items())),)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = [k for k in MATCH_KEYS if a.get(k) != b.get(k)]
    if _budget_without_seed(a) != _budget_without_seed(b):
        out.append("budget settings")
    return out


def find_draws(tracking_uris: list[str], comparison: str | None = None, experiment: str | None = None) -> dict[str, Any]:
    """The draws of a comparison (by id, else the newest in `experiment`, else
    the newest in the first store): `draws` (ComparisonData, one per train
    seed, by seed), `set_aside` (id, seed, why) and `first` (the comparison
    asked for).  AnalysisError when it is not finished or has no other draw."""
    if not tracking_uris:
        raise AnalysisError("no tracking store given")
    root, _ = find_comparison(tracking_uris[0], comparison, experiment)
    first = load_comparison(tracking_uris[0], root.data.tags.get(Tag.COMPARISON), history_keys=())
    info = first.comparison
    if info["state"] != "finished":
        raise AnalysisError(f"comparison {info['id']} is {info['state']}, not finished: finish it (`awnn compare ... --resume`) "
                            "before reading its draws")
    want = _signature(info)
    candidates: list[ComparisonData] = [first]
    set_aside: list[dict[str, Any]] = []
    for uri in tracking_uris:
        client = C.client(uri)
        exp = client.get_experiment_by_name(info["experiment"])
        if exp is None:
            continue
        roots = client.search_runs([exp.experiment_id], C.tag_equals((Tag.KIND, "comparison"), (Tag.TASK, info["task"])), max_results=5000)
        for r in roots:
            cid = r.data.tags.get(Tag.COMPARISON)
            if cid == info["id"] or any(c.comparison["id"] == cid for c in candidates):
                continue
            if r.data.tags.get(Tag.STATE) != "finished":
                set_aside.append({"comparison": cid, "train_seed": None, "why": f"not finished ({r.data.tags.get(Tag.STATE, 'unknown')})",
                                  "store": redact_uri(uri)})
                continue
            budget = r.data.tags.get(Tag.BUDGET)
            if budget is not None and info["budget"] is not None and budget != info["budget"]:  # (no need to read its runs)
                set_aside.append({"comparison": cid, "train_seed": None, "store": redact_uri(uri), "why": "another comparison (differs in: budget)"})
                continue
            other = load_comparison(uri, cid, history_keys=())
            if _signature(other.comparison) != want:
                set_aside.append({"comparison": cid, "train_seed": other.comparison["train_seed"], "store": redact_uri(uri),
                                  "why": "another comparison (differs in: " + ", ".join(_differences(info, other.comparison)) + ")"})
                continue
            candidates.append(other)
    by_seed: dict[int, ComparisonData] = {}
    for c in candidates:  # the comparison asked for first, then the others newest first
        seed = c.comparison["train_seed"]
        kept = by_seed.get(seed)
        if kept is None or (kept is not first and (c.comparison["start_time"] or 0) > (kept.comparison["start_time"] or 0)):
            if kept is not None:
                set_aside.append(_same_seed(kept, c))
            by_seed[seed] = c
        else:
            set_aside.append(_same_seed(c, kept))
    if len(by_seed) < 2:
        raise AnalysisError(
            f"comparison {info['id']} ({info['task']}, budget {info['budget']}, train seed {info['train_seed']}) has no other draw in "
            f"{', '.join(redact_uri(u) for u in tracking_uris)}: run the same `awnn compare` with another --train-seed "
            f"(e.g. --train-seed {info['train_seed'] + 1}) and read its draws again")
    return {"first": first, "draws": [by_seed[s] for s in sorted(by_seed)], "set_aside": set_aside}


def _same_seed(dropped: ComparisonData, kept: ComparisonData) -> dict[str, Any]:
    return {"comparison": dropped.comparison["id"], "train_seed": dropped.comparison["train_seed"],
            "why": f"the same train seed as {kept.comparison['id']}, which counts (the comparison asked for, or the newer)"}


def _cpus(data: ComparisonData) -> list[str]:
    runs = data.runs
    return sorted(str(c) for c in set(runs["cpu"].dropna())) if len(runs) and "cpu" in runs else []


def _f(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def draws_summary(found: dict[str, Any]) -> dict[str, Any]:
    """draws.json: `draws` (per train seed: comparison, CPUs, per arm hours,
    savings, selected config, test accuracy), `arms` (per arm other than the
    baseline: savings over the draws), `baseline`, `set_aside`, `verdict`."""
    draws: list[ComparisonData] = found["draws"]
    info = found["first"].comparison
    arms = list(info["strategies"])
    baseline = baseline_of(arms)
    per_draw = []
    for d in draws:
        sv = savings(d, baseline, n_boot=_N_BOOT).set_index("strategy") if baseline else None
        st = strategy_table(d).set_index("strategy") if len(d.runs) else None
        row: dict[str, Any] = {"train_seed": d.comparison["train_seed"], "comparison": d.comparison["id"], "cpus": _cpus(d), "arms": {}}
        for arm in arms:
            mine = d.runs[d.runs["strategy"] == arm] if len(d.runs) else d.runs
            sel = float(mine.loc[mine["phase"] == "selection", "device_hours"].sum()) if len(mine) else 0.0
            tot = float(mine["device_hours"].sum()) if len(mine) else 0.0
            a: dict[str, Any] = {"selection_hours": sel, "total_hours": tot}
            if st is not None and arm in st.index:
                a["test_acc_mean"] = _f(st.loc[arm, "test_acc_mean"])
                a["selected"] = st.loc[arm, "selected_summary"]
            if sv is not None and arm in sv.index:
                a["selection_savings"] = rounded(sv.loc[arm, "selection"])
                a["total_savings"] = rounded(sv.loc[arm, "total"])
            row["arms"][arm] = a
        per_draw.append(row)
    over: dict[str, Any] = {}
    for arm in arms:
        if arm == baseline:
            continue
        entry: dict[str, Any] = {}
        for kind in ("selection", "total"):
            vals = [r["arms"][arm].get(f"{kind}_savings") for r in per_draw]
            vals = [v for v in vals if v is not None and math.isfinite(v)]
            mean_base = statistics.fmean(r["arms"][baseline][f"{kind}_hours"] for r in per_draw)
            mean_arm = statistics.fmean(r["arms"][arm][f"{kind}_hours"] for r in per_draw)
            entry[kind] = {
                "min": min(vals) if vals else None, "median": rounded(statistics.median(vals)) if vals else None, "max": max(vals) if vals else None,
                "cheaper_in": sum(v > 1 for v in vals), "of": len(vals),
                "pooled": rounded(mean_base / mean_arm) if mean_arm > 0 else None,
            }
        accs = [r["arms"][arm].get("test_acc_mean") for r in per_draw]
        accs = [a for a in accs if a is not None]
        entry["test_acc"] = [min(accs), max(accs)] if accs else None
        over[arm] = entry
    if baseline:
        accs = [r["arms"][baseline].get("test_acc_mean") for r in per_draw]
        accs = [a for a in accs if a is not None]
        base_acc = [min(accs), max(accs)] if accs else None
    else:
        base_acc = None
    cpus = sorted({c for r in per_draw for c in r["cpus"]})
    out = {"format": "awnn-draws-v1", "task": info["task"], "budget": info["budget"], "experiment": info["experiment"],
           "arms": arms, "baseline": baseline, "baseline_test_acc": base_acc, "seeds": [r["train_seed"] for r in per_draw],
           "draws": per_draw, "over_draws": over, "cpus": cpus, "set_aside": found["set_aside"]}
    out["verdict"] = verdict_line(out)
    return out


def _pct(pair) -> str:
    return "n/a" if not pair else (f"{100 * pair[0]:.2f}%" if pair[0] == pair[1] else f"{100 * pair[0]:.2f}-{100 * pair[1]:.2f}%")


def verdict_line(s: dict[str, Any]) -> str:
    """One sentence per arm: in how many draws it was cheaper than the baseline, the range and the pooled savings."""
    n = len(s["draws"])
    if not s["baseline"]:
        return f"{n} draws; no savings: the comparison ran neither `fixed` nor `awnn` (the baselines)."
    parts = []
    for arm, e in s["over_draws"].items():
        sel, tot = e["selection"], e["total"]
        if not sel["of"]:
            parts.append(f"{arm}: no savings in any draw")
            continue
        parts.append(f"{arm}'s selection was cheaper than {s['baseline']}'s in {sel['cheaper_in']} of {sel['of']} draws "
                     f"({fx(sel['min'])} to {fx(sel['max'])}, pooled {fx(sel['pooled'])}), with re-training in {tot['cheaper_in']} of {tot['of']} "
                     f"({fx(tot['min'])} to {fx(tot['max'])}, pooled {fx(tot['pooled'])}); tested at {_pct(e['test_acc'])}")
    seeds = ", ".join(str(x) for x in s["seeds"])
    line = f"Over {n} draws (train seeds {seeds}) of {s['task']} at budget {s['budget']}: " + "; ".join(parts)
    line += f"; {s['baseline']} tested at {_pct(s['baseline_test_acc'])}."
    if len(s["cpus"]) > 1:
        line += f" The draws ran on {len(s['cpus'])} CPU models ({'; '.join(s['cpus'])}): their float rounding moves the trials too."
    return line


def draws_markdown(s: dict[str, Any]) -> str:
    """draws.md: the verdict line, a table per draw and the spread per arm."""
    arms, base = s["arms"], s["baseline"]
    lines = [f"# The verdict over draws: {s['task']}, budget {s['budget']}", "", s["verdict"], "",
             "Each draw is one `awnn compare` with its own `--train-seed`; a draw's savings are the baseline's device-hours over the arm's "
             "(selection; total = selection + re-training). *Pooled*: the baseline's mean device-hours over the draws / the arm's.", ""]
    head = ["train seed", "comparison"] + [f"{a} selection device-h" for a in arms] + [f"{a} vs {base} (sel / total)" for a in arms if a != base] \
        + [f"{a} test acc" for a in arms]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in s["draws"]:
        cells = [str(r["train_seed"]), f"`{r['comparison']}`"]
        cells += [fh(r["arms"][a]["selection_hours"]) for a in arms]
        cells += [f"{fx(r['arms'][a].get('selection_savings'))} / {fx(r['arms'][a].get('total_savings'))}" for a in arms if a != base]
        cells += [fpct(r["arms"][a].get("test_acc_mean")) for a in arms]
        lines.append("| " + " | ".join(cells) + " |")
    if s["over_draws"]:
        lines += ["", f"| arm vs {base} | selection: cheaper in | min | median | max | pooled | total: cheaper in | min | median | max | pooled |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for arm, e in s["over_draws"].items():
            cells = [arm]
            for kind in ("selection", "total"):
                k = e[kind]
                cells += [f"{k['cheaper_in']} of {k['of']}", fx(k["min"]), fx(k["median"]), fx(k["max"]), fx(k["pooled"])]
            lines.append("| " + " | ".join(cells) + " |")
    if s["set_aside"]:
        lines += ["", "Comparisons set aside:", ""]
        lines += [f"- `{a['comparison']}`" + ("" if a["train_seed"] is None else f" (train seed {a['train_seed']})") + f": {a['why']}"
                  for a in s["set_aside"]]
    return "\n".join(lines) + "\n"


def write_draws(tracking_uris: list[str], out_dir: str | Path, comparison: str | None = None, experiment: str | None = None) -> dict[str, Any]:
    """Find the draws, write draws.md and draws.json (strict JSON) to
    `out_dir` (whole or not at all: tracking/files.py) and return the paths
    and the summary.  AnalysisError when there are no two draws."""
    out = Path(out_dir)
    check_writable(out, f"--out {out}")  # one line before any MLflow read
    summary = draws_summary(find_draws(tracking_uris, comparison, experiment))
    try:
        with staged_folder(out) as stage:
            (stage / "draws.md").write_text(draws_markdown(summary))
            (stage / "draws.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    except OSError as e:
        why, room = e.strerror or type(e).__name__, free_space(out)
        if e.errno == errno.ENOSPC and room:
            why += f": {room} there, less than the files need"
        raise TrackingUnavailable(f"--out {out}: cannot write the draws ({why}); nothing in it changed") from None
    return {"out_dir": str(out), "draws_md": str(out / "draws.md"), "draws_json": str(out / "draws.json"), "summary": summary}
