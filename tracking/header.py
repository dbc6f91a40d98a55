"""The report's title and its setup section: which comparison, strategies, protocol, budget and AWNN profile
(tracking/document.py assembles the rest: the verdict and the summary come before the setup)."""
from __future__ import annotations

from . import analysis as A
from .execution import execution_text
from .fmt import _date, _finite, plural


def _protocol_text(c: dict) -> str:
    """How risk was assessed (search/protocol.py)."""
    if c.get("folds", 1) > 1:
        return (f"protocol `{c['protocol']}` ({c['folds']} stratified outer folds, Errica et al. 2020: each fold's own selection on its "
                f"inner 90/10 hold-out and re-training runs of the config selected for it; test accuracy = mean over the folds of each "
                f"fold's mean, std over the folds; costs add up over the folds; any-time curves and cost to target use fold 0's selection)")
    return "protocol `holdout` (one outer split)"


def _strategies_text(d: A.ComparisonData) -> str:
    out = []
    for family, arms in d.families.items():
        out.append(family if arms == [family] else f"{family} ({len(arms)} repeats: {', '.join(arms)})")
    return ", ".join(out)


def _profile_text(d: A.ComparisonData) -> str:
    """The AWNN profile(s) of the comparison's AWNN trials and every choice
    they resolved to, read from the trials' params ('' without AWNN trials)."""
    from awnn.config import PROFILE_KEYS

    configs = [c for c in (d.runs["config"] if len(d.runs) else []) if isinstance(c, dict) and c.get("model") == "awnn"]
    if not configs:
        return ""
    by_profile: dict[str, dict] = {}
    for c in configs:
        by_profile.setdefault(str(c.get("awnn_profile", "not recorded")), c)
    parts = []
    for name, c in by_profile.items():
        if name == "not recorded":
            parts.append("`not recorded` (runs from before profiles existed: they ran the paper-text behaviour)")
            continue
        choices = ", ".join(f"{k}={c[k]}" for k in PROFILE_KEYS if k in c)
        parts.append(f"`{name}` ({choices})")
    return "AWNN profile: " + "; ".join(parts) + ". See docs/design.md, \"Profiles\", for what each choice means."


def title_section(a: A.Analysis) -> list[tuple]:
    c = a.data.comparison
    return [("h1", f"AWNN search-cost report: {c['task']} ({c['id']})")]


