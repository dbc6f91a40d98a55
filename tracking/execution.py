"""How a comparison's trials ran: one config per Ray trial, or fused groups
(`--fuse`, search/fusion.py), and on which CPUs; read from the comparison's
`fuse` param and the trial runs' `awnn.group` and `awnn.cpu` tags (the
report's header, summary.json `execution`)."""
from __future__ import annotations

from .reader import ComparisonData

__all__ = ["execution", "execution_text"]


def execution(d: ComparisonData) -> dict:
    """How the trials ran (summary.json `execution`): --fuse, and how many
    configs trained fused, in how many Ray trials (groups), per arm."""
    runs = d.runs
    fused = runs[runs["group"].astype(bool)] if len(runs) else runs
    by_arm = {arm: {"configs": int(len(g)), "groups": int(g["group"].nunique())} for arm, g in fused.groupby("strategy", sort=False)} if len(fused) else {}
    return {"fuse": int(d.comparison.get("fuse", 1)), "flush_denormal": d.comparison.get("flush_denormal"), "fused_configs": int(len(fused)),
            "groups": int(sum(v["groups"] for v in by_arm.values())), "by_arm": by_arm, "cpus": cpus(runs)}


def cpus(runs) -> dict[str, int]:
    """The CPUs (model and torch's kernels, tag `awnn.cpu`) the trial runs trained on -> how many runs each, most
    first; runs on several (retried elsewhere) count for each; runs without the tag (stores from before
    2026-11-28) under "not recorded"."""
    counts: dict[str, int] = {}
    for value in (runs["cpu"] if len(runs) and "cpu" in runs else []):
        for cpu in (str(value).split("; ") if value else ["not recorded"]):
            counts[cpu] = counts.get(cpu, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def execution_text(d: ComparisonData) -> str:
    """The report's statement of how the trials ran (issue #20: the savings depend on it)."""
    e = execution(d)
    return " ".join(t for t in (_fusion_text(e), _denormals_text(e), _cpus_text(e)) if t)


def _cpus_text(e: dict) -> str:
    found = {k: n for k, n in e["cpus"].items() if k != "not recorded"}
    if not found:
        return ""  # (a store from before the tag: nothing to say)
    listed = ", ".join(f"{cpu} ({n} run{'s' if n != 1 else ''})" for cpu, n in e["cpus"].items())
    if len(e["cpus"]) == 1:
        return f"CPU: {listed}."
    return (f"**The trials ran on {len(e['cpus'])} CPUs**: {listed}. Float results differ between CPU models, so configs "
            "that tie or nearly tie on the selection metric may rank otherwise on another machine: compare arms whose "
            "trials ran on one CPU, or read the selection's margins (docs/results.md, \"The standard verdict, a tie away\").")


def _denormals_text(e: dict) -> str:
    if e["flush_denormal"] is None:
        return "Float denormals: not recorded (comparisons run before the setting existed kept them)."
    if e["flush_denormal"]:
        return "Float denormals were flushed to zero on the CPU (awnn/arith.py: a CPU computes on them many times slower)."
    return ("Float denormals were kept (`--keep-denormals`): on a CPU, trials whose units died compute on them many times "
            "slower, which inflates their device-hours (README, \"Real datasets\").")


def _fusion_text(e: dict) -> str:
    if not e["fused_configs"]:
        return ("Execution: one config per Ray trial" + (f" (`--fuse {e['fuse']}` was set, but no arm had fusable configs)" if e["fuse"] > 1 else "")
                + ": each trial's device-hours are its own training time.")
    arms = "; ".join(f"{arm}: {v['configs']} configs in {v['groups']} Ray trials" for arm, v in e["by_arm"].items())
    return (f"Execution: **fused trials** (`--fuse {e['fuse']}`): selection configs of one shape trained as one stacked model, "
            f"up to {e['fuse']} per Ray trial ({arms}); every other trial ran one config. A fused config's device-hours are its equal "
            f"share of its group's time in each epoch it trained (the tracking contract), so they add up to the group's. The "
            f"savings below are for this execution; without fusion the fused arms cost more per config (README, \"Fused trials\").")
