"""search/heap.py: the `awnn` command's own process leaves its import-time heap
out of the garbage collector's walks; nobody else's process is touched."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
from search import heap
before = gc.get_freeze_count()
if sys.argv[1] == "own":
    heap.own_process()
heap.settle()
settled = gc.get_freeze_count()
junk = [[i] for i in range(5000)]  # objects made after the first settle
heap.settle()  # once per process: the run's own objects stay collectable
again = gc.get_freeze_count()
heap.at_exit()
print(json.dumps({"before": before, "settled": settled, "again": again, "exit": gc.get_freeze_count()}))
"""


def _probe(mode: str, switch: str | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("AWNN_GC_FREEZE", None)
    if switch is not None:
        env["AWNN_GC_FREEZE"] = switch
    p = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, env=env, timeout=120, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_commands_own_process_freezes_once_after_setup_and_again_at_exit():
    seen = _probe("own")
    assert seen["before"] == 0 and seen["settled"] > 1000  # the modules imported so far
    assert seen["again"] == seen["settled"]  # a second settle() froze nothing more
    assert seen["exit"] >= seen["again"] + 5000  # at exit: everything, the run's objects too


@pytest.mark.parametrize("mode, switch", [("other", None), ("own", "0")], ids=["not-the-commands-process", "switched-off"])
def test_other_processes_and_the_switch_keep_pythons_collector(mode, switch):
    seen = _probe(mode, switch)
    assert seen == {"before": 0, "settled": 0, "again": 0, "exit": 0}


def test_main_called_in_a_process_of_its_own_freezes_nothing(tmp_path, capsys):
    """A test, a notebook: `main` in their process leaves their collector alone."""
    from search import heap
    from search.cli import main

    frozen = gc.get_freeze_count()
    assert main(["grids"]) == 0 and "doublemoon" in capsys.readouterr().out
    heap.settle()  # what a sweep run in this process calls (search/tune.py, run_plan)
    heap.at_exit()
    assert gc.get_freeze_count() == frozen


@pytest.mark.parametrize("argv, code", [(["grids"], 0), (["grids", "--no-such-flag"], 2)])
def test_the_entry_point_passes_mains_exit_code_on(argv, code):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "search.cli", *argv], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == code, p.stderr[-2000:]
