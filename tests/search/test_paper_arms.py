"""The paper's other arms (issue #18) without Ray: `awnn-asha` (the AWNN grid
under ASHA) and `fixedplus` (App. D's Fixed+: a fixed network re-trained at
the width AWNN learned), driven by the fake trial loop of test_phases."""
from __future__ import annotations

import re

import pytest

from search.budget import resolve_budget
from search.errors import OptionError
from search.grid import find_grid
from search.fixedplus import fixedplus_config
from search.strategies import REGISTRY, StrategyOptions, asha_milestones, make_arms
from test_phases import drive, make, score

SMOKE, QUICK = resolve_budget("smoke"), resolve_budget("quick")
LEARNED = {1: [10, 30], 2: [20, 41]}  # AWNN re-training run r: widths at its selected epoch (2 hidden layers)


def learned(spec: dict) -> dict:
    """score() plus learned widths for the AWNN re-training runs."""
    out = score(spec)
    if spec["strategy"] == "awnn" and spec["phase"] == "assessment":
        out["widths_at_best"] = LEARNED[spec["index"]]
    return out


def test_awnn_asha_runs_the_awnn_grid_under_asha():
    (arm,) = make_arms("doublemoon", ["awnn-asha"], StrategyOptions(seed=3), QUICK)
    grid = find_grid("doublemoon", "awnn")
    specs = arm.selection_specs(QUICK)
    assert arm.grid.path == grid.path and arm.trials == grid.size
    assert sorted(sp.index for sp in specs) == list(range(grid.size)) and [sp.index for sp in specs] != list(range(grid.size))
    rungs = asha_milestones(arm.grace_period(QUICK), 3.0, QUICK.epochs(grid))
    assert rungs and all(sp.report_at == rungs and sp.config["model"] == "awnn" for sp in specs)
    assert REGISTRY["awnn-asha"].stops_early and REGISTRY["awnn-asha"].tags()["awnn.stops_early"] == "true"
    with pytest.raises(OptionError, match=re.escape("--strategies awnn-asha: the budget 'x' trains 1 epoch per trial")):
        import dataclasses
        make_arms("doublemoon", ["awnn-asha"], StrategyOptions(), dataclasses.replace(SMOKE, name="x", min_epochs=1, max_epochs=1))


def test_awnn_asha_stops_trials_in_its_own_bracket(tmp_path):
    arms, record, hooks, searcher = make(["awnn", "awnn-asha"], SMOKE, tmp_path)
    suggested = drive(searcher, record)
    asha = [s for s in suggested if s["strategy"] == "awnn-asha" and s["phase"] == "selection"]
    assert len(asha) == find_grid("doublemoon", "awnn").size and all(s["report_at"] for s in asha)
    assert any(c[:2] == ("ended", "awnn-asha/assessment") for c in hooks.calls)


@pytest.mark.parametrize("families,message", [
    (["fixedplus"], "--strategies fixedplus: re-trains at the width the awnn arm learned; list awnn before it (e.g. --strategies awnn,fixedplus)"),
    (["fixed", "fixedplus", "awnn"], "list awnn before it (e.g. --strategies fixed,awnn,fixedplus)"),
])
def test_fixedplus_needs_the_awnn_arm_before_it(families, message):
    with pytest.raises(OptionError, match=re.escape(message)):
        make_arms("doublemoon", families, StrategyOptions(), QUICK)


def test_fixedplus_widths_option_is_checked():
    with pytest.raises(OptionError, match=re.escape("--fixedplus-widths: expected one of ['mean', 'per-layer'], found 'perlayer' "
                                                    "(did you mean 'per-layer'?)")):
        make_arms("doublemoon", ["awnn", "fixedplus"], StrategyOptions(fixedplus_widths="perlayer"), QUICK)
    with pytest.raises(OptionError, match="one width per layer exists for the tabular MLPs only; task nci1 is graph"):
        make_arms("nci1", ["awnn", "fixedplus"], StrategyOptions(fixedplus_widths="per-layer"), QUICK)


def _awnn_outcomes(fold_prefix=""):
    return [{"key": f"{fold_prefix}ass-0{r}", "status": "ok", "widths_at_best": w} for r, w in LEARNED.items()] + [
        {"key": f"{fold_prefix}ass-09", "status": "diverged", "widths_at_best": [999, 999]},  # not a learned width: left out
        {"key": f"{fold_prefix}ass-08", "status": "ok"}]  # no widths recorded: left out


