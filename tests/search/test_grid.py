"""Grid files: every packaged grid validates; invalid ones fail with one
line naming the file, the key, what was expected and what was found."""
from __future__ import annotations

import json
import textwrap

import pytest

from conftest import run_awnn, strict_json
from search.budget import BUDGETS, resolve_budget
from search.errors import BudgetError
from search.grid import GridError, discover_grids, find_grid, load_grid


def test_grids_all_packaged_files_validate():
    grids = discover_grids()
    assert len(grids) >= 6
    for g in grids:
        assert g.size == len(g.configs()) >= 1
        assert g.path.name == f"{g.task}-{g.strategy}.yaml"


def test_grids_spiralhard_has_paper_sizes():
    assert find_grid("spiralhard", "fixed").size == 180
    assert find_grid("spiralhard", "awnn").size == 18
    assert find_grid("spiral", "fixed").size == 60
    assert find_grid("doublemoon", "fixed").size == 30
    assert find_grid("doublemoon", "awnn").size == 6


def test_grids_configs_are_distinct_and_ordered():
    g = find_grid("spiralhard", "fixed")
    configs = g.configs()
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 180
    # last key fastest: lr alternates, batch_size changes last
    assert [c["lr"] for c in configs[:2]] == [0.1, 0.01]
    assert configs[0]["batch_size"] == 32 and configs[-1]["batch_size"] == 128


def _write(tmp_path, text: str):
    p = tmp_path / "g.yaml"
    p.write_text(textwrap.dedent(text))
    return p


GOOD = """
task: doublemoon
strategy: fixed
epochs: 10
fixed: {model: fixed}
grid:
  width: [8, 16]
"""


@pytest.mark.parametrize(
    "text, match",
    [
        ("task: [unclosed\n", r"g\.yaml: malformed YAML at line"),
        (GOOD + "extra: 1\n", r"g\.yaml: unknown key 'extra'"),
        (GOOD.replace("epochs: 10", "epoch: 10"), r"unknown key 'epoch' \(did you mean 'epochs'\?\)"),
        (GOOD.replace("width: [8, 16]", "width: []"), r"key 'grid.width': expected a non-empty list, found \[\]"),
        (GOOD.replace("width: [8, 16]", "widht: [8, 16]"), r"key 'grid.widht': expected a config key \(did you mean 'width'\?\)"),
        (GOOD.replace("width: [8, 16]", "width: [8, -16]"), r"key 'grid.width': expected an integer >= 1.*, found -16"),
        (GOOD.replace("width: [8, 16]", "width: [8, sixteen]"), r"key 'grid.width': expected int, found 'sixteen'"),
        (GOOD.replace("width: [8, 16]", "quantile_k: [0.9, 1.5]"), r"key 'grid.quantile_k': expected a number in the open interval \(0, 1\), found 1.5"),
        (GOOD.replace("task: doublemoon", "task: mnistt"), r"key 'task': expected one of \["),
        (GOOD.replace("strategy: fixed", "strategy: grid"), r"key 'strategy': expected one of \['fixed', 'awnn'\], found 'grid'"),
        (GOOD.replace("epochs: 10", "epochs: -1"), r"key 'epochs': expected an integer >= 1, found -1"),
        (GOOD.replace("epochs: 10", "epochs: ten"), r"key 'epochs': expected an integer >= 1, found 'ten'"),
        (GOOD.replace("fixed: {model: fixed}", "fixed: {model: fixed, activation: swish}"), r"key 'fixed.activation': expected one of \["),
        (GOOD.replace("fixed: {model: fixed}", "fixed: {model: fixed, epochs: 3}"), r"key 'fixed.epochs': expected a model/optimiser key"),
        (GOOD.replace("width: [8, 16]", "width: [8, 8]"), r"key 'grid.width': expected distinct values"),
        ("- just\n- a list\n", r"g\.yaml: expected a mapping"),
        (GOOD.replace("grid:\n  width: [8, 16]\n", ""), r"missing key 'grid'"),
    ],
)
def test_grid_invalid_file_names_file_key_expected_found(tmp_path, text, match):
    with pytest.raises(GridError, match=match):
        load_grid(_write(tmp_path, text))


def test_grid_valid_custom_file_loads(tmp_path):
    g = load_grid(_write(tmp_path, GOOD))
    assert g.size == 2 and g.configs()[1]["width"] == 16


def test_budget_builtin_and_file(tmp_path):
    g = find_grid("spiralhard", "fixed")
    assert BUDGETS["paper"].epochs(g) == 5000 and BUDGETS["paper"].runs(g) == 10
    assert BUDGETS["smoke"].epochs(g) == 2
    assert BUDGETS["quick"].epochs(g) == 30  # capped at 30 (60 until issue #30: make demo in under 5 minutes)
    p = tmp_path / "b.yaml"
    p.write_text("epoch_scale: 0.01\nmin_epochs: 5\nretrain_runs: 4\n")
    b = resolve_budget(str(p))
    assert b.epochs(g) == 50 and b.runs(g) == 4
    p.write_text("epoch_scale: 0.01\nretrain: 4\n")
    with pytest.raises(BudgetError, match=r"b\.yaml: unknown key 'retrain'"):
        resolve_budget(str(p))
    with pytest.raises(BudgetError, match=r"--budget: expected one of \['paper', 'quick', 'smoke', 'standard'\] or a YAML file, found 'fast'"):
        resolve_budget("fast")


