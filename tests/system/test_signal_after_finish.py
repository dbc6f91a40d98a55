"""A signal that reaches `awnn compare` after the comparison has finished (MLflow
holds every run; the driver prints its summary and writes the report) is not an
interruption of the comparison: the line says the results are complete and
gives the command that writes the report, which then works.  (It said
"interrupted; run the same command with --resume to continue", as for a
comparison cut short.)

The driver is held at the start of its report writer (a wrapper, injected the
way tests/system/test_signal_cut_short.py injects its faults, that marks a file
and waits) so the test's own SIGTERM, sent from outside once the mark is
there, lands there on any machine.  (Sent on the summary's first line instead,
it raced the report: on a busy CI machine the report was written first, and
the test failed with "the test tested nothing".)"""
from __future__ import annotations

import re
import shlex
import signal
import sys

import pytest

from conftest import run_awnn
from fault_helpers import Driver, trial_runs, wait_for, write_inputs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


# `awnn`, whose report writer marks a file when the driver reaches it and waits there (for a signal, at most 120 s)
HELD_AT_REPORT = '''
import sys
import time
from pathlib import Path

from search.tune import tune_environment

tune_environment()
import tracking.report as report

mark = Path(sys.argv.pop(1))
real = report.write_report


def held(*args, **kwargs):
    mark.write_text("at the report")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # the signal's interrupt lands here
        time.sleep(0.05)
    return real(*args, **kwargs)


report.write_report = held
from search.cli import entry

entry()
'''


@pytest.mark.timeout(300)
def test_sigterm_during_the_summary_or_report_of_a_finished_comparison_says_it_is_complete(tmp_path):
    grids, budget = write_inputs(tmp_path, 20)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["compare", "--task", "doublemoon", "--strategies", "awnn", "--budget", str(budget), "--grid-dir", str(grids),
            "--storage", str(tmp_path / "results"), "--tracking-uri", tracking, "--num-cpus", "2"]
    script, mark = tmp_path / "awnn_held.py", tmp_path / "at-report"
    script.write_text(HELD_AT_REPORT)
    driver = Driver(args, cwd=tmp_path, command=[sys.executable, str(script), str(mark)])
    try:
        # the report writer is reached once MLflow holds the finished comparison and its summary is printed
        wait_for(mark.exists, 240, "the driver at its report writer", driver.proc, interval=0.05, output=driver.output)
        assert "\nComparison " in driver.output(), driver.output()[-3000:]
        driver.proc.send_signal(signal.SIGTERM)
        code = driver.wait(60)
        out = driver.output()
    finally:
        driver.cleanup()
    assert "Report: " not in out, "the report was written before the signal: the test tested nothing"
    assert code == 130, out[-3000:]
    assert "Traceback" not in out and "--resume to continue" not in out, out[-3000:]
    line = next(ln for ln in out.splitlines() if "interrupted" in ln)
    m = re.fullmatch(r"awnn compare: interrupted after comparison (\S+) had finished: its results are complete in MLflow; "
                     r"the report was not written: (awnn report .+) writes it \(so does the same command with --resume\)", line)
    assert m, line
    runs = trial_runs(tracking)
    assert runs and all(r.info.status == "FINISHED" and r.data.tags["awnn.status"] == "ok" for r in runs)
    # the command the line gives writes the report where compare would have
    report = shlex.split(m.group(2))
    assert report[report.index("--comparison") + 1] == m.group(1)
    out_dir = report[report.index("--out") + 1]
    assert out_dir == str(tmp_path / "results" / "reports" / m.group(1))
    run_awnn(report[1:], cwd=tmp_path, timeout=180, check=True)
    assert (tmp_path / "results" / "reports" / m.group(1) / "report.html").is_file()