@pytest.mark.parametrize("widths", ["mean", "per-layer"])
def test_fixedplus_config_is_the_awnn_choice_at_the_learned_width(widths):
    (awnn, plus) = make_arms("spiralhard", ["awnn", "fixedplus"], StrategyOptions(fixedplus_widths=widths), QUICK)
    selected = {"key": "sel-0007", "config": {**awnn.selection_specs(QUICK)[7].config, "hidden_layers": 2, "activation": "relu6",
                                              "batch_size": 128, "lr": 0.01}}
    chosen = fixedplus_config(plus, selected, _awnn_outcomes(), QUICK)
    assert list(chosen) == [None]  # the hold-out
    cfg = chosen[None]["config"]
    # the paper's Fixed+: the mean over hidden layers, averaged over the runs: ((10+30)/2 + (20+41)/2) / 2 = 25.25
    assert cfg["model"] == "fixed" and cfg["width"] == 25 and cfg["optimizer"] == "adam"
    assert (cfg["hidden_layers"], cfg["activation"], cfg["batch_size"], cfg["lr"]) == (2, "relu6", 128, 0.01)
    assert "sigma_theta" not in cfg or cfg["sigma_theta"] == find_grid("spiralhard", "fixed").configs()[0].get("sigma_theta")
    assert chosen[None]["learned_widths"] == [15, 36] and chosen[None]["runs"] == 2  # (10+20)/2, (30+41)/2 rounded
    assert cfg.get("layer_widths", "") == ("15,36" if widths == "per-layer" else "")
    from awnn.config import TrainConfig
    TrainConfig.from_dict(cfg)  # a valid config


def test_fixedplus_config_per_outer_fold_and_none_without_learned_widths():
    (awnn, plus) = make_arms("nci1", ["awnn", "fixedplus"], StrategyOptions(), QUICK)
    selected = {"key": "f0-sel-0001", "config": {**awnn.selection_specs(QUICK)[0].config}}
    outcomes = [{"key": "f0-ass-01", "status": "ok", "widths_at_best": [8, 8]}, {"key": "f3-ass-01", "status": "ok", "widths_at_best": [20, 40]}]
    chosen = fixedplus_config(plus, selected, outcomes, QUICK)
    assert {f: c["config"]["width"] for f, c in chosen.items()} == {0: 8, 3: 30}
    assert {f: c["config"]["fold"] for f, c in chosen.items()} == {0: 0, 3: 3}
    assert fixedplus_config(plus, selected, [{"key": "ass-01", "status": "failed"}], QUICK) == {}
    assert fixedplus_config(plus, None, outcomes, QUICK) == {}


def test_fixedplus_arm_retrains_after_awnn_and_has_no_selection_sweep(tmp_path):
    arms, record, hooks, searcher = make(["awnn", "fixedplus"], SMOKE, tmp_path)
    suggested = drive(searcher, record, outcome=learned)
    plus = [s for s in suggested if s["strategy"] == "fixedplus"]
    runs = SMOKE.runs(find_grid("doublemoon", "fixed"))
    assert len(plus) == runs and all(s["phase"] == "assessment" and s["config"]["model"] == "fixed" for s in plus)
    assert all(s["config"]["width"] == 25 and s["config"]["split"] == "outer" for s in plus)
    assert [s["config"]["seed"] for s in plus] == list(range(1, runs + 1))
    sweeps = [c[1] for c in hooks.calls if c[0] == "started"]
    assert sweeps == ["awnn/selection", "awnn/assessment", "fixedplus/assessment"]
    assert ("selected", "fixedplus", "from-" + next(c[2] for c in hooks.calls if c[:2] == ("selected", "awnn"))) in hooks.calls
    result = next(r for r in searcher.results if r.strategy == "fixedplus")
    assert result.summary["runs_ok"] == runs and result.widths() == "25 x 1"


def test_fixedplus_is_skipped_with_a_line_when_awnn_learned_nothing(tmp_path):
    arms, record, hooks, searcher = make(["awnn", "fixedplus"], SMOKE, tmp_path)
    suggested = drive(searcher, record)  # score(): no widths recorded
    assert not [s for s in suggested if s["strategy"] == "fixedplus"]
    assert any("fixedplus: the awnn arm has no finished re-training run with learned widths; no re-training" in line for line in hooks.logs)