def test_cli_grids_lists_every_grid_with_counts(tmp_path):
    p = run_awnn(["grids", "--json"], cwd=tmp_path, check=True)
    rows = strict_json(p.stdout.strip().splitlines()[-1])
    by = {(r["task"], r["strategy"]): r["configs"] for r in rows}
    assert by[("spiralhard", "fixed")] == 180 and by[("spiralhard", "awnn")] == 18
    assert set(rows[0]) == {"task", "strategy", "configs"}
    text = run_awnn(["grids"], cwd=tmp_path, check=True).stdout
    assert "spiralhard" in text and "180" in text


def test_cli_sweep_invalid_grid_exits_2_without_side_effects(tmp_path):
    grids = tmp_path / "grids"
    grids.mkdir()
    (grids / "doublemoon-fixed.yaml").write_text(GOOD.replace("width: [8, 16]", "width: [8, -3]"))
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "fixed", "--budget", "smoke", "--grid-dir", str(grids)], cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "doublemoon-fixed.yaml: key 'grid.width': expected an integer >= 1" in lines[0] and lines[0].endswith("found -3")
    assert not (tmp_path / "mlflow.db").exists()  # nothing written to MLflow
    assert not (tmp_path / "awnn-results").exists()  # no Ray trial started


@pytest.mark.parametrize(
    "args, match",
    [
        (["--strategy", "nope"], "--strategy: expected one of"),  # (the flag the user typed; issue #17)
        (["--strategy", "fixed", "--budget", "fast"], "--budget: expected one of"),
        (["--strategy", "fixed", "--cpus-per-trial", "0"], "--cpus-per-trial: expected a number > 0"),
    ],
)
def test_cli_sweep_bad_flags_exit_2(tmp_path, args, match):
    p = run_awnn(["sweep", "--task", "doublemoon", *args], cwd=tmp_path)
    assert p.returncode == 2
    assert match in p.stderr
    assert not (tmp_path / "mlflow.db").exists()


def test_cli_sweep_unknown_task_exits_2(tmp_path):
    p = run_awnn(["sweep", "--task", "cifar1000", "--strategy", "fixed"], cwd=tmp_path)
    assert p.returncode == 2
    assert "no grid for task 'cifar1000'" in p.stderr


def test_grid_epochs_by_hidden_layers_give_each_config_its_paper_epochs():
    """The authors' SpiralHard budgets: 5000 epochs for 1 hidden layer, 10000 for 2 and 4."""
    from search.protocol import assessment_specs, selection_specs

    g = find_grid("spiralhard", "awnn")
    assert g.size == 18
    specs = selection_specs(g, BUDGETS["paper"])
    by_layers = {}
    for s in specs:
        by_layers.setdefault(s.config["hidden_layers"], set()).add(s.config["epochs"])
    assert by_layers == {1: {5000}, 2: {10000}, 4: {10000}}
    two = next(s for s in specs if s.config["hidden_layers"] == 2)
    assert {a.config["epochs"] for a in assessment_specs(two.config, g, BUDGETS["paper"])} == {10000}
    assert {s.config["epochs"] for s in selection_specs(g, BUDGETS["quick"])} == {30}  # quick caps every config
    assert find_grid("spiralhard", "fixed").size == 180


def test_grid_epochs_by_hidden_layers_rejects_a_bad_mapping(tmp_path):
    p = tmp_path / "g.yaml"
    p.write_text("task: spiral\nstrategy: awnn\nepochs: 10\nepochs_by_hidden_layers: {2: 0}\ngrid: {sigma_theta: [1.0]}\n")
    with pytest.raises(GridError, match=r"g.yaml: key 'epochs_by_hidden_layers': expected a mapping of hidden_layers \(integer >= 0\) to epochs \(integer >= 1\), found \{2: 0\}"):
        load_grid(p)


def test_error_classes_share_one_parent_and_name_their_input():
    """GridError is for grid files only; budgets and options have their own
    classes; all are UsageErrors (one line, exit code 2), and the CLI reports
    the other layers' input errors the same way (search.errors.user_errors)."""
    from awnn.config import ConfigError
    from awnn.data import DataError
    from search.errors import OptionError, SearchError, UsageError, user_errors
    from tracking.checks import TrackingUnavailable
    from tracking.reader import AnalysisError

    for cls in (GridError, BudgetError, OptionError, SearchError):
        assert issubclass(cls, UsageError) and issubclass(cls, ValueError)
    assert not issubclass(BudgetError, GridError) and not issubclass(OptionError, GridError)
    assert set(user_errors()) == {UsageError, ConfigError, DataError, TrackingUnavailable, AnalysisError}


def test_a_grid_too_large_to_run_is_refused_before_it_is_expanded(tmp_path):
    """3e9 points: before, every one was built in memory (22 GB and growing after 2 minutes of `awnn grids`)."""
    import resource

    from search.grid import MAX_GRID_CONFIGS

    many = ", ".join(str(8 + i) for i in range(1000))
    lrs = ", ".join(str(0.001 * (i + 1)) for i in range(1000))
    path = tmp_path / "doublemoon-fixed.yaml"
    path.write_text(f"task: doublemoon\nstrategy: fixed\nepochs: 10\nfixed: {{model: fixed, hidden_layers: 1}}\n"
                    f"grid:\n  width: [{many}]\n  lr: [{lrs}]\n  activation: [relu, leaky_relu, relu6]\n  batch_size: [{many}]\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(GridError) as e:
        load_grid(path)
    assert str(e.value) == (f"{path}: key 'grid': expected at most {MAX_GRID_CONFIGS:,} configs (the product of its lists' lengths: each "
                            "is a trial and an MLflow run); search fewer values, or split it into several grids, found "
                            "'3,000,000,000 (1000 width x 1000 lr x 3 activation x 1000 batch_size)'")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: nothing expanded
