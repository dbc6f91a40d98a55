"""`awnn draws`: the verdict over draws (--train-seed) of one comparison, read
from real MLflow stores written by real `awnn compare` runs on a local Ray.

Draw 0 is the session's smoke comparison (its own store); this module's store
holds draw 1 twice (the same command run again: the newer counts) and an
`awnn`-only comparison with seed 1 (another comparison: set aside).  The
figures are checked against sums of the trial runs' device-hours read from
MLflow here, not against the module's own arithmetic."""
from __future__ import annotations

import json
import shutil
import statistics

import pytest
from mlflow.tracking import MlflowClient

from conftest import run_awnn, strict_json

pytestmark = pytest.mark.slow

DRAW = ["compare", "--task", "doublemoon", "--budget", "smoke", "--num-cpus", "2"]  # the smoke comparison's command


def _newest_comparison(uri: str) -> str:
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], "tags.`awnn.kind` = 'comparison'", order_by=["attributes.start_time DESC"])
    return runs[0].data.tags["awnn.comparison"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory, smoke_comparison):
    work = tmp_path_factory.mktemp("draws")
    uri = f"sqlite:///{work / 'mlflow.db'}"
    ids = {}
    for name, extra in (("older", ["--train-seed", "1"]), ("draw1", ["--train-seed", "1"]), ("awnn_only", ["--train-seed", "1", "--strategies", "awnn"])):
        p = run_awnn(DRAW + extra, cwd=work, check=True)  # (one after the other: the newest is this one)
        ids[name] = _newest_comparison(uri)
        assert ids[name] in p.stdout
    assert len(set(ids.values())) == 3, ids
    return {"dir": work, "uri": uri, "smoke_uri": smoke_comparison["tracking_uri"], "ids": ids}


def _hours(uri: str, comparison: str) -> dict:
    """(arm, phase) -> the sum of the trial runs' device_hours, read from MLflow here."""
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    runs = c.search_runs([exp.experiment_id], f"tags.`awnn.comparison` = '{comparison}' and tags.`awnn.kind` = 'trial'", max_results=5000)
    out: dict = {}
    for r in runs:
        key = (r.data.tags["awnn.arm"], r.data.tags["awnn.phase"])
        out[key] = out.get(key, 0.0) + r.data.metrics["device_hours"]
    return out


def _draws(stores, *uris, comparison=None, out):
    args = ["draws", "--out", str(out)] + [a for u in uris for a in ("--tracking-uri", u)] + (["--comparison", comparison] if comparison else [])
    return run_awnn(args, cwd=stores["dir"])


def test_two_stores_give_two_draws_with_their_savings_from_the_runs_and_the_rest_set_aside(stores, tmp_path):
    p = _draws(stores, stores["uri"], stores["smoke_uri"], comparison=stores["ids"]["draw1"], out=tmp_path / "d")
    assert p.returncode == 0, p.stderr
    s = strict_json((tmp_path / "d" / "draws.json").read_text())
    assert s["seeds"] == [0, 1] and s["baseline"] == "fixed" and s["arms"] == ["fixed", "awnn"]
    uris = {0: stores["smoke_uri"], 1: stores["uri"]}
    assert s["draws"][1]["comparison"] == stores["ids"]["draw1"]  # the newer of the two seed-1 comparisons
    sel_ratios, tot_ratios, means = [], [], {("fixed", "s"): [], ("awnn", "s"): [], ("fixed", "t"): [], ("awnn", "t"): []}
    for d in s["draws"]:
        h = _hours(uris[d["train_seed"]], d["comparison"])
        for arm in ("fixed", "awnn"):
            sel, tot = h[(arm, "selection")], h[(arm, "selection")] + h[(arm, "assessment")]
            assert d["arms"][arm]["selection_hours"] == pytest.approx(sel, rel=1e-9)
            assert d["arms"][arm]["total_hours"] == pytest.approx(tot, rel=1e-9)
            means[(arm, "s")].append(sel)
            means[(arm, "t")].append(tot)
            assert 0.5 <= d["arms"][arm]["test_acc_mean"] <= 1.0
        sel_ratios.append(h[("fixed", "selection")] / h[("awnn", "selection")])
        tot_ratios.append((h[("fixed", "selection")] + h[("fixed", "assessment")]) / (h[("awnn", "selection")] + h[("awnn", "assessment")]))
        assert d["arms"]["awnn"]["selection_savings"] == pytest.approx(sel_ratios[-1], rel=2e-3)  # (3 significant digits)
        assert d["arms"]["awnn"]["total_savings"] == pytest.approx(tot_ratios[-1], rel=2e-3)
    e = s["over_draws"]["awnn"]
    assert e["selection"]["min"] == pytest.approx(min(sel_ratios), rel=2e-3) and e["selection"]["max"] == pytest.approx(max(sel_ratios), rel=2e-3)
    assert e["selection"]["cheaper_in"] == sum(r > 1 for r in sel_ratios) and e["selection"]["of"] == 2
    assert e["total"]["cheaper_in"] == sum(r > 1 for r in tot_ratios)
    pooled = statistics.fmean(means[("fixed", "s")]) / statistics.fmean(means[("awnn", "s")])
    assert e["selection"]["pooled"] == pytest.approx(pooled, rel=2e-3)
    pooled_t = statistics.fmean(means[("fixed", "t")]) / statistics.fmean(means[("awnn", "t")])
    assert e["total"]["pooled"] == pytest.approx(pooled_t, rel=2e-3)
    aside = {a["comparison"]: a["why"] for a in s["set_aside"]}
    assert "the same train seed as " + stores["ids"]["draw1"] in aside[stores["ids"]["older"]]
    assert aside[stores["ids"]["awnn_only"]].startswith("another comparison (differs in: strategies")
    # the one line on stdout is the verdict, and draws.md carries it with a row per draw
    first = p.stdout.splitlines()[0]
    assert first == s["verdict"] and first.startswith("Over 2 draws (train seeds 0, 1) of doublemoon at budget smoke: awnn's selection was ")
    assert f"in {e['selection']['cheaper_in']} of 2 draws" in first
    md = (tmp_path / "d" / "draws.md").read_text()
    assert s["verdict"] in md and f"`{stores['ids']['draw1']}`" in md and f"`{s['draws'][0]['comparison']}`" in md
    assert f"`{stores['ids']['older']}` (train seed 1): the same train seed" in md


