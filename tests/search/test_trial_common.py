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
