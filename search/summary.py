"""The table `awnn compare` prints at its end."""
from __future__ import annotations

import sys

from tracking.contract import arm_family
from tracking.fmt import plural

from .progress import fmt_seconds
from .strategies import REGISTRY



def config_keys(results) -> list[str]:
    """The keys a selected-config line shows: `model`, then every key the
    arms' grids search (in file order: a GIN's conv_layers and pooling, an
    MLP's hidden_layers, width, activation, ...), then `layer_widths`
    (fixedplus per-layer).  Keys no grid searches are left out: each arm's
    grid file fixes them."""
    keys = ["model"]
    for r in results:
        grid = getattr(r, "grid", None)
        keys += [k for k in (getattr(grid, "grid", None) or {}) if k not in keys]
    return keys + ["layer_widths"]


def _cfg_short(cfg: dict, keys: list[str]) -> str:
    parts = []
    for k in keys:
        if k in cfg and cfg[k] not in (None, "") and not (k == "width" and cfg.get("model") == "awnn") \
                and not (k == "sigma_theta" and cfg.get("model") != "awnn"):
            parts.append(f"{k}={cfg[k]}")
    return " ".join(parts)


WIDTH = 100  # the summary fits a terminal this wide


def read_back(comparison):
    """The finished comparison as its report reads it from MLflow (tracking.report.read_comparison: the
    runs, their analysis and summary.json's content), or None when MLflow lacks some of its writes (its
    numbers would be wrong) or cannot be read.  `awnn compare` prints its summary and writes its report
    from this one read."""
    if getattr(comparison, "unwritten", None):
        return None
    try:
        from tracking.report import read_comparison

        return read_comparison(comparison.tracking_uri, comparison=comparison.id)
    except Exception as e:  # noqa: BLE001 - the summary must print whatever the store's state
        from .signals import stop_if_interrupted

        stop_if_interrupted(e)  # (but not go on after a stop asked while MLflow was read)
        return None


def terminal_summary(comparison, results, read=...) -> dict:
    """The numbers the summary shows beyond the in-memory results: summary.json's content read back from
    MLflow (`read`: what `read_back` returned, read here when not given: the report's savings, intervals
    and verdict, word for word), or, when MLflow could not be read (`read` None), the arms' totals alone
    (tracking.verdict.brief_summary: no intervals)."""
    read = read_back(comparison) if read is ... else read
    return read.summary if read is not None else memory_summary(comparison, results)


def memory_summary(comparison, results) -> dict:
    """The arms' totals from the in-memory results alone (tracking.verdict.brief_summary: no intervals)."""
    from tracking.verdict import brief_summary

    arms = {}
    for r in results:
        sel_h, total_h = _hours(r, results)
        s = r.summary or {}
        arms[r.strategy] = {"test_acc_mean": s.get("test_acc_mean"), "test_acc_std": s.get("test_acc_std"), "test_runs": s.get("runs_ok", 0),
                            "device_hours": {"selection": sel_h, "total": total_h}}
    return brief_summary(getattr(comparison.budget, "name", None), arms)


def _hours(r, results) -> tuple[float, float]:
    """(selection, total) device-hours of an arm from its in-memory results; an arm derived from another
    (fixedplus) has that arm's whole search in its selection."""
    sel_h = r.selection.total("device_hours")
    total_h = sel_h + (r.assessment.total("device_hours") if r.assessment else 0.0)
    src = _source_of(r, results)
    if src is not None:
        inherited = src.selection.total("device_hours") + (src.assessment.total("device_hours") if src.assessment else 0.0)
        sel_h, total_h = inherited, total_h + inherited
    return sel_h, total_h


def _plain(text: str) -> str:
    """Markdown emphasis and code marks off, for the terminal."""
    return text.replace("**", "").replace("`", "")


