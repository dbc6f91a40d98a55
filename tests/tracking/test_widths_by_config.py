"""benchmarks/widths_by_config.py on a real stored comparison (the golden smoke comparison's MLflow store): one row
per AWNN selection config with each draw's stored values, the groups' device-seconds adding up to every trial's."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from golden_report import golden_store

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_every_awnn_selection_config_is_a_row_with_each_draws_values(tmp_path, monkeypatch, capsys):
    import widths_by_config as W

    uri = golden_store(tmp_path)
    other = tmp_path / "other.db"
    shutil.copy(tmp_path / "golden.db", other)
    out = tmp_path / "w.json"
    monkeypatch.setattr(sys, "argv", ["widths_by_config.py", f"a={uri}", f"b=sqlite:///{other}", "--out", str(out)])
    W.main()
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last == json.loads(out.read_text())

    client = MlflowClient(uri)
    exps = [e.experiment_id for e in client.search_experiments()]
    trials = client.search_runs(exps, "tags.`awnn.kind` = 'trial' and tags.`awnn.arm` = 'awnn' and tags.`awnn.phase` = 'selection'")
    assert trials, "the golden store has no AWNN selection trials"
    assert len(last["rows"]) == len({tuple(t.data.params.get(k) for k in W.KEYS) for t in trials})
    for row in last["rows"]:
        assert row["draws"] == ["a", "b"] and row["width_total"][0] == row["width_total"][1]  # the same store twice
    by_config = {tuple(t.data.params.get(k) for k in W.KEYS): t for t in trials}
    row = last["rows"][0]
    t = by_config[tuple(row[k] for k in W.KEYS)]
    assert row["width_total"][0] == int(t.data.metrics["width_total"])
    assert row["device_s"][0] == pytest.approx(3600 * t.data.metrics["device_hours"], abs=0.05)
    total = 2 * sum(3600 * t.data.metrics["device_hours"] for t in trials)
    groups = last["device_s_by_group"]
    assert sum(g["device_s"] for g in groups.values()) == pytest.approx(total, abs=0.1 * len(trials))
    assert sum(g["share"] for g in groups.values()) == pytest.approx(1.0, abs=0.01)


def test_a_store_pair_without_a_name_is_refused(monkeypatch):
    import widths_by_config as W

    monkeypatch.setattr(sys, "argv", ["widths_by_config.py", "sqlite:///x.db"])
    with pytest.raises(SystemExit, match="expected NAME=TRACKING_URI"):
        W.main()
