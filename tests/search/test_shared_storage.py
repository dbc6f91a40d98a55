"""search/shared_storage.py: the driver's mark in a local --storage, and a trial's check of it (the real cluster's
case, a node with a --storage of its own: tests/system/test_node_environment.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from search import shared_storage
from search.node_limits import environment_remedy
from search.shared_storage import StorageNotShared, check, mark
from tracking.contract import environment_failure


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(shared_storage, "_MARKS", {})
    monkeypatch.delenv(shared_storage.SWITCH, raising=False)


def test_the_driver_marks_a_local_storage_once_and_a_trial_there_finds_it(tmp_path):
    storage = tmp_path / "results" / "deeper"  # (made if missing, as Ray Tune would)
    first = mark(str(storage))
    assert first and os.path.dirname(first) == str(storage) and os.path.isfile(first)
    assert mark(str(storage)) == first  # one mark per storage and process
    check(first, wait=0.0)
    check(None)  # nothing to check


def test_a_trial_that_does_not_find_the_mark_ends_with_the_environment_fault(tmp_path):
    missing = str(tmp_path / "storage" / ".awnn-driver-0123456789abcdef")
    t0 = time.monotonic()
    with pytest.raises(StorageNotShared) as e:
        check(missing, wait=1.5)
    assert 1.4 < time.monotonic() - t0 < 5  # it looked again for the wait, then said so
    assert str(e.value) == (f"this node does not see the driver's --storage {tmp_path / 'storage'}: a file the driver "
                            "wrote there (.awnn-driver-0123456789abcdef) is missing on this node, so the folder is this "
                            "node's own, not one every node shares")
    line = environment_failure(e.value)  # what the driver reads from the trial's error: the environment fault
    assert line and line.startswith("StorageNotShared: this node does not see the driver's --storage")
    assert environment_remedy(line, on_cluster=True).startswith("give --storage a folder every node mounts at the same path")


def test_a_mark_that_appears_while_the_trial_looks_is_found(tmp_path):
    marker = tmp_path / ".awnn-driver-late"
    writer = subprocess.Popen([sys.executable, "-c", f"import time, pathlib; time.sleep(1); pathlib.Path({str(marker)!r}).write_text('x')"])
    try:
        check(str(marker), wait=10.0)  # (a network mount's caches: the file shows up a moment late)
    finally:
        writer.wait(timeout=30)


@pytest.mark.parametrize("storage", ["s3://bucket/prefix", "gs://bucket/x", "file:///tmp/x"])
def test_a_uri_is_one_store_for_every_node_nothing_is_marked(storage):
    assert mark(storage) is None


def test_the_switch_off_or_a_storage_the_driver_cannot_write_marks_nothing(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert mark(str(blocker / "results")) is None  # (Ray Tune's own writes there meet the storage fault)
    monkeypatch.setenv(shared_storage.SWITCH, "0")
    assert mark(str(tmp_path / "results")) is None and not (tmp_path / "results").exists()


def test_the_mark_is_removed_when_the_driver_exits(tmp_path):
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from search.shared_storage import mark; "
            f"print(mark({str(tmp_path)!r}))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    marker = p.stdout.strip()
    assert marker.startswith(str(tmp_path)) and not os.path.exists(marker)
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".awnn-driver-")]


def test_a_mark_a_killed_driver_left_is_removed_by_the_next_driver_and_no_other(tmp_path):
    """SIGKILL (or the OOM killer) skips the exit handler that removes a driver's mark: the next driver on the host
    removes it, and leaves the marks of live drivers and of other hosts."""
    storage = tmp_path / "storage"
    code = ("import sys, time\nfrom search.shared_storage import mark\n"
            "print(mark(sys.argv[1]), flush=True)\ntime.sleep(600)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    killed = subprocess.Popen([sys.executable, "-c", code, str(storage)], stdout=subprocess.PIPE, text=True, env=env)
    live = subprocess.Popen([sys.executable, "-c", code, str(storage)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        killed_mark = killed.stdout.readline().strip()
        live_mark = live.stdout.readline().strip()
        killed.kill()
        killed.wait(timeout=30)
        assert os.path.isfile(killed_mark)  # what SIGKILL leaves
        other_host = storage / f"{shared_storage.PREFIX}0123456789abcdef"
        other_host.write_text(shared_storage._text("another-host.example", killed.pid))
        not_ours = storage / f"{shared_storage.PREFIX}notes"
        not_ours.write_text("a user's file with our prefix\n")
        mine = mark(str(storage))
        assert mine and os.path.isfile(mine)
        assert not os.path.exists(killed_mark)
        assert os.path.isfile(live_mark) and other_host.is_file() and not_ours.is_file()
    finally:
        live.kill()
        live.wait(timeout=30)
