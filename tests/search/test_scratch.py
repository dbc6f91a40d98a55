"""Scratch folders (search/scratch.py): a process that is killed leaves its
folders, and the next one made on the machine sweeps them; nothing of a live
process, a folder being made, another name or a non-folder is touched.
Real processes, really killed."""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from search import scratch

ROOT = Path(__file__).resolve().parents[2]

HOLDER = """
import sys, time
from search import scratch
paths = [scratch.make(p) for p in scratch.PREFIXES]
for p in paths:
    open(p + "/trainer.pt", "wb").write(b"x" * 1000)
print(" ".join(paths), flush=True)
time.sleep(600)
"""


@pytest.fixture
def tmp_root(tmp_path, monkeypatch):
    """This process's and its children's temporary folder: a fresh one."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(scratch, "_last_sweep", [float("-inf")])
    return tmp_path


def _holder():
    p = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    paths = p.stdout.readline().split()
    assert len(paths) == len(scratch.PREFIXES), paths
    return p, [Path(x) for x in paths]


def _age(*paths, seconds=scratch.GRACE_S + 5):
    t = time.time() - seconds
    for path in paths:
        os.utime(path, (t, t))


def test_a_killed_process_leaves_its_folders_and_the_next_one_made_sweeps_them(tmp_root):
    proc, paths = _holder()
    try:
        _age(*paths)
        assert scratch.sweep() == [] and all(p.is_dir() for p in paths)  # its process lives: held
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert all(p.is_dir() for p in paths)  # no finally, no exit handler ran: left behind
        scratch._last_sweep[0] = float("-inf")  # (one sweep a minute in a process: this one's first folder)
        mine = scratch.make("awnn-ckpt-")  # a new checkpoint of another trial: sweeps first
        assert not any(p.exists() for p in paths)
        assert Path(mine).is_dir()
        _age(mine)
        assert scratch.sweep() == [] and Path(mine).is_dir()  # this process holds it
        scratch.remove(mine)
        assert not Path(mine).exists() and mine not in scratch._held
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_ends_normally_releases_its_folders_to_the_sweep(tmp_root):
    """Its own exit handler may not run (exit_now: os._exit); the lock goes with the process anyway."""
    code = "from search import scratch; import os; print(scratch.make('awnn-warm-')); os._exit(0)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.strip()
    left = Path(out)
    assert left.is_dir() and left.parent == tmp_root
    assert scratch.sweep() == []  # young: it may be one being made
    _age(left)
    assert scratch.sweep() == [str(left)] and not left.exists()


def test_only_unheld_stale_folders_of_the_tools_kinds_are_swept(tmp_root):
    young = Path(tempfile.mkdtemp(prefix="awnn-ckpt-"))  # made, not yet locked
    other = Path(tempfile.mkdtemp(prefix="awnn-locks-"))  # another name
    file_ = tmp_root / "awnn-model-file"
    file_.write_text("not a folder")
    target = Path(tempfile.mkdtemp(prefix="elsewhere-"))
    (target / "keep").write_text("x")
    link = tmp_root / "awnn-ckpt-link"
    link.symlink_to(target)
    stale = Path(tempfile.mkdtemp(prefix="awnn-model-"))
    (stale / "sub").mkdir()
    (stale / "sub" / "model.pt").write_bytes(b"x")
    _age(other, file_, target, stale)
    os.utime(link, (time.time() - 100,) * 2, follow_symlinks=False)
    assert scratch.sweep() == [str(stale)]
    assert young.is_dir() and other.is_dir() and file_.is_file() and (target / "keep").is_file() and link.is_symlink()
    _age(young)
    assert scratch.sweep() == [str(young)]


def test_a_prefix_outside_the_swept_kinds_is_refused(tmp_root):
    with pytest.raises(ValueError, match="awnn-tmp-.*search/scratch.py"):
        scratch.make("awnn-tmp-")


KILLED_IN_REPORT = """
import os, signal
from search.trial_common import report_with_checkpoint

class Dies:  # killed while torch.save writes the checkpoint: its folder exists, nothing of ours runs after
    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGKILL)

report_with_checkpoint({"epoch": 1}, {"model": Dies()})
"""


def test_a_trial_killed_while_it_writes_a_checkpoint_leaves_a_folder_the_next_report_sweeps(tmp_root):
    p = subprocess.run([sys.executable, "-c", KILLED_IN_REPORT], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    left = [x for x in tmp_root.iterdir() if x.name.startswith("awnn-ckpt-")]
    assert len(left) == 1 and (left[0] / "trainer.pt").exists()
    _age(left[0])
    from search.trial_common import report_with_checkpoint

    with pytest.warns(UserWarning, match="only be called inside"):  # (outside a Tuner, Ray's report does nothing)
        report_with_checkpoint({"epoch": 2}, {"epoch": 2})
    assert not any(x.name.startswith(scratch.PREFIXES) for x in tmp_root.iterdir())  # swept, and its own removed


def test_the_driver_makes_its_warm_up_folder_as_a_scratch_folder():
    """search/tune.py's warm-up note is swept like the checkpoints (a killed driver leaves it too)."""
    import inspect

    from search import tune

    assert 'scratch.make("awnn-warm-")' in inspect.getsource(tune.init_ray)
