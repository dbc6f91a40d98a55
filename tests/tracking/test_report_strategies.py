"""The cost report of a comparison of every strategy: fixed, awnn, tpe, asha
and random, the stochastic three run twice (`--repeats 2`), on the session's
real five-strategy comparison (`all_strategies_comparison`: real Ray, real
MLflow on SQLite).  Every number is checked against values read from MLflow
independently of tracking.analysis.

Also: a comparison without either baseline (`--strategies random,tpe`),
and a store written before arms existed (the smoke comparison with its arm
tags removed) must still give a report."""
from __future__ import annotations

import filecmp
import json
import math
import shutil
import statistics

import numpy as np
import pytest

from conftest import run_awnn
from tracking import analysis as A
from tracking.report import PLOTS, validate_summary

pytestmark = pytest.mark.slow

ARMS = ["fixed", "awnn", "tpe.r1", "tpe.r2", "asha.r1", "asha.r2", "random.r1", "random.r2"]
FAMILIES = {"fixed": ["fixed"], "awnn": ["awnn"], "tpe": ["tpe.r1", "tpe.r2"], "asha": ["asha.r1", "asha.r2"], "random": ["random.r1", "random.r2"]}
FILES = ["report.md", "report.html", "summary.json", *PLOTS.values()]


def _report(uri, out, cwd, *extra):
    p = run_awnn(["report", "--tracking-uri", uri, "--out", str(out), *extra], cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _trial_runs(uri, comparison):
    """Trial runs of the comparison, read straight from MLflow."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    return client.search_runs([exp.experiment_id], f"tags.`awnn.comparison` = '{comparison}' and tags.`awnn.kind` = 'trial'", max_results=5000)


def _report_here(uri, out, **kw):
    """The same report as `awnn report`, built in this process (no interpreter start)."""
    from tracking.report import write_report

    write_report(uri, out, **kw)


@pytest.fixture(scope="module")
def five(all_strategies_comparison, tmp_path_factory):
    """The five-strategy comparison's report rebuilt by `awnn report` in a fresh
    process ("a"); "b" is the one `awnn compare` wrote at its end."""
    work = tmp_path_factory.mktemp("report-strategies")
    uri = all_strategies_comparison["tracking_uri"]
    root = A.find_comparison(uri)[0]
    cid = root.data.tags["awnn.comparison"]
    _report(uri, work / "a", work, "--comparison", cid)
    runs = _trial_runs(uri, cid)
    written = all_strategies_comparison["dir"] / "awnn-results" / "reports" / cid
    return {"uri": uri, "id": cid, "root": root, "a": work / "a", "b": written, "runs": runs,
            "summary": json.loads((work / "a" / "summary.json").read_text()), "md": (work / "a" / "report.md").read_text(),
            "html": (work / "a" / "report.html").read_text(), "compare": all_strategies_comparison}


def _hours(five, arm, phase, status=None):
    return sum(r.data.metrics["device_hours"] for r in five["runs"] if r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == phase
               and (status is None or r.data.tags["awnn.status"] == status))


def _sel(five, arm):
    return _hours(five, arm, "selection")


def _tot(five, arm):
    return _hours(five, arm, "selection") + _hours(five, arm, "assessment")


# ------------------------------------------------------------ every arm shown
def test_report_lists_every_family_and_every_arm(five):
    assert five["root"].data.tags["awnn.arms"] == ",".join(ARMS)  # what the search side recorded
    s = five["summary"]
    assert validate_summary(s) == []
    assert s["arms"] == ARMS and list(s["strategies"]) == ARMS
    assert s["families"] == FAMILIES and s["repeats"] == 2
    for arm in ARMS:
        fam = A.arm_family(arm)
        assert s["strategies"][arm]["family"] == fam
        assert s["strategies"][arm]["repeat"] == (0 if fam in ("fixed", "awnn") else int(arm[-1]))
        assert s["strategies"][arm]["order"] == ("random" if fam in ("fixed", "awnn") else "actual")
        for ph in ("selection", "total"):
            label = "selection" if ph == "selection" else "total"
            assert f"| {arm} | {label} |" in five["md"], (arm, ph)
            assert f"<tr><td>{arm}</td><td>{label}</td>" in five["html"], (arm, ph)
        assert s["test_acc_mean"][arm] is not None and 0 <= s["test_acc_mean"][arm] <= 1
    assert "strategies fixed, awnn, tpe (2 repeats: tpe.r1, tpe.r2), asha (2 repeats: asha.r1, asha.r2), random (2 repeats: random.r1, random.r2)" in five["md"]


def test_every_arms_cost_is_the_sum_of_its_trials_in_mlflow(five):
    s = five["summary"]
    for arm in ARMS:
        for ph in ("selection", "assessment"):
            expected = _hours(five, arm, ph)
            assert expected > 0
            assert s["device_hours"][arm][ph] == pytest.approx(expected, rel=1e-12), (arm, ph)
            n = sum(1 for r in five["runs"] if r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == ph)
            assert s["strategies"][arm]["trials"][ph] == n
        assert s["device_hours"][arm]["total"] == pytest.approx(_tot(five, arm), rel=1e-12)
    # trials of one family are told apart by their arm, never pooled
    assert s["device_hours"]["tpe.r1"]["selection"] != s["device_hours"]["tpe.r2"]["selection"]


def test_compare_prints_a_line_for_every_arm(five):
    lines = five["compare"]["stdout"].splitlines()
    for arm in ARMS:
        assert sum(1 for line in lines if line.split(" ", 1)[0] == arm) == 1, arm
    assert "trials were stopped early by ASHA (their partial compute is counted above): asha.r1 " in five["compare"]["stdout"]
    assert "=stopped" not in five["compare"]["stdout"]  # not listed among the trials that went wrong


# ---------------------------------------------------------------- savings
def test_savings_against_the_full_grid_match_a_hand_computation(five):
    """One definition and direction (issue #32): every arm's savings = the fixed grid's device-hours / the arm's."""
    s = five["summary"]
    assert s["baseline"] == "fixed" and s["savings_notes"] == []
    assert list(s["savings"]) == [a for a in ARMS if a != "fixed"]  # the baseline against itself is no row
    for arm, sv in s["savings"].items():
        assert sv["baseline"] == "fixed"
        assert sv["selection"] == float(f"{_sel(five, 'fixed') / _sel(five, arm):.3g}"), arm
        assert sv["total"] == float(f"{_tot(five, 'fixed') / _tot(five, arm):.3g}"), arm
        assert sv["selection_ci"][0] <= sv["selection"] <= sv["selection_ci"][1]
        assert sv["total_ci"][0] <= sv["total"] <= sv["total_ci"][1]
        assert f"| {arm} | " in five["md"].split("## Savings vs `fixed`", 1)[1]
    # AWNN's grid is cheaper than the full grid: above 1
    assert s["savings"]["awnn"]["selection"] > 1


# -------------------------------------------------------------------- ASHA
def test_asha_stopped_trials_are_counted_and_their_partial_cost_is_in_the_totals(five):
    s = five["summary"]
    for arm in FAMILIES["asha"]:
        sel = [r for r in five["runs"] if r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == "selection"]
        stopped = [r for r in sel if r.data.tags["awnn.status"] == "stopped"]
        ok = [r for r in sel if r.data.tags["awnn.status"] == "ok"]
        assert stopped, f"{arm}: ASHA stopped no trial; the smoke budget should make it stop some"
        assert all(r.data.metrics["device_hours"] > 0 for r in stopped)
        counts = s["strategies"][arm]["status_counts"]["selection"]
        assert counts == {"ok": len(ok), "stopped": len(stopped)}
        # the total is every trial's device-hours, the stopped ones' partial compute included
        every = sum(r.data.metrics["device_hours"] for r in sel)
        assert s["device_hours"][arm]["selection"] == pytest.approx(every, rel=1e-12)
        assert s["device_hours"][arm]["selection"] > sum(r.data.metrics["device_hours"] for r in ok)
        assert f"| {arm} | selection | 30 | 30 | {len(ok)} ok, {len(stopped)} stopped | 30 |" in five["md"]
        stopped_hours = sum(r.data.metrics["device_hours"] for r in stopped)
        assert f"{arm} {len(stopped)} of 30 selection trials" in five["md"]
        # a stopped trial is never the selected one
        assert s["strategies"][arm]["selected_key"] not in {r.data.tags["awnn.trial_key"] for r in stopped}
        assert stopped_hours > 0
    assert "partial device-hours are included in every total" in five["md"]
    assert not [p for p in s["problems"] if "asha" in p and "stopped" in p]  # ASHA's normal working is no problem


# ------------------------------------------------------- any-time, target
def _as_run(five, arm):
    """(cumulative device-hours, best selectable score so far) per selection trial, in the order they ended."""
    sel = [r for r in five["runs"] if r.data.tags["awnn.arm"] == arm and r.data.tags["awnn.phase"] == "selection"]
    sel.sort(key=lambda r: (r.info.end_time, r.info.start_time, r.data.tags["awnn.trial_key"]))
    cum, best, out = 0.0, -math.inf, []
    for r in sel:
        cum += r.data.metrics["device_hours"]
        if r.data.tags["awnn.status"] in ("ok", "width_capped"):
            best = max(best, r.data.metrics["best_val_acc"])
        out.append((cum, best))
    return out


def test_anytime_curve_and_cost_to_target_follow_the_order_the_trials_ran(five):
    data = A.load_comparison(five["uri"], comparison=five["id"], history_keys=())
    curve = A.anytime(data, n_orders=50)
    target = five["summary"]["target"]
    for arm in ARMS:
        c = curve[curve["strategy"] == arm]
        if A.arm_family(arm) in ("fixed", "awnn"):
            assert set(c["order"]) == {"random"} and target["strategies"][arm]["order"] == "random"
            continue
        steps = _as_run(five, arm)
        assert set(c["order"]) == {"actual"} and len(c) == len(steps)
        assert c["device_hours"].tolist() == pytest.approx([x for x, _ in steps], rel=1e-12)
        expected = [b if math.isfinite(b) else math.nan for _, b in steps]
        assert np.allclose(c["mean"].to_numpy(dtype=float), expected, equal_nan=True), arm
        first = next((x for x, b in steps if b >= target["target"] - 1e-12), None)
        row = target["strategies"][arm]
        assert row["order"] == "actual"
        if first is None:
            assert row["reached"] == 0 and row["hours_mean"] is None
        else:
            assert row["reached"] == 1 and row["hours_mean"] == pytest.approx(first, rel=1e-12)
    assert "| tpe.r1 | as run |" in five["md"] and "| fixed | random (500 orders) |" in five["md"]


# ----------------------------------------------------------------- repeats
def test_repeats_table_gives_the_spread_of_each_stochastic_family_over_its_two_arms(five):
    s = five["summary"]
    spread = s["repeat_spread"]
    assert set(spread) == {"tpe", "asha", "random"}  # fixed and awnn ran once
    for fam, block in spread.items():
        arms = FAMILIES[fam]
        assert block["arms"] == arms and block["n"] == 2
        sel = [s["device_hours"][a]["selection"] for a in arms]
        assert block["selection_hours"]["values"] == pytest.approx(sel, rel=1e-12)
        assert block["selection_hours"]["mean"] == pytest.approx(statistics.fmean(sel), rel=1e-12)
        assert block["selection_hours"]["std"] == pytest.approx(statistics.stdev(sel), rel=1e-9)
        assert (block["selection_hours"]["min"], block["selection_hours"]["max"]) == pytest.approx((min(sel), max(sel)), rel=1e-12)
        assert block["total_hours"]["values"] == pytest.approx([_tot(five, a) for a in arms], rel=1e-12)
        assert block["test_acc_mean"]["values"] == pytest.approx([s["test_acc_mean"][a] for a in arms], rel=1e-12)
        assert block["savings_vs_fixed"]["values"] == pytest.approx([_sel(five, "fixed") / _sel(five, a) for a in arms], rel=1e-12)
        assert "savings_vs_awnn" not in block  # one baseline
        reached = [a for a in arms if s["target"]["strategies"][a]["reached"] > 0]
        assert block["reached_target"] == len(reached)
        assert block["hours_to_target"]["n"] == len(reached)
        assert f"| {fam} | selection device-hours | 2 of 2 |" in five["md"]
        assert f"| {fam} | selection savings vs fixed | 2 of 2 |" in five["md"]
        assert f"| {fam} | reached target | {len(reached)} of 2 |" in five["md"]
    assert five["md"].index("## Repeats: spread across seeds") < five["md"].index("## AWNN per-step overhead")
    assert "Repeats: spread across seeds" in five["html"]


# ------------------------------------------------------------ determinism
def test_five_strategy_report_is_rebuilt_identically(five):
    """`awnn report` in a fresh process rebuilds, byte for byte, the report `awnn compare` wrote."""
    match, mismatch, errors = filecmp.cmpfiles(five["a"], five["b"], FILES, shallow=False)
    assert mismatch == [] and errors == [] and sorted(match) == sorted(FILES)


# --------------------------------------------------- no reference, old store
@pytest.fixture(scope="module")
def no_reference(tmp_path_factory):
    """A real comparison of random and tpe only: neither awnn nor the full grid ran."""
    work = tmp_path_factory.mktemp("no-reference")
    run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "random,tpe", "--num-cpus", "2"], cwd=work, check=True)
    uri = f"sqlite:///{work / 'mlflow.db'}"
    _report_here(uri, work / "report")
    return {"uri": uri, "summary": json.loads((work / "report" / "summary.json").read_text()), "md": (work / "report" / "report.md").read_text()}


