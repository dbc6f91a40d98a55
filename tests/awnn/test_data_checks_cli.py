"""A cut or short dataset file stops `awnn compare` before anything trains:
exit code 2, one line naming the file and line, no MLflow run left RUNNING
(the driver loads the task first, search/sweep.py; awnn/data/checks.py)."""
import os

import pytest

from conftest import run_awnn
from data_helpers import cut_file, keep_lines, mid_line_offset, write_tu

pytest.importorskip("torch_geometric", reason="the graph tasks need torch-geometric")


def running_runs(db) -> list[str]:
    """Names of the MLflow runs still RUNNING in the SQLite store `db` (none if it was never created)."""
    if not db.exists():
        return []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    ids = [e.experiment_id for e in client.search_experiments()]
    return [r.info.run_name for r in client.search_runs(ids, max_results=1000) if r.info.status == "RUNNING"] if ids else []


@pytest.mark.parametrize("damage", ["edges-cut-mid-line", "short-graph-labels"])
def test_compare_on_a_damaged_tu_file_exits_2_with_one_line_naming_it(tmp_path, damage):
    data = tmp_path / "datasets"
    write_tu(str(data), "NCI1", n_graphs=60)
    raw = data / "NCI1" / "raw"
    if damage == "edges-cut-mid-line":
        path = raw / "NCI1_A.txt"
        line = 400
        cut_file(path, mid_line_offset(path, line))
        expected = f"{path}, line {line}: cut mid-line"
    else:
        path = raw / "NCI1_graph_labels.txt"
        keep_lines(path, 50)
        expected = f"{path}, line 50: expected one line per graph, 60 lines"
    db = tmp_path / "mlflow.db"
    p = run_awnn(["compare", "--task", "nci1", "--budget", "smoke", "--data-root", str(data), "--num-cpus", "1",
                  "--tracking-uri", f"sqlite:///{db}"], cwd=tmp_path, timeout=300)
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    errors = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"awnn compare: error: {expected}"), p.stderr[-3000:]
    assert "Traceback" not in p.stderr + p.stdout
    assert not running_runs(db)
    assert not os.path.exists(data / "NCI1" / "processed")  # torch-geometric never read the damaged files
