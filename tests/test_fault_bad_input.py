"""Bad input to `awnn sweep` not covered by tests/test_grid.py and
tests/test_sweep.py: an unreachable Ray address, a missing data directory, a
broken budget file.  Each exits 2 in seconds with one line naming what is
wrong and where; no Ray trial starts and nothing is written to MLflow."""
from __future__ import annotations

import time

import pytest

from conftest import run_awnn
from servers import free_port


def _one_line_error(p, *fragments: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def _nothing_launched(tmp_path) -> None:
    assert not (tmp_path / "mlflow.db").exists()  # nothing written to MLflow
    assert not (tmp_path / "awnn-results").exists()  # no Ray trial started


@pytest.mark.fault
def test_fault_bad_input_unreachable_address_fails_in_seconds(tmp_path):
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", "smoke", "--address", f"127.0.0.1:{port}"],
                 cwd=tmp_path, timeout=120)
    _one_line_error(p, f"--address 127.0.0.1:{port}: cannot join the Ray cluster", "nothing answers")
    assert time.monotonic() - t0 < 60  # ray.init alone would retry for minutes
    _nothing_launched(tmp_path)


@pytest.mark.fault
def test_fault_bad_input_missing_data_directory_exits_2(tmp_path):
    p = run_awnn(["sweep", "--task", "mnist", "--strategy", "fixed", "--budget", "smoke"], cwd=tmp_path, timeout=120)
    line = _one_line_error(p, "MNIST: expected files", "(missing: ")
    assert " in data" in line or "/data" in line, line  # the folder it looked in
    _nothing_launched(tmp_path)


@pytest.mark.fault
@pytest.mark.parametrize(
    "text, fragments",
    [
        ("epoch_scale: [0.1\n", ["b.yaml: malformed YAML"]),
        ("epoch_scale: 0.1\nmax_epochs: ten\n", ["b.yaml: key 'max_epochs': expected an integer >= 1, found 'ten'"]),
        ("min_epochs: 5\nmax_epochs: 2\n", ["b.yaml: key 'max_epochs': expected a value >= min_epochs=5, found 2"]),
        ("- 1\n- 2\n", ["b.yaml: expected a mapping"]),
    ],
    ids=["malformed", "wrong-type", "out-of-range", "not-a-mapping"],
)
def test_fault_bad_input_broken_budget_file_exits_2(tmp_path, text, fragments):
    budget = tmp_path / "b.yaml"
    budget.write_text(text)
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", str(budget)], cwd=tmp_path, timeout=120)
    _one_line_error(p, *fragments)
    _nothing_launched(tmp_path)
