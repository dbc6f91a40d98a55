"""The report's content as a list of blocks, one function per section (rendered by tracking/render.py)."""
from __future__ import annotations

from shlex import quote
from typing import Any

from . import analysis as A
from . import contract as C
from .budget_report import budget_section, paper_budget_section
from .header import setup_section, title_section
from .fmt import PHASE_LABEL, _finite, fh, fnum, fpct, fratio, fsec
from .report_summary import early_stopped, savings_section, summary_section, verdict_section
from .savings import fx


MAX_PROBLEMS = 40  # lines of the Problems list in the report; summary.json has them all


# --------------------------------------------------------------- document
def build_document(a: A.Analysis, summary: dict[str, Any], tracking_hint: str | None = None) -> list[tuple]:
    """The report as a list of blocks: ("h1"|"h2"|"p", text), ("ul", [items]),
    ("table", header, rows), ("img", plot name, alt text); one function per section."""
    return [
        *title_section(a),
        *verdict_section(summary),
        *summary_section(a, summary),
        *_problems_section(a),
        *setup_section(a),
        *_costs_section(a),
        *_accuracy_section(a),
        *savings_section(a, summary),
        *budget_section(summary),
        *_target_section(a),
        *_repeats_section(a),
        *_overhead_section(a),
        *_projection_section(a),
        *paper_budget_section(summary),
        *_truncation_section(a),
        *_mlflow_section(a),
        *_method_section(a, tracking_hint),
    ]


def _problems_section(a: A.Analysis) -> list[tuple]:
    doc: list[tuple] = []
    # ---- problems first when there are any: a reader must see them
    if a.problems:
        doc.append(("h2", "Problems"))
        shown = list(a.problems[:MAX_PROBLEMS])
        if len(a.problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(a.problems) - MAX_PROBLEMS} more (summary.json lists all {len(a.problems)}; the status counts are in the table below).")
        doc.append(("ul", shown))
    return doc


def _costs_section(a: A.Analysis) -> list[tuple]:
    d = a.data
    c = a.data.comparison
    costs = a.costs
    early = early_stopped(a)
    doc: list[tuple] = []
    # ---- cost table
    doc.append(("h2", "What each strategy spent"))
    rows = []
    for _, r in costs.iterrows():
        other = {k: int(r[k]) for k in C.STATUSES if k != "ok" and int(r[k])}
        status = f"{int(r['ok'])} ok" + "".join(f", {v} {k}" for k, v in other.items())
        if r.get("inherited_from") and r["phase"] == "selection":
            status = f"none of its own: the {r['inherited_from']} arm's search"
        declared = r["trials_declared"]
        n_tr = f"{int(r['trials'])}" + (f" of {int(declared)}" if _finite(declared) and int(declared) != int(r["trials"]) else "")
        rows.append([r["strategy"], PHASE_LABEL.get(r["phase"], r["phase"]), str(int(r["configs"])), n_tr, status,
                     str(int(r["runs"])) + (f" ({int(r['interrupted_runs'])} interrupted)" if int(r["interrupted_runs"]) else ""),
                     fh(r["device_hours"]) + (" (est.)" if int(r["estimated_runs"]) else ""), fh(r["gpu_hours"]), fsec(r["wall_seconds"])])
    doc.append(("table", ["strategy", "phase", "configs", "trials", "status", "MLflow runs", "device-hours", "GPU-hours", "sweep wall-clock"], rows))
    doc.append(("p", f"Comparison wall-clock: {fsec(c['wall_seconds'])}. Trials are counted once per config (selection) or re-training run; "
                     "runs of a trial that a dead driver left `interrupted` add their compute, not configs."
                     + (" TPE may suggest a config twice: each suggestion is a trial and counts." if any(d.family(s) == "tpe" for s in d.strategies) else "")))
    if early:
        doc.append(("p", early))
    derived = {s: d.depends_on(s) for s in d.strategies if d.depends_on(s)}
    if derived:
        doc.append(("p", " ".join(f"`{s}` has no search of its own: it re-trains a fixed-width network at the width the `{src}` arm learned "
                                  f"(the paper's Fixed+, App. D), so its selection cost is the `{src}` arm's whole search (selection and "
                                  f"re-training), counted in its totals and savings." for s, src in derived.items())))
    doc.append(("img", "cost", "Stacked bars of device-hours per strategy: selection and re-training"))
    return doc