def print_summary(comparison, results, stream=None, summary: dict | None = None) -> None:
    """The verdict (tracking/verdict.py), then one line per arm (`fixed`, `awnn`,
    `tpe.r1`, ...) in 100 columns: selection trials, selection and total
    device-hours, its selection savings against the baseline (`fixed`, else
    `awnn`: the baseline's device-hours / the arm's, tracking/savings.py), test
    accuracy of the selected config and its width (AWNN: learned total, mean
    +- std (min..max) over the re-training runs); then every arm's selection
    and total savings with their 95% intervals, and each arm's selected
    config, wrapped.  `summary`: summary.json's content when the caller has
    it (else read back from MLflow: `terminal_summary`), so the numbers are the report's."""
    from tracking.savings import fci, fsavings, fx

    out = stream or sys.stdout
    summary = summary if summary is not None else terminal_summary(comparison, results)
    protocol = getattr(comparison, "protocol", "holdout")
    head = (f"Comparison {comparison.id}: task {comparison.task}, budget {comparison.budget.name}"
            + (f", protocol {protocol} (test acc over the folds' means; config: the one most folds chose)" if protocol != "holdout" else ""))
    print("\n" + "\n".join(_wrap(head, "")), file=out)
    for text in _wrap(_plain((summary.get("verdict") or {}).get("text", "")), "", "  "):
        print(text, file=out)
    print("", file=out)
    base, sv = summary.get("baseline"), summary.get("savings") or {}
    dev = summary.get("device_hours") or {}
    w = max([8, *(len(r.strategy) for r in results)])
    col = f"sel vs {base}" if base else "savings"
    header = f"{'arm':<{w}} {'trials':>6} {'sel dev-h':>9} {'total dev-h':>11} {col:>{len(col)}}  {'test acc (mean +- std, n)':<25}  width"
    print(header, file=out)
    print("-" * min(WIDTH, len(header) + 12), file=out)
    derived = {r.strategy: _source_of(r, results) for r in results}
    for r in results:
        sel_h, total_h = _hours(r, results)
        if r.strategy in dev:  # the numbers MLflow holds (the report's)
            sel_h, total_h = dev[r.strategy].get("selection", sel_h), dev[r.strategy].get("total", total_h)
        s = r.summary
        acc = f"{100 * s['test_acc_mean']:.2f} +- {100 * s['test_acc_std']:.2f}% (n={s['runs_ok']})" if s else "n/a"
        ratio = "baseline" if r.strategy == base else fx((sv.get(r.strategy) or {}).get("selection")) if r.strategy in sv else "-"
        trials = len(r.selection.outcomes) or (0 if derived[r.strategy] else r.grid.size)  # tpe, random: fewer than the grid
        line = f"{r.strategy:<{w}} {trials:>6} {sel_h:>9.4f} {total_h:>11.4f} {ratio:>{len(col)}}  {acc:<25}  "
        width = r.widths()
        if len(line) + len(width) <= WIDTH:
            print(line + width, file=out)
        else:  # a long learned width ("1261 +- 429 (883..1723)") goes whole on the next line, never cut
            print(line.rstrip(), file=out)
            print(" " * max(0, min(len(line), WIDTH - len(width))) + width, file=out)
    for text in _wrap("(dev-h: device-hours of training: on CPUs the trials' CPU time, at most allocated CPUs x training time; on GPUs the GPU share x training time; wall: "
                      + ", ".join(f"{r.strategy} {fmt_seconds(_wall(r))}" for r in results) + ")", "", " "):
        print(text, file=out)
    for name, src in derived.items():
        if src is not None:
            for text in _wrap(f"({name}: no search of its own; its sel dev-h are the {src.strategy} arm's search, selection and "
                              f"re-training, whose learned width it re-trains at)", "", " "):
                print(text, file=out)
    if sv:
        has_ci = any(v.get("selection_ci") and None not in v["selection_ci"] for v in sv.values())  # (None: MLflow not read)
        for text in _wrap(f"savings vs {base} = {base}'s device-hours / the arm's (> 1: the arm is that many times cheaper)"
                          + (", with 95% bootstrap CIs:" if has_ci else " (MLflow not read: no CIs here; `awnn report` gives them):"), ""):
            print(text, file=out)
        for arm, v in sv.items():
            ci = {k: f" ({fci(v[k])})" if v.get(k) and None not in v[k] else "" for k in ("selection_ci", "total_ci")}
            for text in _wrap(f"selection {fsavings(v.get('selection'))}{ci['selection_ci']}; with re-training "
                              f"{fsavings(v.get('total'))}{ci['total_ci']}", f"  {arm:<{w}} "):
                print(text, file=out)
    for note in summary.get("savings_notes") or []:
        for text in _wrap(_plain(note), "", "  "):
            print(text, file=out)
    print("selected configs:", file=out)
    keys = config_keys(results)
    for r in results:
        cfg = _cfg_short(r.selected["config"], keys) if r.selected else "none selected"
        for text in _wrap(cfg, f"  {r.strategy:<{w}} "):
            print(text, file=out)
    family = {r.strategy: getattr(r, "family", "") or arm_family(r.strategy) for r in results}
    outcomes = [(r.strategy, o) for r in results for ph in (r.selection, r.assessment) if ph for o in ph.outcomes]
    # ASHA stops selection trials by design: counted apart from the trials that went wrong
    early = {r.strategy for r in results if family[r.strategy] in REGISTRY and REGISTRY[family[r.strategy]].stops_early}  # asha, awnn-asha
    by_design = [o for r in results if r.strategy in early for o in r.selection.outcomes if o.get("status") == "stopped"]
    if by_design:
        per = {r.strategy: sum(1 for o in r.selection.outcomes if o.get("status") == "stopped") for r in results if r.strategy in early}
        _say(out, f"{plural(len(by_design), 'trial')} {'was' if len(by_design) == 1 else 'were'} stopped early by ASHA (their partial compute is counted above): "
             + ", ".join(f"{s} {n}" for s, n in per.items()))
    bad = [(s, o) for s, o in outcomes if o.get("status") != "ok" and not any(o is e for e in by_design)]
    problems = [(s, o["key"], o["status"]) for s, o in bad]
    if problems:
        _say(out, f"{plural(len(problems), 'trial')} did not end ok (their compute is counted above): "
             + ", ".join(f"{s}:{k}={st}" for s, k, st in problems[:12]) + (" ..." if len(problems) > 12 else ""))
        for reason in _failure_reasons(bad):
            for line in _wrap(reason, "  ", "    "):
                print(line, file=out)
    for r in results:  # post-hoc truncation of the AWNN re-trained models (paper 5.4)
        line = _truncation_line(r)
        if line:
            _say(out, line)
    for line in caveats(comparison.budget.name, results):
        _say(out, f"warning: {line}")
    _say(out, mlflow_line(comparison.tracking_uri, getattr(getattr(comparison, "writer", None), "experiment_id", None)))