def test_a_comparison_with_no_other_draw_says_which_flag_gives_one(stores, tmp_path):
    # the newest in this store is the awnn-only comparison: no other comparison has its arms
    p = _draws(stores, stores["uri"], out=tmp_path / "d")
    assert p.returncode != 0
    err = p.stderr.strip().splitlines()[-1]
    assert stores["ids"]["awnn_only"] in err and "has no other draw" in err and "--train-seed 2" in err, p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "d" / "draws.json").exists()
    # the two seed-1 comparisons are one draw, not two
    p = _draws(stores, stores["uri"], comparison=stores["ids"]["draw1"], out=tmp_path / "d")
    assert p.returncode != 0 and "has no other draw" in p.stderr and "Traceback" not in p.stderr


def test_an_unfinished_comparison_is_not_a_draw_and_cannot_be_read_as_one(stores, tmp_path):
    copy = tmp_path / "mlflow.db"
    shutil.copy(stores["dir"] / "mlflow.db", copy)
    uri = f"sqlite:///{copy}"
    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("awnn-doublemoon")
    roots = {r.data.tags["awnn.comparison"]: r for r in c.search_runs([exp.experiment_id], "tags.`awnn.kind` = 'comparison'")}
    c.set_tag(roots[stores["ids"]["draw1"]].info.run_id, "awnn.state", "interrupted")  # as a driver stopped mid-comparison leaves it
    p = _draws(stores, uri, stores["smoke_uri"], comparison=stores["ids"]["draw1"], out=tmp_path / "a")
    assert p.returncode != 0 and "is interrupted, not finished" in p.stderr and "--resume" in p.stderr, p.stderr
    # read from the other draws: the interrupted one is set aside, the older seed-1 run counts in its place
    p = _draws(stores, uri, stores["smoke_uri"], comparison=stores["ids"]["older"], out=tmp_path / "b")
    assert p.returncode == 0, p.stderr
    s = json.loads((tmp_path / "b" / "draws.json").read_text())
    assert [d["comparison"] for d in s["draws"]][1] == stores["ids"]["older"]
    assert {a["comparison"]: a["why"] for a in s["set_aside"]}[stores["ids"]["draw1"]] == "not finished (interrupted)"


def test_a_store_with_no_comparison_and_an_unwritable_out_are_one_line_each(stores, tmp_path):
    empty = tmp_path / "empty.db"
    p = run_awnn(["draws", "--out", str(tmp_path / "d"), "--tracking-uri", f"sqlite:///{empty}"], cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" not in p.stderr and str(empty) in p.stderr, p.stderr
    assert not empty.exists()  # a read-only command makes no store
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = _draws(stores, stores["uri"], stores["smoke_uri"], comparison=stores["ids"]["draw1"], out=blocker / "d")
    assert p.returncode != 0 and "Traceback" not in p.stderr and "--out" in p.stderr, p.stderr
