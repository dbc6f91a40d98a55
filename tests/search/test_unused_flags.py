"""Flags typed on a command that has no use for them are said, not silently dropped (2026-12-07, found by trying it:
`awnn study fig3 --task doublemon` ran the whole three-task study, 53 s, and `awnn compare --strategies fixed,awnn
--tpe-trials 30` said nothing of the TPE budget it ignored): a strategy option for strategies the command does not run,
and --data-root for tasks that read no files, are one note each on stderr (a script passing the same flags to every
strategy's sweep keeps working); `awnn study --task` is refused, since a study runs its own tasks."""
from __future__ import annotations

import argparse

import pytest

from conftest import run_awnn
from fault_helpers import write_inputs
from search.cli import build_parser
from search.commands.common import _option_users, unused_flag_notes
from search.strategies import REGISTRY

from awnn.data import GENERATORS, TASKS, reads_files

_VALUES = {"fuse": "4", "seed": "3", "repeats": "2", "tpe_trials": "5", "tpe_window": "2", "optuna_storage": "sqlite:///o.db", "random_trials": "4",
           "asha_grace_period": "2", "asha_reduction_factor": "2", "fixedplus_widths": "per-layer"}


def _sub(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]


def _strategy_flags(command: str) -> dict[str, str]:
    """dest -> flag of every option in the command's "search strategies" group, as its --help lists them (and --fuse)."""
    group = next(g for g in _sub(command)._action_groups if g.title.startswith("search strategies"))
    return {a.dest: a.option_strings[0] for a in group._group_actions}


def _notes(command: str, argv: list[str], strategies: list[str], tasks: list[str]) -> list[str]:
    args = build_parser().parse_args([command, *argv])
    return unused_flag_notes(args, strategies, tasks, "this sweep")


@pytest.mark.parametrize("command", ["sweep", "compare", "study"])
def test_every_strategy_option_names_the_strategies_that_read_it(command):
    flags = _strategy_flags(command)
    assert set(flags) | {"fuse"} == set(_option_users()) == set(_VALUES), (sorted(flags), sorted(_option_users()))  # (--fuse: fixed only)
    for dest, users in _option_users().items():
        assert users and set(users) <= set(REGISTRY), (dest, users)


@pytest.mark.parametrize("dest", sorted(_VALUES))
def test_a_strategy_option_for_no_strategy_that_runs_is_one_note_and_for_one_that_does_none(dest):
    flag = {**_strategy_flags("sweep"), "fuse": "--fuse"}[dest]
    users = _option_users()[dest]
    others = [s for s in REGISTRY if s not in users]
    argv = ["--task", "doublemoon", "--strategy", "x", flag, _VALUES[dest]]
    notes = _notes("sweep", argv, others, ["doublemoon"])
    assert len(notes) == 1 and notes[0].startswith(f"note: {flag} has no effect: it is for strateg"), notes
    assert all(u in notes[0] for u in users) and f"(it runs {', '.join(others)})" in notes[0], notes
    for user in users:  # one strategy that reads it among those that run: nothing to say
        assert _notes("sweep", argv, [others[0], user], ["doublemoon"]) == []


def test_a_strategy_option_typed_at_its_default_is_noted_too_and_one_not_typed_is_not():
    assert len(_notes("sweep", ["--task", "doublemoon", "--strategy", "awnn", "--repeats", "1", "--seed", "0"], ["awnn"], ["doublemoon"])) == 2
    assert _notes("sweep", ["--task", "doublemoon", "--strategy", "awnn"], ["awnn"], ["doublemoon"]) == []


@pytest.mark.parametrize("task", sorted(TASKS))
def test_data_root_is_noted_only_for_a_task_that_reads_no_files(task):
    assert {"doublemoon", "spiral", "spiralhard"} <= set(GENERATORS) and {"table", "mnist", "nci1", "multi30k"} <= set(TASKS) - set(GENERATORS)
    notes = _notes("compare", ["--task", task, "--data-root", "/srv/data"], ["fixed"], [task])
    expected = task in GENERATORS or task == "digits"  # made from the seed; scikit-learn's copy
    assert (notes == [f"note: --data-root has no effect: task {task} reads no data files"]) == expected, notes
    assert reads_files(task) is not expected
    assert _notes("compare", ["--task", task], ["fixed"], [task]) == []


def test_a_study_refuses_task_in_one_line_naming_its_own_tasks(tmp_path):
    p = run_awnn(["study", "fig3", "--task", "spiralhard", "--budget", "smoke"], cwd=tmp_path, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert p.stderr.strip().splitlines() == [
        "awnn study: error: --task spiralhard: a study runs its own tasks (fig3: doublemoon, spiral, spiralhard); leave --task out, "
        "or run AWNN on one task with `awnn sweep --task spiralhard --strategy awnn`"]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "awnn-results").exists()


def test_a_sweep_says_the_flags_and_grid_keys_it_has_no_use_for_and_runs(tmp_path):
    from fault_helpers import GRID

    grids, budget = write_inputs(tmp_path, epochs=1, grid=GRID.replace("fixed: {model: awnn,", "fixed: {model: awnn, width: 16,"))
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "awnn", "--budget", str(budget), "--grid-dir", str(grids),
                  "--storage", str(tmp_path / "results"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--num-cpus", "2",
                  "--tpe-trials", "5", "--data-root", str(tmp_path)], cwd=tmp_path, check=True)
    notes = [line for line in p.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {grids / 'doublemoon-awnn.yaml'}: fixed.width has no effect: an AWNN model learns its widths",
                     "note: --tpe-trials has no effect: it is for strategy tpe, which this sweep does not run (it runs awnn)",
                     "note: --data-root has no effect: task doublemoon reads no data files"], p.stderr[-3000:]
    assert "awnn selection: 3/3 trials" in p.stderr, p.stderr[-3000:]


@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS", "local"])
def test_num_cpus_on_a_cluster_is_noted(monkeypatch, how):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    argv = ["--task", "doublemoon", "--strategies", "fixed", "--num-cpus", "2"]
    if how == "--address":
        argv += ["--address", "10.0.0.5:6379"]
    elif how == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    notes = _notes("compare", argv, ["fixed"], ["doublemoon"])
    if how == "local":
        assert notes == []
    else:
        assert notes == [f"note: --num-cpus has no effect on a cluster ({how}): its nodes have the CPUs they were started with "
                         "(`ray start --num-cpus N`)"]


def test_awnn_train_says_a_set_key_and_a_data_root_it_has_no_use_for(tmp_path):
    p = run_awnn(["train", "--task", "doublemoon", "--model", "fixed", "--epochs", "1", "--quiet", "--set", "rate=0.5", "--set", "lr=0.05",
                  "--data-root", str(tmp_path)], cwd=tmp_path, timeout=120, check=True)
    notes = [line for line in p.stderr.splitlines() if line.startswith("note: ")]
    assert notes == ["note: --set rate=0.5 has no effect: an AWNN key, and the model is fixed",
                     "note: --data-root has no effect: task doublemoon reads no data files"], p.stderr[-2000:]
    p = run_awnn(["train", "--task", "doublemoon", "--model", "awnn", "--epochs", "1", "--quiet", "--set", "width=32"], cwd=tmp_path,
                 timeout=120, check=True)
    assert [line for line in p.stderr.splitlines() if line.startswith("note: ")] == [
        "note: --set width=32 has no effect: an AWNN model learns its widths"], p.stderr[-2000:]