def _accuracy_section(a: A.Analysis) -> list[tuple]:
    doc: list[tuple] = []
    # ---- accuracy and width (Table 1 of the paper)
    doc.append(("h2", "What it bought: accuracy and width (cf. the paper's Table 1)"))
    rows = []
    for (_, st), (_, w) in zip(a.strategies.iterrows(), a.widths.iterrows()):
        rows.append([st["strategy"], st["selected_summary"], fpct(st["selected_val_acc"]),
                     f"{fpct(st['test_acc_mean'])} ({fpct(st['test_acc_std'])})" if st["test_runs"] else "n/a",
                     f"{st['test_runs']} of {st['retrain_runs']}", w["kind"], w["per_layer"] or "n/a",
                     f"{fnum(w['total_mean'], '.1f')} ({fnum(w['total_std'], '.1f')})" if _finite(w["total_mean"]) else "n/a"])
    doc.append(("table", ["strategy", "selected config", "inner val acc", "test acc mean (std)", "runs", "width", "per layer mean (std)", "total mean (std)"], rows))
    derived = {s: a.data.depends_on(s) for s in a.data.strategies if a.data.depends_on(s)}
    doc.append(("p", "Test accuracy: mean and sample standard deviation (ddof=1) over the re-training runs that finished ok. "
                     "Fixed width: chosen by the grid. AWNN width: learned, taken at each re-training run's selected epoch (tag `awnn.widths_at_best`)."
                     + "".join(f" {arm}'s width: taken from {src}'s learned widths (it has no search of its own)." for arm, src in derived.items())))
    doc.append(("img", "accuracy_width", "Accuracy versus total width for every scored trial"))
    return doc


def _target_section(a: A.Analysis) -> list[tuple]:
    d = a.data
    ti = a.target_info
    doc: list[tuple] = []
    # ---- any-time and target
    doc.append(("h2", "Any-time curves and cost to a target"))
    doc.append(("img", "anytime", "Best inner-validation accuracy against cumulative selection device-hours"))
    if _finite(ti.get("target")):
        rows = [[t["strategy"], f"random ({ti['n_orders']} orders)" if t["order"] == "random" else "as run", fpct(t["best_val_acc"]),
                 fpct(t["reached"], 0) if t["order"] == "random" else ("yes" if t["reached"] > 0 else "no"),
                 fh(t["hours_mean"]), fh(t["hours_median"]) if t["order"] == "random" else "", fh(t["grid_hours"])] for _, t in a.target.iterrows()]
        doc.append(("table", ["strategy", "order", "best inner val acc", "reached target", "device-h to target (mean)", "(median)", "all selection trials device-h"], rows))
        actual = sorted({d.family(s) for s in a.target.loc[a.target["order"] == "actual", "strategy"]}) if len(a.target) else []
        doc.append(("p", f"Target: {fpct(ti['target'])} = best inner-validation accuracy of any strategy ({fpct(ti['best_val_acc'])}) minus {100 * ti['margin']:g} pp. "
                         f"A grid has no natural order: each grid's curve and cost is averaged over {ti['n_orders']} random orders of its selection trials, "
                         "run one after another"
                         + (f"; {', '.join(actual)} chose their trials in sequence, so their curves and costs follow the order the trials ran "
                            "(by run end time), cumulative device-hours on x" if actual else "")
                         + ". Diverged, failed and stopped trials cost their device-hours and find nothing."))
    return doc


def _repeats_section(a: A.Analysis) -> list[tuple]:
    doc: list[tuple] = []
    # ---- repeats
    if len(a.repeats):
        doc.append(("h2", "Repeats: spread across seeds"))
        rows = []
        for family, info in a.repeats_info.items():
            for _, r in a.repeats[a.repeats["family"] == family].iterrows():
                fmt = fpct if r["metric"] == "test_acc_mean" else (fx if r["metric"].startswith("savings") else fh)
                rows.append([family, r["label"], f"{r['n']} of {r['arms']}", fmt(r["mean"]), fmt(r["std"]), fmt(r["min"]), fmt(r["max"])])
            rows.append([family, "reached target", f"{info['reached_target']} of {info['n']}", "", "", "", ""])
        doc.append(("table", ["family", "measure", "arms (n)", "mean", "std", "min", "max"], rows))
        doc.append(("p", "Each stochastic strategy ran once per seed (`--repeats`); every arm is a full search with its own selection and re-training. "
                         "Mean and sample standard deviation (ddof=1) over the arms with a value; device-hours to target over the arms that reached it. "
                         f"Savings: `{a.settings['baseline']}`'s selection device-hours / the arm's (above 1: the arm is cheaper)."))
    return doc


