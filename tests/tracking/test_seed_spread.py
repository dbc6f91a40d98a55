"""benchmarks/seed_spread.py on a real stored comparison (the golden smoke
comparison's MLflow store): a draw against itself trains every trial alike
and moves no savings; a draw whose trials differ is counted as parted; the
savings are the baseline's device-hours over the arm's."""
from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from golden_report import golden_store

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spread")
    uri = golden_store(tmp)
    a = tmp / "golden.db"
    b = tmp / "b.db"
    shutil.copy(a, b)
    # draw b: one AWNN selection trial learned another width and ran 2x the device-hours
    con = sqlite3.connect(b)
    (run,) = con.execute("select r.run_uuid from runs r join tags t on t.run_uuid = r.run_uuid and t.key = 'awnn.trial_key' and t.value = 'sel-0000' "
                         "join tags s on s.run_uuid = r.run_uuid and s.key = 'awnn.strategy' and s.value = 'awnn' "
                         "join tags p on p.run_uuid = r.run_uuid and p.key = 'awnn.phase' and p.value = 'selection'").fetchall()
    con.execute("update tags set value = '[999]' where run_uuid = ? and key = 'awnn.widths'", run)
    con.execute("update metrics set value = value * 2 where run_uuid = ? and key = 'device_hours'", run)
    con.execute("update latest_metrics set value = value * 2 where run_uuid = ? and key = 'device_hours'", run)
    con.commit()
    con.close()
    return uri, f"sqlite:///{b}"


def test_a_draw_against_itself_is_alike_and_moves_nothing(stores, capsys):
    import seed_spread

    out = seed_spread.main([f"one={stores[0]}", f"two={stores[0]}"])
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")  # one JSON object, last
    for arm, (alike, parted) in out["same_as_first"]["two"].items():
        assert parted == 0 and alike > 0, arm
    fixed = out["draws"]["one"]["arms"]["fixed"]
    awnn = out["draws"]["one"]["arms"]["awnn"]
    total = (fixed["selection_device_hours"] + fixed["assessment_device_hours"]) / (awnn["selection_device_hours"] + awnn["assessment_device_hours"])
    assert out["savings"]["one"]["awnn"]["selection"] == round(fixed["selection_device_hours"] / awnn["selection_device_hours"], 3)
    assert out["savings"]["one"]["awnn"]["total"] == round(total, 3)
    lo, hi = out["spread"]["awnn"]["selection"]
    assert lo == hi == out["savings"]["two"]["awnn"]["selection"]


def test_a_trial_that_learned_otherwise_is_counted_and_moves_the_savings(stores):
    import seed_spread

    out = seed_spread.main([f"one={stores[0]}", f"two={stores[1]}"])
    alike, parted = out["same_as_first"]["two"]["awnn"]
    assert parted == 1 and alike > 0
    assert out["same_as_first"]["two"]["fixed"][1] == 0
    one, two = out["savings"]["one"]["awnn"]["selection"], out["savings"]["two"]["awnn"]["selection"]
    assert two < one and out["spread"]["awnn"]["selection"] == [two, one]


def test_bad_arguments_say_what_was_expected(stores):
    import seed_spread

    with pytest.raises(SystemExit, match="expected LABEL=URI, found 'nolabel'"):
        seed_spread.main(["nolabel"])
    with pytest.raises(SystemExit, match="the label 'x' is given twice"):
        seed_spread.main([f"x={stores[0]}", f"x={stores[0]}"])
    with pytest.raises(SystemExit, match="no draw has the baseline arm 'tpe'"):
        seed_spread.main([f"x={stores[0]}", "--baseline", "tpe"])
