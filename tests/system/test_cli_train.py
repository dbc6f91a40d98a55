"""`awnn train` end to end, in subprocesses (started together: each pays the
torch import, so they overlap instead of queueing)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import strict_json

ROOT = Path(__file__).resolve().parents[2]

OK_RUNS = {
    "awnn": ["--task", "doublemoon", "--model", "awnn", "--epochs", "2", "--set", "batch_size=256", "--set", "rate=0.05", "--set", "threads=1"],
    "fixed": ["--task", "spiral", "--model", "fixed", "--epochs", "2", "--seed", "3", "--set", "width=8", "--set", "hidden_layers=2", "--set", "threads=1"],
}
# runs that end without a score, in their first epoch: (args, status, what stderr says of the end)
ENDED = {
    # its first step hits max_width (on_max_width=stop)
    "width_capped": (["--task", "doublemoon", "--model", "awnn", "--epochs", "2", "--set", "max_width=2", "--set", "threads=1"],
                     "the run ended width_capped at epoch 1 of 2: an adaptive layer wanted more than max_width=2 neurons"),
    # its loss overflows at once
    "diverged": (["--task", "doublemoon", "--model", "fixed", "--epochs", "3", "--set", "optimizer=sgd", "--set", "lr=1e6", "--set", "threads=1"],
                 "the run ended diverged at epoch 1 of 3: its training loss became NaN or infinite"),
}
BAD_RUNS = {
    "unknown-task": (["--task", "moons", "--model", "awnn"], r"key 'task': expected one of \[.*'doublemoon'.*\], found 'moons'"),
    "unknown-activation": (["--task", "spiral", "--model", "awnn", "--set", "activation=swish"], r"key 'activation': expected one of \[.*'relu6'.*\], found 'swish'"),
    "k-above-one": (["--task", "spiral", "--model", "awnn", "--set", "quantile_k=1.5"], r"key 'quantile_k': expected a number in the open interval \(0, 1\), found 1.5"),
    "negative-width": (["--task", "spiral", "--model", "fixed", "--set", "width=-4"], r"key 'width': expected an integer >= 1.*found -4"),
    "unknown-set-key": (["--task", "spiral", "--model", "awnn", "--set", "sigma_teta=2"], r"unknown key 'sigma_teta' \(did you mean 'sigma_theta'\?\)"),
}

# the same error path in-process (main() is the console script's entry point)
IN_PROCESS = {
    "k-zero": (["--task", "spiral", "--model", "awnn", "--set", "quantile_k=0"], r"key 'quantile_k': expected a number in the open interval \(0, 1\), found 0.0"),
    "set-without-equals": (["--task", "spiral", "--model", "awnn", "--set", "lr"], r"--set 'lr': expected KEY=VALUE"),
    "bad-number": (["--task", "spiral", "--model", "awnn", "--set", "lr=fast"], r"key 'lr': expected float, found 'fast'"),
}


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-m", "search.cli", "train", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("cli")
    procs = {name: _start(args, cwd) for name, args in OK_RUNS.items()}
    procs.update({name: _start(args, cwd) for name, (args, _) in BAD_RUNS.items()})
    procs.update({name: _start(args, cwd) for name, (args, _) in ENDED.items()})
    out = {}
    for name, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        out[name] = (p.returncode, stdout, stderr)
    return out


@pytest.mark.parametrize("name", sorted(OK_RUNS))
def test_cli_train_prints_result_json_last(runs, name):
    code, stdout, stderr = runs[name]
    assert code == 0, stderr[-3000:]
    assert len(stdout.strip().splitlines()) == 1  # progress goes to stderr, the result alone to stdout
    result = strict_json(stdout.strip().splitlines()[-1])
    for key in ["test_acc", "best_val_acc", "best_epoch", "widths", "train_seconds"]:
        assert key in result, key
    assert 0.0 <= result["test_acc"] <= 1.0 and 0.0 <= result["best_val_acc"] <= 1.0
    assert result["best_epoch"] in (1, 2) and result["epochs_run"] == 2
    assert result["train_seconds"] > 0 and result["status"] == "ok"
    assert isinstance(result["widths"], list) and all(isinstance(w, int) and w >= 1 for w in result["widths"])
    assert result["config"]["epochs"] == 2


@pytest.mark.parametrize("status", sorted(ENDED))
def test_cli_train_a_run_without_scores_prints_strict_json_with_nulls_says_why_and_exits_1(runs, status):
    code, stdout, stderr = runs[status]
    assert code == 1, stderr[-3000:]  # not "ok": the exit code says so, the JSON and stderr say why
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, stdout
    result = strict_json(lines[0])
    assert result["status"] == status and result["epochs_run"] == 1
    for key in ("test_acc", "best_val_acc", "best_val_loss", "test_loss", "train_nll"):  # (NaN / inf in Python)
        assert key in result and result[key] is None, (key, result.get(key))
    assert f"awnn train: {ENDED[status][1]}" in stderr, stderr
    # the progress line's best score before any scored epoch: "n/a", not the trainer's -1 sentinel
    assert "best n/a" in stderr and "-1.0000" not in stderr, stderr
    warned = [l for l in stderr.splitlines() if "warning" in l.lower()]
    if status == "width_capped":
        assert result["hit_max_width"] is True and result["widths"] == [2]
        # the cap said once, in the command's own words: not Python's source path and line of code
        assert warned == ["awnn train: warning: an adaptive layer starts at max_width=2: its starting rate 0.01 wants more neurons"], stderr
    else:
        assert warned == [], stderr
    assert ".py:" not in stderr, stderr


def test_cli_train_flags_reach_the_config(runs):
    awnn = json.loads(runs["awnn"][1].strip().splitlines()[-1])
    fixed = json.loads(runs["fixed"][1].strip().splitlines()[-1])
    assert awnn["config"]["model"] == "awnn" and awnn["config"]["rate"] == 0.05 and awnn["config"]["batch_size"] == 256
    assert awnn["config"]["task"] == "doublemoon" and len(awnn["widths"]) == 1
    assert fixed["widths"] == [8, 8] and fixed["config"]["seed"] == 3 and fixed["config"]["hidden_layers"] == 2


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_cli_train_bad_input_exits_2_with_one_line(runs, name):
    code, stdout, stderr = runs[name]
    _, pattern = BAD_RUNS[name]
    assert code == 2, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("awnn train: error: ")
    assert re.search(pattern, lines[0]), lines[0]
    assert stdout == ""


@pytest.mark.parametrize("name", sorted(IN_PROCESS))
def test_cli_main_bad_input_returns_2(name, capsys):
    from search.cli import main

    args, pattern = IN_PROCESS[name]
    assert main(["train", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert re.search(pattern, err), err