def test_report_without_awnn_or_fixed_says_there_are_no_savings(no_reference):
    s = no_reference["summary"]
    assert validate_summary(s) == []
    assert s["arms"] == ["random", "tpe"] and s["repeats"] == 1 and s["repeat_spread"] == {}
    assert s["baseline"] is None and s["savings"] == {} and len(s["savings_notes"]) == 1
    assert "No savings: they need `fixed` (the full fixed-width grid) or `awnn` (the AWNN grid, the method under test) as the baseline, " \
           "and the comparison ran neither (arms: random, tpe)." in no_reference["md"]
    assert "the comparison ran neither `fixed` nor `awnn` as a baseline" in s["verdict"]["text"]
    for arm in ("random", "tpe"):
        assert s["device_hours"][arm]["total"] > 0 and f"| {arm} | selection |" in no_reference["md"]
        assert s["target"]["strategies"][arm]["order"] == "actual"


def test_a_store_written_before_arms_existed_gives_the_same_report(smoke_comparison, tmp_path):
    """The smoke comparison's store with the arm tags removed, as `awnn compare` wrote it before arms: the same report."""
    from mlflow.tracking import MlflowClient

    db = tmp_path / "old.db"
    shutil.copy(smoke_comparison["tracking_uri"][len("sqlite:///"):], db)
    uri = f"sqlite:///{db}"
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("awnn-doublemoon")
    removed = 0
    for r in client.search_runs([exp.experiment_id], "", max_results=5000):
        for tag in ("awnn.arm", "awnn.repeat", "awnn.arms", "awnn.repeats"):
            if tag in r.data.tags:
                client.delete_tag(r.info.run_id, tag)
                removed += 1
    assert removed > 0  # the current search side writes them
    cid = A.find_comparison(uri)[0].data.tags["awnn.comparison"]
    _report_here(uri, tmp_path / "old", comparison=cid)
    _report_here(smoke_comparison["tracking_uri"], tmp_path / "new", comparison=cid)
    # summary.json names its store (mlflow.serve), as report.md does: compared with the URIs replaced
    old, new = (json.loads((tmp_path / d / "summary.json").read_text().replace(u, "URI"))
                for d, u in (("old", uri), ("new", smoke_comparison["tracking_uri"])))
    assert old["arms"] == ["fixed", "awnn"] and old["families"] == {"fixed": ["fixed"], "awnn": ["awnn"]}
    assert old == new
    md = lambda d, u: (tmp_path / d / "report.md").read_text().replace(u, "URI")  # noqa: E731
    assert md("old", uri) == md("new", smoke_comparison["tracking_uri"])