def _overhead_section(a: A.Analysis) -> list[tuple]:
    ov = a.overhead_summary
    doc: list[tuple] = []
    # ---- overhead
    doc.append(("h2", "AWNN per-step overhead, measured on these runs"))
    if len(a.overhead):
        rows = [[r["strategy"], PHASE_LABEL.get(r["phase"], r["phase"]), r["trial_key"], fnum(r["hidden_layers"], "g"), fnum(r["batch_size"], "g"), fnum(r["mean_width"], ".1f"),
                 fnum(r["cost"], ".4g"), fnum(r["fixed_width"], "g"), f"{fnum(r['fixed_cost'], '.4g')} (n={r['fixed_runs']})", r["match"], fratio(r["ratio"])]
                for _, r in a.overhead.iterrows()]
        doc.append(("table", ["strategy", "phase", "trial", "layers", "batch", "AWNN mean width/layer", f"AWNN {ov['unit']}", "fixed width", "fixed (runs)", "matched on", "overhead (AWNN / fixed)"], rows))
    doc.append(("p", f"Cost per epoch = train_seconds x allocated devices / epochs_run ({ov.get('unit')}); train_seconds is training time only. "
                     "Each AWNN run is compared with the fixed-width runs (of any strategy) of the closest width (log scale) to its mean learned width per layer over training, "
                     "on the same split with the same hidden layers and batch size where the grid has them, "
                     "and trained as the AWNN run was, one config in its trial, where there are such runs; matched with fused fixed runs only "
                     "(the match says so), the ratio also holds fusion's saving: a fused run's cost is its share of its group's time."
                     + ("" if "per sample" in str(ov.get("unit")) else " The runs do not record n_train, so the cost is per epoch, not per sample; on one split the ratio is the same.")))
    doc.append(("img", "widths", "Learned total width of each AWNN trial over epochs"))
    return doc


def _projection_section(a: A.Analysis) -> list[tuple]:
    doc: list[tuple] = []
    # ---- projection
    doc.append(("h2", "Projection: a width per layer (W^L configs)"))
    pi = a.projection_info
    if pi.get("applicable"):
        p = a.projection
        rows = [[str(int(r["layers"])), fnum(r["fixed_configs_shared_width"], "g"), fnum(r["fixed_configs_per_layer_width"], ".4g"),
                 fh(r["fixed_hours_per_trial"]) + ("" if r["fixed_per_trial_measured"] else " (extrapolated)"), fh(r["fixed_hours"]),
                 fnum(r["awnn_configs"], "g"), fh(r["awnn_hours_per_trial"]) + ("" if r["awnn_per_trial_measured"] else " (extrapolated)"), fh(r["awnn_hours"]), fx(r["ratio"])]
                for _, r in p.iterrows()]
        doc.append(("p", f"**This is a projection, not a measurement.** The fixed grid tried W = {pi['W']} widths ({', '.join(f'{w:g}' for w in pi['width_values'])}) shared by all layers. "
                         f"If each of L layers got its own width, it would need W^L x {pi['fixed_other_configs']:g} configs (its other dimensions); "
                         f"AWNN keeps {pi['awnn_configs_per_layers']:g} configs per L. Costs use the measured mean device-hours per selection trial at each L "
                         "(a least-squares line in L where L was not measured)."))
        doc.append(("table", ["L", "fixed configs (shared width)", "fixed configs (width per layer)", "fixed device-h / trial", "fixed device-h (projected)",
                              "AWNN configs", "AWNN device-h / trial", "AWNN device-h (projected)", "AWNN savings vs fixed (projected)"], rows))
    else:
        doc.append(("p", f"Not applicable to this comparison: {pi.get('reason', '')}."))
    doc.append(("img", "projection", "Projected selection cost against the number of hidden layers"))
    return doc


