"""A trial runs the driver's code (search/code_identity.py): the driver hands each trial the digest of every source
file of the project; the trial compares the files of the project modules it has loaded and, where one differs, ends
with CodeMismatch (an ImportError: the environment's fault, the comparison stops at it, resumable).  Before, a node
with an older copy ran it and its results counted as the driver's."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from search import code_identity
from search.code_identity import CodeMismatch, check_same_code, source_files
from search.node_limits import environment_remedy
from tracking.contract import environment_failure


def test_every_source_file_of_the_project_is_in_the_digest_and_this_process_matches_it():
    files = source_files()
    on_disk = {f"{p.relative_to(ROOT).as_posix()}" for pkg in code_identity.PACKAGES for p in (ROOT / pkg).rglob("*.py")
               if "__pycache__" not in p.parts}
    assert set(files) == on_disk
    assert all(re.fullmatch(r"[0-9a-f]{16}", d) for d in files.values())
    import search.trial  # noqa: F401 - what a trial loads first
    check_same_code(files)  # (nothing differs: no error)
    check_same_code(None)
    check_same_code({})  # (a driver whose check is off, or one from before it)


def test_a_file_that_differs_or_that_the_driver_lacks_is_named():
    import search.trial_common  # noqa: F401 - loaded: a trial runs it

    files = source_files()
    changed = {**files, "search/trial_common.py": "0" * 16}
    with pytest.raises(CodeMismatch) as e:
        check_same_code(changed)
    assert str(e.value) == ("this node's copy of the project differs from the driver's in the code a trial runs: "
                            "search/trial_common.py differs")
    lacking = {k: v for k, v in files.items() if k != "search/trial.py"}
    import search.trial  # noqa: F401

    with pytest.raises(CodeMismatch, match=r"search/trial\.py is not in the driver's copy$"):
        check_same_code(lacking)
    # a file this process has not loaded (a trial never loads the report's or the CLI's) may differ: a driver with
    # edits there is not refused
    unloaded = sorted(set(files) - set(code_identity._loaded_files()))
    assert unloaded, "every module of the project is loaded here: nothing to try"
    check_same_code({**files, unloaded[0]: "f" * 16})
    many = {k: "0" * 16 for k in files}
    with pytest.raises(CodeMismatch, match=r"differs and \d+ more$"):
        check_same_code(many)


def test_the_mismatch_is_an_environment_failure_whose_remedy_is_the_drivers_version():
    import ray.exceptions as rx

    mismatch = CodeMismatch("this node's copy of the project differs from the driver's in the code a trial runs: awnn/train_step.py differs")
    carried = rx.RayTaskError("train", "Traceback ...\nCodeMismatch: x", mismatch).as_instanceof_cause()  # as Ray pickles it
    line = environment_failure(carried)
    assert line == ("CodeMismatch: this node's copy of the project differs from the driver's in the code a trial runs: "
                    "awnn/train_step.py differs")
    remedy = environment_remedy(line, on_cluster=True)
    assert remedy.startswith("install the driver's version of this project on that node") and "AWNN_CODE_CHECK=0" in remedy


def test_the_switch_off_hands_the_trials_nothing_to_check():
    code = "from search.code_identity import source_files; from search.tune import trial_settings, RunSettings; " \
           "print(len(source_files()), len(trial_settings(RunSettings())['code_files']))"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True).stdout.split()
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**env, code_identity.SWITCH: "0"}).stdout.split()
    assert int(on[0]) > 100 and on[0] == on[1]
    assert off == ["0", "0"]