def setup_section(a: A.Analysis) -> list[tuple]:
    """"Setup": the comparison, budget, execution, CPU budget, AWNN profile and the store's other comparisons."""
    d = a.data
    c = a.data.comparison
    doc: list[tuple] = [("h2", "Setup")]
    n_runs = len(d.runs)
    doc.append(("p", f"Comparison `{c['id']}` in MLflow experiment `{c['experiment']}`: strategies {_strategies_text(d)}; budget `{c['budget']}`; {_protocol_text(c)}; "
                     f"started {_date(c['start_time'])}; state **{c['state']}**; {plural(n_runs, 'trial run')} in {plural(len(d.sweeps), 'sweep')}. "
                     f"Every number below is read back from MLflow. Device-hours = the CPU time each trial's process spent training, every attempt, "
                     f"at most its training time x allocated CPUs ({c['cpus_per_trial']:g} per trial)"
                     + (f"; on GPUs, training time x the GPU share ({c['gpus_per_trial']:g} per trial)" if c["gpus_per_trial"] > 0 else "")
                     + "; GPU-hours count only GPU time."))
    if c.get("data_digest") and c["task"] == "table":  # a user's data file
        read = f": {c['data_summary']}" if c.get("data_summary") else ""
        doc.append(("p", f"Data: the CSV data of `--data-root {c.get('data_root')}` (SHA-256 `{c['data_digest']}`...){read}; features "
                         "standardised on the outer training part; the same digest is checked on every trial's node and keys `--resume`."))
    elif c.get("data_digest"):  # a dataset's files on disk
        doc.append(("p", f"Data: the {c['task']} files under `--data-root {c.get('data_root')}` (SHA-256 `{c['data_digest']}`...); every trial's "
                         "node checked its copy against it, and a `--resume` checks the data against it."))
    doc.append(("p", _budget_text(a)))
    doc.append(("p", execution_text(d)))
    if c.get("cpu"):
        doc.append(("p", "CPU budget: the paper's setup scaled down to what a CPU trains, by each grid's `cpu` values "
                         "(`--budget paper` trains the paper's): " + "; ".join(
                             f"{name}: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items())) for name, values in sorted(c["cpu"].items())) + "."))
    profile_text = _profile_text(d)
    if profile_text:
        doc.append(("p", profile_text))
    if d.other_comparisons:
        doc.append(("p", f"The store holds {plural(len(d.other_comparisons), 'other comparison')}; pass `--comparison ID` to report on "
                         + ("it " if len(d.other_comparisons) == 1 else "one of them ") +
                         f"({'' if len(d.other_comparisons) == 1 else 'newest: '}{', '.join('`' + str(o['id']) + '`' for o in d.other_comparisons[:3])})."))
    return doc


def _seeds_text(d: A.ComparisonData, draw: int) -> str:
    """The draw of the trials' training (`--train-seed`) and the seeds its runs record, when not the default draw 0."""
    if not draw:
        return ""
    seen: dict[str, set] = {}
    for phase, cfg in zip(d.runs["phase"], d.runs["config"]) if len(d.runs) and "config" in d.runs.columns else []:
        if isinstance(cfg, dict) and _finite(cfg.get("seed")):
            seen.setdefault(phase, set()).add(int(cfg["seed"]))
    parts = [f"{phase} {'seed' if len(v) == 1 else 'seeds'} {', '.join(map(str, sorted(v))) if len(v) <= 4 else f'{min(v)}..{max(v)}'}"
             for phase, v in sorted(seen.items(), key=lambda kv: kv[0] != "selection")]
    return (f" Training draw `--train-seed {draw}`" + (" (" + "; ".join(parts) + ")" if parts else "")
            + ": initialisations and batch orders other than those of the default draw 0 (seeds 0 and 1..R), on the same data split.")


def _budget_text(a: A.Analysis) -> str:
    """The budget spelled out: how epochs and R were set, and what each arm trained."""
    d, c = a.data, a.data.comparison
    b = c.get("budget_params") or {}
    how = ""
    retrain = f"; R = {b['retrain_runs']} re-training runs" if b.get("retrain_runs") is not None else "; R = the grid's re-training runs"
    if _finite(b.get("epoch_scale")) and (b["epoch_scale"] == 0 or b.get("min_epochs") == b.get("max_epochs")) and _finite(b.get("min_epochs")):
        how = f": {plural(int(b['min_epochs']), 'epoch')} per trial" + retrain  # e.g. smoke: every trial the same epochs
    elif _finite(b.get("epoch_scale")):
        how = f": epochs per trial = the grid's epochs x {b['epoch_scale']:g}, clipped to [{b.get('min_epochs')}, {b.get('max_epochs')}]" + retrain
    arms = []
    for arm in d.strategies:
        cfgs = d.runs[d.runs["strategy"] == arm]["config"] if len(d.runs) else []
        epochs = sorted({int(x["epochs"]) for x in cfgs if isinstance(x, dict) and _finite(x.get("epochs"))})
        sw = d.sweeps[d.sweeps["strategy"] == arm] if len(d.sweeps) else d.sweeps
        r = next((int(v) for v in (sw["retrain_runs"] if len(sw) and "retrain_runs" in sw.columns else []) if _finite(v)), None)
        if epochs or r is not None:
            e = "n/a" if not epochs else str(epochs[0]) if len(epochs) == 1 else f"{epochs[0]}-{epochs[-1]}"
            arms.append(f"{arm} {e} epoch{'' if e == '1' else 's'} a trial" + (f", R = {r}" if r is not None else ""))
    folds = c.get("folds", 1)
    seeds = _seeds_text(d, c.get("train_seed", 0))
    return (f"Budget `{c['budget']}`{how}" + (f", per outer fold ({folds} folds)" if folds > 1 else "") + ". "
            + ("Per arm: " + "; ".join(arms) + "." if arms else "") + seeds)

