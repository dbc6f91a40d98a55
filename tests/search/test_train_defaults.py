"""`awnn train` trains the task's own setup: the settings of its grid for
the model (optimiser, learning rate, schedule, batch size, starting rate),
the first value of each searched key, and the grid's epochs under --budget
(issue #16); flags and --set win."""
from __future__ import annotations

import pytest

from search.budget import resolve_budget
from search.grid import find_grid
from search.protocol import single_run_config

PAPER, QUICK = resolve_budget("paper"), resolve_budget("quick")


def test_graph_task_gets_the_graph_grid_setup():
    cfg = single_run_config(find_grid("nci1", "fixed"), PAPER, {"task": "nci1", "model": "fixed"})
    assert (cfg["optimizer"], cfg["lr"], cfg["embed_dim"], cfg["hidden_layers"]) == ("adam", 0.01, 0, 1)
    assert (cfg["batch_size"], cfg["conv_layers"], cfg["pooling"], cfg["width"]) == (32, 1, "sum", 32)  # first searched values
    assert (cfg["epochs"], cfg["patience"]) == (1000, 500)
    awnn = single_run_config(find_grid("nci1", "awnn"), PAPER, {"task": "nci1", "model": "awnn"})
    assert (awnn["rate"], awnn["sigma_theta"], awnn["quantile_k"]) == (0.02, 10.0, 0.9)


def test_budget_scales_epochs_and_the_lr_schedule_as_in_a_sweep():
    grid = find_grid("mnist", "fixed")
    cfg = single_run_config(grid, QUICK, {"task": "mnist", "model": "fixed"})
    assert cfg["epochs"] == QUICK.epochs(grid) < 200
    assert cfg["lr_milestones"] != "50,100,150" and (cfg["optimizer"], cfg["momentum"], cfg["weight_decay"]) == ("sgd", 0.9, 0.0001)


def test_command_line_wins():
    grid = find_grid("spiralhard", "fixed")
    cfg = single_run_config(grid, PAPER, {"task": "spiralhard", "model": "fixed", "lr": 0.5, "hidden_layers": 2, "epochs": 7})
    assert (cfg["lr"], cfg["hidden_layers"], cfg["epochs"]) == (0.5, 2, 7)
    by_depth = single_run_config(grid, PAPER, {"task": "spiralhard", "model": "fixed", "hidden_layers": 2})
    assert by_depth["epochs"] == 10000  # epochs_by_hidden_layers follows the chosen depth


def test_cli_prints_the_resolved_graph_setup(tmp_path, capsys):
    from search.cli import main

    assert main(["train", "--task", "nci1", "--model", "awnn", "--budget", "paper", "--data-root", str(tmp_path), "--set", "lr=0.003"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("config (defaults from ") and "nci1-awnn.yaml" in err[0]
    for item in ("optimizer=adam", "lr=0.003", "rate=0.02", "epochs=1000", f"data_root={tmp_path}"):
        assert item in err[0], item
    assert err[-1].startswith("awnn train: error: NCI1: expected the TU raw files") and len(err) == 2


@pytest.mark.parametrize("task", ["moons"])
def test_unknown_task_is_still_one_line(task, capsys):
    from search.cli import main

    assert main(["train", "--task", task, "--model", "awnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key 'task': expected one of" in err[0]