def mlflow_line(tracking_uri: str, experiment_id: str | None = None) -> str:
    """Where the comparison's runs are: a tracking server's experiment page (open it in a browser), or the
    command that serves a store that is no server (tracking/links.py, as the report says it); never credentials."""
    from shlex import quote

    from tracking.contract import redact_uri
    from tracking.links import run_url, server_base

    uri = redact_uri(tracking_uri)
    if server_base(tracking_uri) is None:
        return f"MLflow: {uri}  (open it with: mlflow ui --backend-store-uri {quote(uri)})"
    page = run_url(tracking_uri, experiment_id) if experiment_id else server_base(tracking_uri)
    return f"MLflow: {uri}  (a tracking server: open {page} in a browser)"


def _truncation_line(r) -> str | None:
    """How far the arm's re-trained models can be truncated within 1 point (tracking/truncation.py), or None."""
    from tracking.truncation import curve_rows, truncation_summary

    curves = [o["truncation"] for o in (r.assessment.outcomes if r.assessment else []) if o.get("truncation")]
    if not curves:
        return None
    import pandas as pd

    t = truncation_summary(pd.DataFrame(curve_rows(r.strategy, curves))).get(r.strategy)
    if not t:
        return None
    if not t["largest_cut_pct"]:
        return f"{r.strategy}: truncation after training costs more than 1 point from the first 10% cut (full: {100 * t['full_acc']:.2f}%)"
    return (f"{r.strategy}: truncation after training keeps test acc within 1 point down to {t['kept_pct']}% of the neurons "
            f"({t['width_total_at_cut']:.0f} of {t['full_width_total']:.0f}; {100 * t['acc_at_cut']:.2f}% vs {100 * t['full_acc']:.2f}%, "
            + (f"mean of {t['runs']} models)" if t["runs"] != 1 else "one model)"))


def _source_of(r, results):
    """The result of the arm that `r`'s family derives from (fixedplus: awnn), else None."""
    fam = getattr(r, "family", "") or arm_family(r.strategy)
    source = REGISTRY[fam].derived_from if fam in REGISTRY else None
    return next((x for x in results if (getattr(x, "family", "") or arm_family(x.strategy)) == source), None) if source else None


def _wall(r) -> float:
    return r.selection.wall_seconds + (r.assessment.wall_seconds if r.assessment else 0.0)


def _wrap(text: str, first: str, indent: str | None = None) -> list[str]:
    """`text` after `first`, wrapped at WIDTH columns (continuation lines indented
    like `first`, or by `indent`: a line that starts at column 0 is a table row's)."""
    import textwrap

    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=" " * len(first) if indent is None else indent, break_on_hyphens=False,
                         break_long_words=True) or [first.rstrip()]


def _say(out, text: str) -> None:
    print("", file=out)
    for line in _wrap(text, "", "  "):
        print(line, file=out)


def caveats(budget: str, results) -> list[str]:
    """The warnings of tracking/caveats.py for the arms' results."""
    from tracking.caveats import caveats as _caveats

    selections = [(r.strategy, (r.selected or {}).get("key"),
                   [{**o, "select_metric": (o.get("config") or {}).get("select_metric")} for o in (r.selection.outcomes if r.selection else [])])
                  for r in results]
    learned = ([r.strategy for r in results if r.learns_widths], [r.strategy for r in results])
    return _caveats(budget, [r.summary.get("test_acc_mean") for r in results if r.summary], selections=selections, learned=learned)


def _failure_reasons(bad: list[tuple[str, dict]], most: int = 3) -> list[str]:
    """Why trials failed: one line per distinct error (its first line, or what an
    allocation without memory said), naming the trials; at most `most` errors."""
    from .errors import out_of_memory

    by_error: dict[str, list[str]] = {}
    for strategy, o in bad:
        error = o.get("error")
        if o.get("status") != "failed" or not error:
            continue
        text = str(error)
        oom = out_of_memory(MemoryError(text)) if ("can't allocate memory" in text or "out of memory" in text.lower()) else None
        first = f"out of memory: {oom}" if oom else next((ln.strip() for ln in text.splitlines() if ln.strip()), text)
        by_error.setdefault(first[:300], []).append(f"{strategy}:{o['key']}")
    lines = []
    for first, keys in list(by_error.items())[:most]:
        lines.append(f"{', '.join(keys[:4])}{' ...' if len(keys) > 4 else ''}: {first}")
    if len(by_error) > most:
        lines.append(f"and {len(by_error) - most} other errors (the report's Problems and each run's tag awnn.error have them)")
    return lines
