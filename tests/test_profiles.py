"""The `awnn_profile` key: `paper-text` (the paper's equations as printed,
this project's behaviour before the profiles existed) and `authors` (what
the paper's authors ran)."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture_module():
    spec = importlib.util.spec_from_file_location("make_paper_text_trainer", FIXTURES / "make_paper_text_trainer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def reference():
    return torch.load(FIXTURES / "paper_text_trainer.pt", weights_only=False)


@pytest.fixture
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("name", ["awnn_1layer", "awnn_2layer", "awnn_rate_prior", "fixed"])
def test_paper_text_profile_reproduces_the_recorded_trainer_bit_for_bit(name, reference, one_thread):
    mod = _fixture_module()
    ref = reference[name]
    overrides = {**ref["overrides"], **PAPER_TEXT}
    got = mod.record(name, overrides)
    assert got["widths"] == ref["widths"]
    assert got["best_epoch"] == ref["best_epoch"]
    assert got["test_acc"] == ref["test_acc"]
    assert len(got["history"]) == len(ref["history"])
    for mine, theirs in zip(got["history"], ref["history"]):
        for key, value in theirs.items():
            assert key in mine, key
            same = mine[key] == value or (isinstance(value, float) and math.isnan(value) and math.isnan(mine[key]))
            assert same, f"epoch {theirs['epoch']} {key}: {mine[key]!r} != recorded {value!r}"
    assert got["state"].keys() == ref["state"].keys()
    for key, t in ref["state"].items():
        assert torch.equal(got["state"][key], t), key


PAPER_TEXT = {"awnn_profile": "paper-text"}
