"""`awnn study` refuses a bad flag before anything starts (no Ray, nothing
written).  The study itself, on real AWNN sweeps, is in
tests/system/test_study_ray.py."""
from __future__ import annotations

from conftest import run_awnn


def test_study_rejects_an_unknown_profile(tmp_path):
    p = run_awnn(["study", "table1", "--profiles", "authors,paper"], cwd=tmp_path)
    assert p.returncode == 2
    assert "awnn study: error: --profiles: expected a comma-separated list of ['paper-text', 'authors'], found 'authors,paper'" in p.stderr
    assert not (tmp_path / "mlflow.db").exists()
