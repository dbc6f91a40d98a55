"""The CLI's manners (issues #31 item 6, #32 item 7), through the real
parser and entry point: no flag abbreviations; `awnn train`'s quick default,
its whole-run ETA, its plain data loss, its task names and LR milestones
that follow --epochs; the summary's selected configs show every searched
key; the progress line tells running trials from pending ones."""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
from types import SimpleNamespace

import pytest

from conftest import AWNN, ROOT, run_awnn
from search.budget import resolve_budget
from search.cli import build_parser, main
from search.grid import find_grid
from search.progress import RunClock, flight
from search.protocol import single_run_config
from search.record import PhaseResult, StrategyResult
from search.strategies import StrategyOptions, make_arms
from search.summary import print_summary


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_cli_no_parser_accepts_abbreviations():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) >= 8  # awnn and its seven subcommands
    assert all(p.allow_abbrev is False for p in parsers), [p.prog for p in parsers if p.allow_abbrev]


def test_cli_flag_prefix_is_rejected_naming_the_flag(tmp_path):
    p = run_awnn(["compare", "--task", "doublemoon", "--strategie", "fixed", "--budget", "smoke"], cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1] == (
        "awnn compare: error: unrecognized arguments: --strategie fixed (--strategie: did you mean --strategies?)")
    assert not (tmp_path / "mlflow.db").exists()  # nothing ran


@pytest.mark.parametrize("argv,flag", [(["train", "--task", "spiral", "--model", "awnn", "--epoch", "3"], "--epochs"),
                                       (["sweep", "--task", "spiral", "--strategy", "awnn", "--budg", "smoke"], "--budget")])
def test_cli_prefix_in_process_exits_2(argv, flag, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"awnn {argv[0]}: error: unrecognized arguments: {argv[5]} ") and f"did you mean {flag}?" in err


def test_train_defaults_to_the_quick_budget_and_says_so(capsys):
    args = build_parser().parse_args(["train", "--task", "spiralhard", "--model", "awnn"])
    assert args.budget == "quick"
    from search.commands.train import resolve_defaults

    values, source = resolve_defaults(args, {"task": "spiralhard", "model": "awnn"})
    assert values["epochs"] == 30 and "budget quick" in source  # not the paper's 5000
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "(default: quick" in " ".join(capsys.readouterr().out.split())


def test_run_clock_counts_the_epochs_left():
    clock = RunClock(10)
    clock.start = 0.0
    assert clock.eta(1, epoch_left=3.0, epoch_length=4.0) == 3.0 + 9 * 4.0  # no epoch ended: the projected one stands in
    clock.began(3.0)  # the first epoch's first batch: 3 s went to loading the data
    clock.began(6.0)  # (a later epoch's: ignored)
    clock.ends = [5.0]
    assert clock.per_epoch() == 2.0 and clock.eta(1) == 9 * 2.0
    clock.ends = [5.0, 7.0, 9.0]
    assert clock.per_epoch() == 2.0
    assert clock.eta(3) == 7 * 2.0 and clock.eta(4, epoch_left=1.0, epoch_length=99.0) == 1.0 + 6 * 2.0
    assert clock.eta(10) == 0.0


