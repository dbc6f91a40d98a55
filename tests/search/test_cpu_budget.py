"""CPU budgets (issue #16): `quick` and `smoke` train each grid's `cpu`
values (a capped training set, a smaller Transformer), `paper` the paper's
setup; the cap itself (`max_train_examples`) on every kind of task."""
from __future__ import annotations

import numpy as np
import pytest

from awnn.config import TrainConfig
from awnn.data import load_task
from search.budget import BUDGETS, resolve_budget
from search.errors import BudgetError
from search.grid import GridError, find_grid, grid_from_dict
from search.protocol import assessment_specs, single_run_config
from search.strategies import StrategyOptions, make_arms

BASE = {"task": "mnist", "strategy": "fixed", "epochs": 4, "fixed": {"model": "fixed"}, "grid": {"width": [0, 32]}}


def test_cpu_budgets_train_the_grids_cpu_values_and_paper_the_papers():
    assert BUDGETS["quick"].cpu and BUDGETS["smoke"].cpu and not BUDGETS["paper"].cpu
    for task in ("mnist", "cifar10", "cifar100", "multi30k"):  # every large real dataset has CPU values
        for model in ("fixed", "awnn"):
            assert find_grid(task, model).cpu.get("max_train_examples", 0) > 0
    multi = find_grid("multi30k", "fixed")
    assert multi.cpu["encoder_layers"] == 2 and multi.cpu["d_model"] == 256 and multi.fixed["d_model"] == 512
    for name in ("quick", "smoke", "paper"):
        arms = make_arms("multi30k", ["fixed", "awnn"], StrategyOptions(), BUDGETS[name])
        for arm in arms:
            specs = arm.selection_specs(BUDGETS[name])
            expected = arm.grid.cpu if name != "paper" else {k: arm.grid.fixed[k] for k in ("encoder_layers", "d_model")}
            assert all(s.config["encoder_layers"] == expected["encoder_layers"] and s.config["d_model"] == expected["d_model"] for s in specs)
            # the re-training runs keep the selected config's values
            ass = assessment_specs(specs[0].config, arm.grid, BUDGETS[name])
            assert all(a.config["d_model"] == specs[0].config["d_model"] for a in ass)
    assert single_run_config(find_grid("mnist", "awnn"), BUDGETS["quick"], {})["max_train_examples"] == 5000
    assert "max_train_examples" not in single_run_config(find_grid("mnist", "awnn"), BUDGETS["paper"], {})
    assert single_run_config(find_grid("mnist", "awnn"), BUDGETS["quick"], {"max_train_examples": 0})["max_train_examples"] == 0
    assert find_grid("spiralhard", "fixed").cpu == {}  # the tabular tasks: a CPU trains the paper's setup


def test_budget_file_key_cpu(tmp_path):
    f = tmp_path / "b.yaml"
    f.write_text("epoch_scale: 0.5\ncpu: true\n")
    assert resolve_budget(str(f)).cpu is True
    f.write_text("cpu: 1\n")
    with pytest.raises(BudgetError, match=r"key 'cpu': expected true or false, found 1"):
        resolve_budget(str(f))
    assert "cpu" not in BUDGETS["quick"].to_dict()  # (the --resume key of comparisons without cpu values as before)


@pytest.mark.parametrize("cpu, message", [
    ({"max_train_exampels": 10}, r"key 'cpu.max_train_exampels': expected a config key \(did you mean 'max_train_examples'\?\)"),
    ({"width": 8}, r"key 'cpu.width': expected a key the grid does not search"),
    ({"epochs": 3}, r"key 'cpu.epochs': expected a key the grid does not search and the protocol does not set"),
    ({"max_train_examples": [10]}, r"key 'cpu.max_train_examples': expected a single value"),
    ({"max_train_examples": -1}, r"key 'cpu.max_train_examples': expected an integer >= 0, found -1"),
    ([1], r"key 'cpu': expected a mapping"),
])
def test_grid_cpu_section_errors_name_the_key(cpu, message):
    with pytest.raises(GridError, match=message):
        grid_from_dict({**BASE, "cpu": cpu}, "g.yaml")
    assert grid_from_dict(BASE).digest() == grid_from_dict({**BASE, "cpu": {}}).digest()  # grids without it: digest as before


def _check_cap(task, n):
    capped = task.cap_train(n, seed=0)
    again = task.cap_train(n, seed=0)
    for split in ("inner", "outer"):
        full, part = task.indices(split, "train"), capped.indices(split, "train")
        assert len(part) == min(n, len(full)) and set(part.tolist()) <= set(full.tolist())
        assert np.array_equal(part, again.indices(split, "train"))  # the same subset for every config
        for other in ("val", "test"):
            assert np.array_equal(capped.indices(split, other), task.indices(split, other))
        labels = task.label_array()
        if labels is not None and len(full) > n:  # stratified: each class keeps its share (to within one)
            for c in np.unique(labels[full]):
                share = (labels[full] == c).mean() * n
                assert abs((labels[part] == c).sum() - share) <= 1
    assert len(task.indices("inner", "train")) > n  # the task itself is left as it was
    return capped


def test_cap_train_on_tabular_image_graph_and_text_tasks(tmp_path):
    from data_helpers import write_multi30k, write_tu

    _check_cap(load_task("doublemoon"), 100)
    _check_cap(load_task("digits"), 200)
    pytest.importorskip("torch_geometric")
    write_tu(str(tmp_path), "NCI1", n_graphs=80)
    _check_cap(load_task("nci1", str(tmp_path)), 30)
    write_multi30k(str(tmp_path))
    _check_cap(load_task("multi30k", str(tmp_path)), 50)


def test_trainer_trains_on_the_capped_set():
    from awnn.train import Trainer

    cfg = TrainConfig.from_dict({"task": "doublemoon", "model": "fixed", "width": 8, "epochs": 1, "max_train_examples": 64})
    trainer = Trainer(cfg)
    assert trainer.n_train == 64
    result = trainer.run()
    assert result.summary()["n_train"] == 64
    with pytest.raises(Exception, match="max_train_examples"):
        TrainConfig.from_dict({"task": "doublemoon", "max_train_examples": -3})


@pytest.mark.parametrize("task", ["spiralhard", "spiral", "doublemoon"])
def test_the_standard_budget_trains_every_tabular_config_150_epochs_with_three_retrainings(task):
    """`standard` is the converged budget of every tabular task (issue #30): 150
    epochs a trial whatever the paper's 500-10,000 (per depth on SpiralHard)."""
    budget = BUDGETS["standard"]
    for model in ("fixed", "awnn"):
        arm = make_arms(task, [model], StrategyOptions(), budget)[0]
        specs = arm.selection_specs(budget)
        assert specs and {s.config["epochs"] for s in specs} == {150}, task
        assert budget.runs(arm.grid) == 3
