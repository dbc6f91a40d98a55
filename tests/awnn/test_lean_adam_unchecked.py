"""On a torch that awnn/lean_adam.py was not checked against (a user's other
version; the GPU machine's image), the product must fall back to
torch.optim.Adam and the Trainer's general step, saying so once; these tests
run on any torch (they make the installed one unchecked).  The lean paths'
own tests (test_lean_adam.py, test_fast_step.py, test_stacked_adam.py, ...)
skip there with that reason (tests/train_helpers.py, needs_checked_torch)."""
import os

import pytest
import torch

import awnn.lean_adam as lean_adam
import awnn.stacked_adam as stacked_adam
from awnn.lean_adam import make_adam
from awnn.layers import FixedMLP
from awnn.stacked import StackedMLP
from awnn.train import Trainer
from train_helpers import CHECKED_TORCH, config, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

pytestmark = pytest.mark.usefixtures("one_thread")

REQUIRE = "AWNN_REQUIRE_CHECKED_TORCH"  # set by the Makefile's test target, whose install pins a checked torch


@pytest.fixture
def unchecked(monkeypatch):
    """The installed torch made one the lean Adam was not checked against."""
    monkeypatch.setattr(lean_adam, "TESTED_TORCH", ("0.1.",))
    monkeypatch.setattr(lean_adam, "_warned", [])


def test_an_unchecked_torch_or_the_switch_gives_torch_adam_saying_so_once(unchecked, monkeypatch, capsys):
    ps = [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(3))]
    adams = [make_adam([{"params": ps}], lr=0.01) for _ in range(2)]
    assert all(type(a) is torch.optim.Adam for a in adams)
    assert adams[0].param_groups[0]["foreach"] is True
    err = capsys.readouterr().err
    assert err.count("not one the lean Adam was checked against") == 1 and torch.__version__ in err
    monkeypatch.setattr(lean_adam, "TESTED_TORCH", (torch.__version__,))
    monkeypatch.setenv(lean_adam.SWITCH, "0")
    assert type(make_adam([{"params": ps}], lr=0.01)) is torch.optim.Adam
    assert not lean_adam.kernel_applies([ps[0].detach()])


@pytest.mark.parametrize("changes", [{}, {"model": "fixed", "width": 12}], ids=["awnn-authors", "fixed"])
def test_the_trainer_on_an_unchecked_torch_trains_the_reference_way(unchecked, changes):
    """No lean Adam, no fast step: torch.optim.Adam over the general step, and
    the run is the one the switch AWNN_LEAN_ADAM=0 gives."""
    runs = []
    for env in (None, "0"):
        if env is not None:
            os.environ[lean_adam.SWITCH] = env
        try:
            torch.manual_seed(0)
            t = Trainer(config(epochs=2, **changes), tiny_task())
            assert type(t.optimizer) is torch.optim.Adam and t._fast is None and t._step_with is None
            t.run()
            runs.append(t)
        finally:
            os.environ.pop(lean_adam.SWITCH, None)
    strip = lambda h: [{k: v for k, v in r.items() if k != "train_seconds"} for r in h]  # noqa: E731
    assert strip(runs[0].history) == strip(runs[1].history)


def test_the_stacked_adam_on_an_unchecked_torch_takes_the_reference(unchecked):
    torch.manual_seed(0)
    stack = StackedMLP([FixedMLP(3, 2, hidden_layers=1, width=4) for _ in range(2)])
    adam = stacked_adam.StackedAdam(stack, [0.01, 0.02], [0.0, 0.0], [1e-8, 1e-8])
    before = stack.flat.detach().clone()
    stack.grad.normal_()
    adam.step()
    assert adam._kernel[1] is None and not torch.equal(stack.flat, before)


@pytest.mark.skipif(os.environ.get(REQUIRE) != "1", reason=f"{REQUIRE} is not 1 (the Makefile's test target sets it: its install pins a checked torch)")
def test_the_installed_torch_is_a_checked_one():
    """`make test` fails on a torch upgrade of the Makefile's pin, so that the
    kernel's CPU behaviour on strided tensors and its signature are checked
    again before TESTED_TORCH grows; elsewhere another torch is allowed."""
    assert CHECKED_TORCH, (torch.__version__, lean_adam.TESTED_TORCH)
    assert lean_adam.enabled()