def _seconds(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    h, mi, s = (int(v or 0) for v in m.groups())
    return 3600 * h + 60 * mi + s


def test_train_progress_shows_the_runs_eta_inside_an_epoch(tmp_path):
    # SpiralHard one example a step through 2 x 1024 units: epochs of several seconds (the in-epoch line needs 2 s);
    # the command is stopped (SIGTERM, as a scheduler would) once the first such line is out
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = ["train", "--task", "spiralhard", "--model", "fixed", "--epochs", "3", "--set", "batch_size=1", "--set", "hidden_layers=2",
            "--set", "width=1024", "--set", "threads=1"]
    proc = subprocess.Popen([*AWNN, *args], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = next((ln for ln in proc.stderr if " batch/s " in ln), "")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    m = re.search(r"^epoch (\d)/3  batch \d+/\d+ .* epoch eta (\S+)  run eta (\S+)  elapsed", line)
    assert m, line
    epoch, epoch_eta, run_eta = int(m.group(1)), _seconds(m.group(2)), _seconds(m.group(3))
    assert epoch < 3 and run_eta >= epoch_eta + 2 * (3 - epoch)  # the epochs after this one: at least 2 s each


def test_train_shows_and_returns_the_plain_data_loss(capsys):
    # a versioned task (earlier data) stays accepted though it is not listed
    assert main(["train", "--task", "doublemoon-v0", "--model", "awnn", "--epochs", "1", "--set", "threads=1"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["train_nll"] == result["train_nll_at_best"] and 0 < result["train_nll"] < 1.0  # cross-entropy of 2 classes
    line = next(ln for ln in err.splitlines() if ln.startswith("epoch 1/1"))
    assert f"train_nll {result['train_nll']:.4f}" in line and "run eta " in line


def test_train_task_typo_suggests_and_hides_versioned_names(capsys):
    assert main(["train", "--task", "spirl", "--model", "awnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("awnn train: error: command line: key 'task': expected one of [")
    assert "(did you mean 'spiral'" in err[0] and "-v0" not in err[0] and "'reddit_binary'" in err[0]


def test_compare_task_typo_suggests(tmp_path):
    p = run_awnn(["compare", "--task", "spirlhard", "--budget", "smoke"], cwd=tmp_path)
    assert p.returncode == 2 and "(did you mean 'spiralhard'?)" in p.stderr and "-v0" not in p.stderr


def test_train_epochs_scale_the_lr_milestones(tmp_path, capsys):
    grid = find_grid("mnist", "fixed")
    assert grid.fixed["lr_milestones"] == "50,100,150" and grid.epochs == 200
    paper = resolve_budget("paper")
    assert single_run_config(grid, paper, {"epochs": 40})["lr_milestones"] == "10,20,30"
    assert single_run_config(grid, paper, {"epochs": "2"})["lr_milestones"] == "1,2"  # from --set: a string
    assert single_run_config(grid, paper, {"epochs": 40, "lr_milestones": "7"})["lr_milestones"] == "7"  # the user's wins
    assert single_run_config(grid, paper, {})["lr_milestones"] == "50,100,150"
    # through the CLI: the resolved config line comes before the data error (an empty --data-root)
    assert main(["train", "--task", "mnist", "--model", "fixed", "--epochs", "40", "--budget", "paper", "--data-root", str(tmp_path)]) == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert "epochs=40" in first and "lr_milestones=10,20,30" in first


def _result(arm, cfg):
    sel = PhaseResult(arm.name, "selection", outcomes=[{"key": "sel-0000", "status": "ok", "device_hours": 0.1}])
    ass = PhaseResult(arm.name, "assessment", outcomes=[{"key": "ass-01", "status": "ok", "device_hours": 0.1, "test_acc": 0.7}])
    summary = {"test_acc_mean": 0.7, "test_acc_std": 0.0, "runs_ok": 1}
    return StrategyResult(arm.name, arm.grid, sel, ass, selected={"key": "sel-0000", "config": cfg}, summary=summary, family=arm.family)


def test_summary_selected_configs_show_every_searched_key():
    budget = resolve_budget("smoke")
    arms = {a.family: a for a in make_arms("nci1", ["fixed", "awnn"], StrategyOptions(), budget)}
    fixed = {**arms["fixed"].grid.configs()[-1]}  # batch 128, 4 convolutions, mean pooling, width 64
    awnn = {**arms["awnn"].grid.configs()[5]}
    results = [_result(arms["fixed"], fixed), _result(arms["awnn"], awnn)]
    buf = io.StringIO()
    print_summary(SimpleNamespace(id="nci1-x", task="nci1", budget=budget, protocol="holdout", tracking_uri="sqlite:///m.db"), results, stream=buf)
    text = buf.getvalue()
    lines = text.split("selected configs:\n")[1].splitlines()
    assert lines[0].split() == ["fixed", "model=fixed", "batch_size=128", "conv_layers=4", "pooling=mean", "width=64"]
    assert lines[1].split() == ["awnn", "model=awnn", f"batch_size={awnn['batch_size']}", f"conv_layers={awnn['conv_layers']}",
                                f"pooling={awnn['pooling']}"]


def test_progress_flight_counts_running_apart_from_pending():
    in_flight = {f"fixed/selection/sel-{i:04d}" for i in range(8)}
    started = {"fixed/selection/sel-0000", "fixed/selection/sel-0001", "fixed/selection/sel-0099"}  # 0099: finished, not in flight
    assert flight(in_flight, started) == "2 running, 6 pending"
    assert flight(set(list(in_flight)[:2]), in_flight) == "2 running"


def test_a_command_whose_comparisons_left_mlflow_incomplete_says_so_in_one_line():
    """`awnn study` runs several sweeps: the one(s) whose writes MLflow did not take are named in its closing line."""
    from types import SimpleNamespace

    from search.commands.common import unwritten_line

    ok = SimpleNamespace(id="a-1", unwritten=None)
    bad = SimpleNamespace(id="b-2", unwritten="MLflow did not take the writes of 3 runs (database or disk is full); they are saved in /s/p.jsonl")
    assert unwritten_line("study", [ok, ok]) is None
    line = unwritten_line("study", [ok, bad])
    assert line == ("awnn study: b-2 ran to the end, but MLflow did not take the writes of 3 runs (database or disk is full); they are saved in "
                    "/s/p.jsonl; what MLflow holds is incomplete until the same command with --resume applies them")
    assert "(and more for the others)" in unwritten_line("study", [bad, SimpleNamespace(id="c-3", unwritten="x")])


def test_the_summary_says_where_the_runs_are_for_every_kind_of_store():
    """A SQLite file or database is served with `mlflow ui`; a tracking server
    is opened in a browser (the line said `mlflow ui --backend-store-uri
    http://...`, which serves nothing); credentials never reach the terminal."""
    from search.summary import mlflow_line

    assert mlflow_line("sqlite:////tmp/a b/m.db") == "MLflow: sqlite:////tmp/a b/m.db  (open it with: mlflow ui --backend-store-uri 'sqlite:////tmp/a b/m.db')"
    assert mlflow_line("postgresql://u:pw@db/mlflow") == "MLflow: postgresql://***@db/mlflow  (open it with: mlflow ui --backend-store-uri 'postgresql://***@db/mlflow')"
    assert mlflow_line("http://u:pw@10.0.0.5:5000/", "7") == ("MLflow: http://***@10.0.0.5:5000/  (a tracking server: open "
                                                              "http://10.0.0.5:5000/#/experiments/7 in a browser)")
    assert mlflow_line("https://mlflow.example.org") == "MLflow: https://mlflow.example.org  (a tracking server: open https://mlflow.example.org in a browser)"


def test_work_that_runs_long_is_said_and_quick_work_is_not():
    """The driver's read of a task's data (a hung network mount blocks there,
    before Ray starts) is no silent wait: past `after` seconds a line says what
    and how long, then every `every` seconds; quick work says nothing."""
    import time

    from search.progress import said_if_slow

    said: list[str] = []
    with said_if_slow(said.append, "reading the mnist data under /mnt/data", after=0.2, every=0.3):
        time.sleep(0.05)
    assert said == []
    with said_if_slow(said.append, "reading the mnist data under /mnt/data", after=0.2, every=0.3):
        time.sleep(0.65)
    time.sleep(0.4)  # nothing more once it ended
    assert len(said) == 2 and all(s.startswith("reading the mnist data under /mnt/data: ") and "so far" in s for s in said), said


# a valid value of each command's required options, so that the one under test is the only bad one
REQUIRED = {"--task": "doublemoon", "--strategy": "awnn", "--model": "awnn", "--out": "report", "--comparison": "x",
            "--strategies": "awnn", "--tasks": "doublemoon"}
POSITIONAL = {"study": ["table1"]}


def _string_options():
    parser = build_parser()
    for name, sub in parser.subcommands.choices.items():
        for action in sub.options:
            # (an option with choices refuses '' itself, argparse's line; a repeatable one checks each KEY=VALUE)
            if (action.type in (None, str) and action.nargs is None and action.const is None and action.choices is None
                    and not isinstance(action.default, list)):
                yield name, sub, action


def _with_required(command: str, flag: str) -> list[str]:
    """`command` with a valid value of each required option but `flag`."""
    sub = build_parser().subcommands.choices[command]
    argv = [command, *POSITIONAL.get(command, [])]
    for action in sub.options:
        f = max(action.option_strings, key=len)
        if action.required and f != flag:
            argv += [f, REQUIRED[f]]
    return argv


@pytest.mark.parametrize("command, flag", [(n, max(a.option_strings, key=len)) for n, _, a in _string_options()])
def test_every_string_option_given_an_empty_value_is_one_line_naming_it(command, flag, capsys, tmp_path, monkeypatch):
    """`--tracking-uri "$MLFLOW_URI"` with the variable unset used the default store, silently (a script's typo
    writing to another store); now every option of every command refuses an empty (or blank) string."""
    monkeypatch.chdir(tmp_path)
    argv = _with_required(command, flag)
    argv += [flag, " "]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"awnn {command}: error: {flag}: expected a value, found an empty string (an unset shell variable?)"), err
    assert list(tmp_path.iterdir()) == []  # nothing ran, nothing written


def _repeatable_options():
    parser = build_parser()
    for name, sub in parser.subcommands.choices.items():
        for action in sub.options:
            if isinstance(action, argparse._AppendAction):
                yield name, sub, action


# a good item of each repeatable option, given before the blank one
GOOD_ITEM = {"--tracking-uri": "sqlite:///elsewhere.db", "--set": "lr=0.01"}


@pytest.mark.parametrize("command, flag", [(n, max(a.option_strings, key=len)) for n, _, a in _repeatable_options()])
def test_every_repeatable_option_given_an_empty_item_is_one_line_naming_it(command, flag, capsys, tmp_path, monkeypatch):
    """`awnn draws --tracking-uri a.db --tracking-uri "$B"` with B unset answered of a file store ' /mlflow.db', and
    `--set ' '` said KEY=VALUE, not the empty value: a repeatable option's every item is held to what a single-valued
    option's value is (the class of the test above, which found the blank let through by draws' --tracking-uri)."""
    monkeypatch.chdir(tmp_path)
    argv = _with_required(command, flag)
    argv += [flag, GOOD_ITEM[flag], flag, " "]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"awnn {command}: error: {flag}: expected a value, found an empty string (an unset shell variable?)"), err
    assert list(tmp_path.iterdir()) == []


def test_repeatable_options_are_found():
    assert {(n, max(a.option_strings, key=len)) for n, _, a in _repeatable_options()} >= {("draws", "--tracking-uri"), ("train", "--set")}


def test_empty_string_options_cover_every_command():
    commands = {n for n, _, _ in _string_options()}
    assert {"train", "sweep", "compare", "report", "grids"} <= commands
    flags = {max(a.option_strings, key=len) for _, _, a in _string_options()}
    assert {"--tracking-uri", "--storage", "--data-root", "--grid-dir", "--address", "--optuna-storage", "--out", "--budget"} <= flags


def _comma_options():
    for name, sub, action in _string_options():
        if "comma-separated" in (action.help or ""):
            yield name, max(action.option_strings, key=len), action


@pytest.mark.parametrize("command, flag, value", [(n, f, v) for n, f, a in _comma_options()
                                                   for v in (",{0}", "{0},", "{0},,{0}", " , {0}")])
def test_every_comma_separated_option_refuses_an_empty_item_naming_it(command, flag, value, capsys, tmp_path, monkeypatch):
    """`--strategies ,awnn` (`"$FIRST,awnn"` with the variable unset) ran awnn alone, silently: an empty item is
    dropped no more; one line naming the flag and the item, nothing run (a valid value around it: the option's default's
    first item)."""
    monkeypatch.chdir(tmp_path)
    sub = build_parser().subcommands.choices[command]
    action = next(a for a in sub.options if flag in a.option_strings)
    good = str(action.default or "authors").split(",")[0]
    argv = [command, *POSITIONAL.get(command, [])]
    for a in sub.options:
        f = max(a.option_strings, key=len)
        if a.required and f != flag:
            argv += [f, REQUIRED[f]]
    argv += [flag, value.format(good)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"awnn {command}: error: {flag}: expected comma-separated names, found an empty item (item "), err
    assert list(tmp_path.iterdir()) == []


def test_comma_separated_options_are_found():
    assert {(n, f) for n, f, _ in _comma_options()} >= {("compare", "--strategies"), ("study", "--profiles")}


def _data_root_commands():
    return [n for n, _, a in _string_options() if "--data-root" in a.option_strings]


URLS = {"https://example.org/data/wine.csv": "a URL (https://); expected a local path: trials read the data from their node's disk "
                                             "or a shared mount and download nothing: copy it there first (curl -L -O URL)",
        "s3://bucket/datasets": "a URL (s3://); expected a local path", "S3://bucket/x": "(aws s3 cp --recursive URL .)",
        "file:///srv/data": "a file:// URL; expected a local path: write it without file://",
        "hdfs://nn:8020/data": "a URL (hdfs://); expected a local path"}


@pytest.mark.parametrize("command", ["compare", "sweep", "train", "study"])
@pytest.mark.parametrize("url", list(URLS))
def test_a_data_root_that_is_a_url_is_one_line_naming_it_for_every_command(command, url, capsys, tmp_path, monkeypatch):
    """`--data-root https://.../wine.csv` (as pandas reads) or `s3://bucket/data` (as --storage takes) was read as a
    relative path and said missing at `./https:/example.org/...`; every command with the flag now says it is a URL,
    that nothing is downloaded, and how to make the local copy, before anything starts."""
    assert command in _data_root_commands()
    monkeypatch.chdir(tmp_path)
    argv = _with_required(command, "--data-root")
    assert main([*argv, "--data-root", url]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"awnn {command}: error: --data-root {url}: ") and URLS[url] in err[-1], err
    assert list(tmp_path.iterdir()) == []


def test_every_command_with_a_data_root_is_covered():
    assert set(_data_root_commands()) == {"compare", "sweep", "train", "study"}


def test_a_data_root_url_in_a_config_names_its_key():
    from awnn.config import ConfigError, TrainConfig

    with pytest.raises(ConfigError, match=r"grid.yaml: key 'data_root': expected a local path: trials read the data from their "
                                          r"node's disk or a shared mount .* found 'gs://bucket/mnist'"):
        TrainConfig.from_dict({"task": "mnist", "data_root": "gs://bucket/mnist"}, source="grid.yaml")
    assert TrainConfig.from_dict({"task": "mnist", "data_root": "data/https-mirror"}).data_root == "data/https-mirror"


# every command, with what its parser requires, started in a folder that was removed (or removed and made again) after
# the shell entered it: one line, exit 2 (before: a 28-line FileNotFoundError traceback from a comparison, an "Intel
# oneMKL FATAL ERROR" from `awnn env`)
GONE_ARGS = {"train": ["--task", "doublemoon", "--model", "fixed"], "grids": [], "sweep": ["--task", "doublemoon", "--strategy", "fixed"],
             "compare": ["--task", "doublemoon"], "report": ["--out", "r"], "draws": ["--out", "d"], "env": [], "study": ["fig3"]}


def test_every_command_has_its_arguments_for_the_removed_folder_test():
    from search.cli import COMMANDS

    assert sorted(GONE_ARGS) == sorted(COMMANDS)


@pytest.mark.parametrize("made_again", [False, True], ids=["removed", "made-again"])
@pytest.mark.parametrize("command", sorted(GONE_ARGS))
def test_a_command_started_in_a_removed_folder_says_so_in_one_line(tmp_path, command, made_again):
    import shlex

    gone = tmp_path / "run dir"
    gone.mkdir()
    again = f" && mkdir {shlex.quote(str(gone))}" if made_again else ""
    script = f"cd {shlex.quote(str(gone))} && rmdir {shlex.quote(str(gone))}{again} && exec \"$@\""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PWD": str(gone)}
    p = subprocess.run(["sh", "-c", script, "sh", *AWNN, command, *GONE_ARGS[command]], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-3000:]
    how = f"`cd '{gone}'` enters the one made there since" if made_again else "cd to a folder that exists"
    assert p.stderr == (f"awnn {command}: error: the folder this command was started in no longer exists (removed or moved "
                        f"since the shell entered it): {how}, then run it again\n"), p.stderr[-3000:]
    assert p.stdout == ""


# paths whose names are not UTF-8 (written in Latin-1 on an old file system: b"caf\xe9"): a command that runs on Ray
# refuses them in one line, naming the flag (or the folder it was started in), before Ray starts (before: a 41-line
# "UnicodeEncodeError: ... surrogates not allowed" traceback from Ray's start); a command that does not is left alone
LATIN1_NOT_UTF8 = "the byte 0xe9: a name written in Latin-1 or another legacy encoding); Ray, MLflow and SQLite take UTF-8 text only"


def _latin1(tmp_path) -> bytes:
    folder = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(folder)
    return folder


def _awnn_bytes(args: list, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([os.fsencode(a) if isinstance(a, str) else a for a in AWNN + args], cwd=cwd, capture_output=True,
                          text=True, errors="backslashreplace", timeout=120, env=env)


@pytest.mark.parametrize("command", [["compare", "--task", "doublemoon", "--budget", "smoke"],
                                     ["sweep", "--task", "doublemoon", "--budget", "smoke", "--strategy", "fixed"],
                                     ["study", "fig3", "--budget", "smoke"]])
def test_a_command_on_ray_started_in_a_folder_whose_name_is_not_utf8_says_so_in_one_line(tmp_path, command):
    folder = _latin1(tmp_path)
    p = _awnn_bytes(command, folder)
    assert p.returncode == 2 and p.stdout == "", p.stderr[-3000:]
    assert p.stderr == (f"awnn {command[0]}: error: the folder this command was started in, {tmp_path}/caf\\xe9: not UTF-8 text "
                        f"({LATIN1_NOT_UTF8}: cd to a folder whose path is UTF-8 (or rename it, e.g. convmv -f latin1 -t utf8)\n")
    assert os.listdir(folder) == []


@pytest.mark.parametrize("flag", ["--storage", "--data-root", "--tracking-uri", "--grid-dir"])
def test_a_flag_whose_path_is_not_utf8_is_named_in_one_line(tmp_path, flag):
    folder = _latin1(tmp_path)
    value = (b"sqlite:///" + folder + b"/m.db") if flag == "--tracking-uri" else folder
    p = _awnn_bytes(["compare", "--task", "doublemoon", "--budget", "smoke", flag, value], tmp_path)
    assert p.returncode == 2, p.stderr[-3000:]
    shown = os.fsencode(value).decode("utf-8", "backslashreplace")
    assert p.stderr == (f"awnn compare: error: {flag} {shown}: not UTF-8 text ({LATIN1_NOT_UTF8}: give one that is (rename it, "
                        "e.g. convmv -f latin1 -t utf8)\n"), p.stderr
    assert os.listdir(os.fsencode(tmp_path)) == [b"caf\xe9"]  # nothing written: no store, no results folder
    p = _awnn_bytes(["report", "--out", "r", "--tracking-uri", b"sqlite:///" + folder + b"/m.db"], tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("awnn report: error: --tracking-uri sqlite:///"), p.stderr


def test_a_command_that_does_not_run_on_ray_is_left_alone_in_such_a_folder(tmp_path):
    p = _awnn_bytes(["train", "--task", "doublemoon", "--model", "fixed", "--budget", "smoke"], _latin1(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[-1])["status"] == "ok"
