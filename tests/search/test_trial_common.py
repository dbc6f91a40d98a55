"""What every trial process sets up (search/trial_common.py): torch threads and,
on the CPU, float denormals flushed to zero unless the command kept them (awnn/arith.py)."""
import pytest
import torch

from awnn.arith import set_denormals
from search.trial_common import worker_setup

TINY = 1e-40  # a float32 denormal


@pytest.fixture
def restore():
    threads = torch.get_num_threads()
    yield
    set_denormals(False)
    torch.set_num_threads(threads)


@pytest.mark.parametrize("flush, expected", [(True, 0.0), (False, TINY), (None, 0.0)])
def test_worker_flushes_denormals_unless_kept(restore, flush, expected):
    settings = {"cpus_per_trial": 1, "gpus_per_trial": 0}
    if flush is not None:  # absent: the default, flushed
        settings["flush_denormal"] = flush
    worker_setup(settings)
    assert torch.get_num_threads() == 1
    value = float(torch.tensor([TINY]) * 1.0)
    assert value == pytest.approx(expected, abs=0, rel=1e-3) if expected else value == 0.0


def test_flushing_makes_dead_unit_arithmetic_fast_and_keeps_normal_values(restore):
    """Denormal operands are flushed, normal ones untouched (what makes the NCI1 AWNN epochs 10x faster)."""
    x = torch.full((4096,), TINY)
    y = torch.tensor([1.5e-38, 3.0])
    set_denormals(True)
    assert not (x * 1.0).any() and torch.equal(y * 1.0, y)
    set_denormals(False)
    assert (x * 1.0).all()


# ------------------------------------------------ an earlier driver's checkpoint
def _checkpoint(trial_dir, n, state, mtime, torn=False):
    import os

    d = trial_dir / f"checkpoint_{n:06d}"
    d.mkdir(parents=True)
    torch.save(state, d / "trainer.pt")
    if torn:  # what a driver killed while Ray copied the file into storage leaves
        data = (d / "trainer.pt").read_bytes()
        (d / "trainer.pt").write_bytes(data[: len(data) // 2])
    os.utime(d, (mtime, mtime))
    return d


def test_earlier_state_is_read_from_the_given_checkpoint(tmp_path):
    from search.trial_common import load_earlier_state

    trial = tmp_path / "cmp" / "awnn-sel-0001"
    _checkpoint(trial, 0, {"epoch": 3}, 1000)
    newest = _checkpoint(trial, 1, {"epoch": 7}, 2000)
    state, used = load_earlier_state(str(newest))
    assert state == {"epoch": 7} and used == str(newest)
    assert load_earlier_state(None) == (None, None)


def test_a_torn_checkpoint_falls_back_to_the_next_newest_beside_it(tmp_path, capsys):
    from search.trial_common import load_earlier_state

    trial = tmp_path / "cmp" / "awnn-sel-0001"
    _checkpoint(trial, 0, {"epoch": 2}, 1000)
    older = _checkpoint(trial, 1, {"epoch": 5}, 2000)
    torn = _checkpoint(trial, 2, {"epoch": 9, "w": torch.zeros(1000)}, 3000, torn=True)
    state, used = load_earlier_state(str(torn))
    assert state == {"epoch": 5} and used == str(older)
    assert "unreadable" in capsys.readouterr().err


def test_no_readable_checkpoint_starts_from_epoch_zero(tmp_path, capsys):
    from search.trial_common import load_earlier_state

    trial = tmp_path / "cmp" / "awnn-sel-0001"
    torn = _checkpoint(trial, 0, {"epoch": 9, "w": torch.zeros(1000)}, 1000, torn=True)
    (trial / "checkpoint_000001").mkdir()  # a dir Ray created before copying anything into it
    assert load_earlier_state(str(torn)) == (None, None)
    assert "starts from epoch 0" in capsys.readouterr().err


def test_ray_tune_logs_a_write_that_found_no_room_in_one_line(caplog):
    """Ray Tune's "Saving experiment state ... failed" on a full disk keeps its
    message and the error's line, not its traceback (search/tune.py), as does
    any failed save of Ray Tune's state (awnn never reads it); other errors
    keep theirs."""
    import logging

    from search.tune import tune_environment

    tune_environment()
    logger = logging.getLogger("ray.tune.execution.experiment_state")
    caplog.set_level(logging.ERROR, logger="ray.tune.execution.experiment_state")
    for exc in (OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device"), ValueError("other")):
        try:
            try:
                raise exc
            except OSError as e:
                raise RuntimeError("sync failed") from e
        except Exception:  # noqa: BLE001
            logger.error("Saving experiment state to storage at '%s' failed with exception: ", "/s/x", exc_info=True)
    other_logger = logging.getLogger("ray.tune.execution.tune_controller")
    caplog.set_level(logging.ERROR, logger="ray.tune.execution.tune_controller")
    try:
        raise ValueError("a bug")
    except ValueError:
        other_logger.error("Trial task failed for trial x", exc_info=True)
    full, other, bug = caplog.records
    assert full.getMessage() == "Saving experiment state to storage at '/s/x' failed with exception: No space left on device"
    assert full.exc_info is None
    # any failed save of Ray Tune's state is one line (awnn never reads it: e.g. Ray's race on a renamed temporary file)
    assert other.getMessage() == "Saving experiment state to storage at '/s/x' failed with exception: ValueError: other" and other.exc_info is None
    assert bug.exc_info is not None and bug.exc_info[0] is ValueError  # another error keeps its traceback