def _truncation_section(a: A.Analysis) -> list[tuple]:
    """Paper 5.4: the re-trained AWNN models truncated after training."""
    doc: list[tuple] = [("h2", "Post-hoc truncation (paper 5.4)")]
    if not len(a.truncation):
        return doc + [("p", "No truncation curves: the comparison has no finished re-training run of an adaptive MLP (the curve is "
                            "measured for the tabular AWNN models; other domains' adaptive blocks are not truncated).")]
    rows = [[r["strategy"], f"{r['kept_pct']}%", fpct(r["acc_mean"]) + (f" ({fpct(r['acc_std'])})" if _finite(r["acc_std"]) else ""),
             f"{fpct(r['acc_min'])} .. {fpct(r['acc_max'])}", fnum(r["width_total_mean"], ".1f"), fnum(r["params_mean"], ".0f"),
             fnum(r["infer_us_mean"], ".3g"), str(r["n"])] for _, r in a.truncation.iterrows()]
    doc.append(("table", ["strategy", "neurons kept", "test acc mean (std)", "min .. max", "total width", "parameters",
                          "inference us / sample", "runs"], rows))
    lines = []
    for arm, t in a.truncation_info.items():
        if t["largest_cut_pct"] > 0:
            lines.append(f"`{arm}`: removing {t['largest_cut_pct']}% of each adaptive layer's neurons keeps the mean test accuracy within "
                         f"{100 * t['tolerance']:g} point of the full model ({fpct(t['acc_at_cut'])} vs {fpct(t['full_acc'])}): "
                         f"{fnum(t['width_total_at_cut'], '.0f')} instead of {fnum(t['full_width_total'], '.0f')} neurons, "
                         f"{fnum(t['params_at_cut'], '.0f')} instead of {fnum(t['full_params'], '.0f')} parameters, "
                         f"{fnum(t['infer_us_at_cut'], '.3g')} vs {fnum(t['full_infer_us'], '.3g')} us per sample.")
        else:
            lines.append(f"`{arm}`: every cut of 10% or more costs more than {100 * t['tolerance']:g} point of mean test accuracy "
                         f"(full model {fpct(t['full_acc'])}).")
    doc.append(("ul", lines))
    doc.append(("img", "truncation", "Test accuracy against the share of neurons removed after training"))
    doc.append(("p", "Each re-training run's kept model (the selected epoch's, MLflow artifact `model/`) is truncated in its trial to the "
                     "first 100%, 90%, ..., 10% of each adaptive layer's neurons and scored on the outer test part (metrics "
                     "`trunc_test_acc`, `trunc_width_total`, `trunc_params`, `trunc_infer_us`, step = % kept); inference time is the "
                     "best of 5 timed passes over the test part on the trial's device, per sample."))
    return doc


def _mlflow_section(a: A.Analysis) -> list[tuple]:
    """Links to the comparison's runs: ids always, UI addresses when the store is a server."""
    from .links import comparison_links

    ln = comparison_links(a.data)

    def cell(entry) -> str:
        if not entry:
            return "n/a"
        return f"[`{entry['run_id']}`]({entry['url']})" if entry.get("url") else f"`{entry['run_id']}`"

    rows = [["comparison", "", cell(ln["comparison"])]]
    rows += [[arm, PHASE_LABEL.get(ph, ph), cell(e)] for arm, phases in ln["sweeps"].items() for ph, e in phases.items()]
    where = (f"in [experiment {ln['experiment_id']}]({ln['experiment_url']})" if ln.get("experiment_url")
             else f"in experiment id {ln['experiment_id']}; serve the store with `{ln['serve']}` and open "
                  f"`http://127.0.0.1:5000/#/experiments/{ln['experiment_id']}/runs/<run id>`")
    return [("h2", "MLflow runs"), ("p", f"The runs this report reads, {where}. Each sweep run's children are its trials "
                                        f"(filter `tags.awnn.kind = 'trial' and tags.awnn.comparison = '{a.data.comparison['id']}'`)."),
            ("table", ["arm", "phase", "run"], rows)]


def _method_section(a: A.Analysis, tracking_hint: str | None = None) -> list[tuple]:
    c = a.data.comparison
    doc: list[tuple] = []
    # ---- method
    doc.append(("h2", "How to read and rebuild this report"))
    doc.append(("ul", [
        "Trials: one per selection config and per re-training run; failed, diverged and stopped trials count in every cost. "
        "Statuses come from the tag `awnn.status`; device-hours from the metric `device_hours` of each trial run.",
        "Selection: best inner-validation accuracy (ties: lower validation loss, then grid order) among trials that finished ok or width_capped.",
        f"Rebuild from the tracking store alone: `awnn report --comparison {c['id']} --tracking-uri {quote(tracking_hint) if tracking_hint else 'URI'} --out DIR`. "
        "The same store gives the same files.",
        "Formulas and the summary.json keys: docs/report.md.",
    ]))
    return doc
