"""The CLI's manners (issue #17, CLI part): `--version`; `--strategy` and
`--strategies` checked against the strategy registry, naming the flag the
user typed, with "did you mean"; an unknown task named among the tasks that
have grids, with "did you mean"; a reader that goes away (`| head`) ends the
command quietly.  All before Ray starts."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import AWNN, ROOT, run_awnn


def test_version(tmp_path):
    p = run_awnn(["--version"], cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("awnn ") and len(p.stdout.split()) >= 2


@pytest.mark.parametrize("args,line", [
    (["sweep", "--task", "doublemoon", "--strategy", "awnnn"],
     "awnn sweep: error: --strategy: expected one of ['fixed', 'awnn', 'tpe', 'asha', 'random', 'awnn-asha', 'fixedplus'], found 'awnnn' (did you mean 'awnn'?)"),
    (["compare", "--task", "doublemoon", "--strategies", "fixed,randm"],
     "awnn compare: error: --strategies: expected a comma-separated subset of ['fixed', 'awnn', 'tpe', 'asha', 'random', 'awnn-asha', 'fixedplus'], found 'randm' (did you mean 'random'?)"),
])
def test_strategy_flags_name_themselves(tmp_path, args, line):
    p = run_awnn([*args, "--budget", "smoke"], cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "mlflow.db").exists()


def test_unknown_task_lists_task_names_with_a_hint(tmp_path):
    p = run_awnn(["sweep", "--task", "doublemon", "--strategy", "awnn", "--budget", "smoke"], cwd=tmp_path)
    assert p.returncode == 2
    line = p.stderr.strip().splitlines()[-1]
    assert "no grid for task 'doublemon' (did you mean 'doublemoon'?)" in line
    assert "spiralhard" in line and "spiralhard-fixed" not in line  # task names, not file names


def test_known_task_without_that_grid_says_which_it_has(tmp_path):
    grids = tmp_path / "grids"
    grids.mkdir()
    (grids / "doublemoon-awnn.yaml").write_text((ROOT / "search" / "grids" / "doublemoon-awnn.yaml").read_text())
    p = run_awnn(["sweep", "--task", "doublemoon", "--strategy", "fixed", "--budget", "smoke", "--grid-dir", str(grids)], cwd=tmp_path)
    assert p.returncode == 2 and "doublemoon has grids for awnn" in p.stderr


@pytest.mark.parametrize("args", [["grids"], ["grids", "--json"]])
def test_a_closed_pipe_ends_quietly(tmp_path, args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([*AWNN, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.read(10)
    proc.stdout.close()  # what `| head -c 10` does
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode in (0, 141), (proc.returncode, err)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device every write to fails with no space left)")
@pytest.mark.parametrize("args", [["grids"], ["train", "--task", "doublemoon", "--model", "fixed", "--epochs", "2", "--quiet"]])
def test_an_output_on_a_full_disk_is_one_line(tmp_path, args):
    """stdout redirected to a full disk (`awnn train ... > /full/result.json`):
    before, a traceback ending in OSError, exit 1; now one line, exit 2."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open("/dev/full", "w") as full:
        p = subprocess.run([*AWNN, *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.strip().splitlines()[-1:] == [f"awnn {args[0]}: error: cannot write its output (stdout): No space left on device"], p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]


def test_every_subcommand_has_a_description_and_examples_that_parse():
    import shlex

    from search.cli import COMMANDS, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # argparse keeps its subparsers there
    for name in COMMANDS:
        p = sub.choices[name]
        assert p.description and p.epilog.startswith("examples:"), name
        examples = [line.strip() for line in p.epilog.splitlines()[1:] if line.strip()]
        assert examples, name
        for example in examples:
            words = shlex.split(example)
            assert words[:2] == ["awnn", name], example
            parser.parse_args(words[1:])  # every flag of every example exists (argparse exits 2 otherwise)


def test_env_prints_versions_without_warnings(tmp_path):
    p = run_awnn(["env"], cwd=tmp_path)
    assert p.returncode == 0 and "Warning" not in p.stderr, p.stderr
    for name in ("python", "torch", "ray", "mlflow", "cuda", "cpus"):
        assert any(line.startswith(f"{name}:") for line in p.stdout.splitlines()), name


@pytest.mark.slow
def test_a_new_run_says_when_the_same_comparison_is_unfinished(tmp_path):
    """(issue #17) e.g. after a driver whose terminal was closed: the user is told that --resume would continue it."""
    from fault_helpers import sweep_args, write_inputs
    from search.sweep import Comparison
    from search.tune import RunSettings
    from tracking.contract import Tag, experiment_name
    from tracking.store import TrackingWriter, init_tracking

    grids, budget = write_inputs(tmp_path, epochs=2)
    tracking = f"sqlite:///{tmp_path / 'mlflow.db'}"
    key = Comparison("doublemoon", ["awnn"], str(budget), RunSettings(storage=str(tmp_path / "results")), tracking_uri=tracking,
                     grid_dir=str(grids), kind="sweep").key
    init_tracking(tracking)
    w = TrackingWriter(tracking, experiment_name("doublemoon"))
    w.start_run("cmp", name="sweep-old", tags={Tag.KIND: "comparison", Tag.COMPARISON: "doublemoon-old", Tag.COMPARISON_KEY: key, Tag.STATE: "running"})
    assert not w.close(timeout=30)
    p = run_awnn([*sweep_args(tmp_path, grids, budget, tracking), "--num-cpus", "2"], cwd=tmp_path, check=True)
    notes = [line for line in p.stderr.splitlines() if line.startswith("note: comparison doublemoon-old")]
    assert len(notes) == 1 and "unfinished (running)" in notes[0] and "--resume" in notes[0]
    again = run_awnn([*sweep_args(tmp_path, grids, budget, tracking), "--num-cpus", "2"], cwd=tmp_path, check=True)
    assert "note: comparison" not in again.stderr  # the newest with these arguments is now finished


@pytest.mark.parametrize("command", [
    ["grids"], ["compare", "--task", "doublemoon"],  # (sweep builds the same Comparison as compare)
    ["train", "--task", "doublemoon", "--model", "awnn", "--epochs", "1"], ["study", "table1"],
])
@pytest.mark.parametrize("where,says", [
    ("missing", "no such folder"), ("a-file", "a file, not a folder of grid YAML files"),
])
def test_every_command_names_a_grid_dir_that_is_no_folder(tmp_path, command, where, says):
    """A typo in --grid-dir used to list no grids (exit 0), blame the task, or
    (`awnn train`) fall back silently to TrainConfig's defaults."""
    (tmp_path / "a-file").write_text("not a folder\n")
    p = run_awnn([*command, "--grid-dir", where, *([] if command == ["grids"] else ["--budget", "smoke"])], cwd=tmp_path, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stdout[-500:], p.stderr[-2000:])
    assert p.stderr.strip().splitlines()[-1] == f"awnn {command[0]}: error: --grid-dir {where}: {says}"
    assert not (tmp_path / "mlflow.db").exists()


def test_grids_in_an_empty_folder_is_an_error_and_train_reads_a_malformed_grid_as_one(tmp_path):
    (tmp_path / "empty").mkdir()
    p = run_awnn(["grids", "--grid-dir", "empty"], cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().endswith("--grid-dir empty: no grid files (<task>-<strategy>.yaml) in it")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "doublemoon-awnn.yaml").write_text("task: doublemoon\nstrategy: awnn\nfixed:\n  lr: 0.01\n")
    p = run_awnn(["train", "--task", "doublemoon", "--model", "awnn", "--epochs", "1", "--grid-dir", "bad"], cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("awnn train: error: bad/doublemoon-awnn.yaml: "), p.stderr[-2000:]
    # a folder without this task's file: the task's TrainConfig defaults, as without --grid-dir for a task with no grid
    p = run_awnn(["train", "--task", "doublemoon", "--model", "awnn", "--epochs", "1", "--grid-dir", "empty"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]


def test_train_on_cuda_without_a_cuda_device_is_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    p = run_awnn(["train", "--task", "doublemoon", "--model", "awnn", "--epochs", "1", "--set", "device=cuda"], cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1].startswith("awnn train: error: device=cuda: torch sees no CUDA device on this machine")
