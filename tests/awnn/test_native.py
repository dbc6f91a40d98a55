"""awnn/native.py: the adaptive layer's element-wise step work in C against the
same arithmetic in torch ops (awnn/fast_step.py's reference path): whole
float64 runs over width moves in every branch (activations rescaled or the
next weight, activations in place or new, hidden layers so narrow their
pre-activations come transposed), one float32 step; and the build: made once, shared by processes
building at once, every failure (no compiler, a compile error, an unwritable
cache, a damaged library, the switch) leaving the torch path and one line."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from awnn import aside, native
from awnn.train import Trainer
from train_helpers import F64_TOL, config, needs_checked_torch, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

ROOT = Path(__file__).resolve().parents[2]
HAVE_CC = native.compiler() is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="no C compiler on this machine: the torch path is the one taken (tested below)")

RUNS = {
    # 1 hidden layer, batch 32: the read-out's weight rescaled (W * p)
    "1-layer": {},
    # 2 layers: the hidden layer rescales the activations (a * p; d a written over G)
    "2-layers-rate-prior": {"hidden_layers": 2, "rate_prior": "gaussian", "rate_prior_mean": 0.05, "rate_prior_std": 0.2},
    "3-layers-leaky-relu": {"hidden_layers": 3, "activation": "leaky_relu", "batch_size": 16},
    # gelu's activation is a new tensor and its backward reads the pre-activation
    "gelu-batch-64": {"activation": "gelu", "batch_size": 64},
}


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A cache of its own and no library loaded in this process yet."""
    monkeypatch.setenv(aside.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(native.SWITCH, raising=False)
    monkeypatch.setattr(native, "_loaded", {})
    return tmp_path / "cache" / "awnn"


def _counting(kernels, counts):
    """`kernels` with its two calls counted (the C pass really taken)."""
    fwd, bwd = kernels.forward, kernels.backward

    def forward(*a, **k):
        counts["forward"] += 1
        return fwd(*a, **k)

    def backward(*a, **k):
        counts["backward"] += 1
        return bwd(*a, **k)

    kernels.forward, kernels.backward = forward, backward
    return kernels


def _run(changes, use_native: bool, dtype=torch.float64, epochs=6, task=None):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        task = task or tiny_task()
        if dtype == torch.float64:
            task = dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})
        t = Trainer(config(epochs=epochs, **changes), task)
        assert t._fast is not None
        counts = {"forward": 0, "backward": 0}
        if use_native:
            assert t._fast.native is not None, "the kernels did not load"
            _counting(t._fast.native, counts)
        else:
            t._fast.native = None
        t.run()
    finally:
        torch.set_default_dtype(old)
    return t, counts


def _agree(a: Trainer, b: Trainer, tol: float) -> None:
    for ha, hb in zip(a.history, b.history, strict=True):
        assert ha["width_total"] == hb["width_total"] and ha["val_acc"] == hb["val_acc"], ha["epoch"]
        for k in ("train_loss", "train_nll", "val_loss", "rate_l0"):
            assert abs(ha[k] - hb[k]) <= tol, (ha["epoch"], k, ha[k], hb[k])
    for (k, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        if torch.is_tensor(x) and x.is_floating_point():
            assert x.shape == y.shape and float((x - y).abs().max()) <= tol, k


@needs_cc
@needs_checked_torch
@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("changes", list(RUNS.values()), ids=list(RUNS))
def test_whole_float64_runs_agree_with_the_torch_ops(changes):
    c_run, counts = _run(changes, True)
    ref, _ = _run(changes, False)
    layers = changes.get("hidden_layers", 1)
    assert counts["forward"] == counts["backward"] == layers * c_run._fast.steps > 0
    assert len({h["width_total"] for h in ref.history}) > 1  # the widths moved
    _agree(c_run, ref, F64_TOL)


@needs_cc
@needs_checked_torch
@pytest.mark.usefixtures("one_thread")
def test_layers_too_narrow_for_a_dense_pre_activation_agree_too():
    """Hidden widths below 8 make products.affine return the pre-activation
    transposed (not in dense rows), so the activations are too: at batch 32
    these widths rescale the next weight (its rows dense), which the C pass
    takes, and the run is the same."""
    changes = {"hidden_layers": 2, "rate": 1.0}
    c_run, counts = _run(changes, True, epochs=3)
    ref, _ = _run(changes, False, epochs=3)
    assert max(h["width_total"] for h in ref.history) <= 2 * 7
    assert counts["forward"] == counts["backward"] == 2 * c_run._fast.steps > 0
    _agree(c_run, ref, F64_TOL)


@needs_cc
@needs_checked_torch
@pytest.mark.usefixtures("one_thread")
def test_a_layer_whose_activations_come_transposed_keeps_the_torch_ops():
    """Widths [4, 20] at batch 16: layer 0's pre-activation comes transposed and
    rescales its activations (a * p), a layout the C pass was not written for:
    that layer takes the torch ops every step, layer 1 the C pass, and the steps
    are the same as the torch ops' alone."""
    finals = []
    for use_native in (True, False):
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            task = dataclasses.replace(tiny_task(), x=tiny_task().x.to(torch.float64), _cache={})
            torch.manual_seed(0)
            t = Trainer(config(hidden_layers=2, batch_size=16), task)
            t.model.set_widths([4, 20])
            t.model.frozen = True
            counts = {"forward": 0, "backward": 0}
            if use_native:
                _counting(t._fast.native, counts)
            else:
                t._fast.native = None
            x, y = task.tensors("inner", "train", torch.device("cpu"))
            prior = t.rate_prior(1)
            for i in range(6):  # the first takes the general step
                t.train_step(x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16], prior)
        finally:
            torch.set_default_dtype(old)
        assert t._fast.steps == 5
        if use_native:
            assert counts == {"forward": 5, "backward": 5}  # layer 1 only
        finals.append([p.detach().clone() for p in t.model.parameters()])
    for a, b in zip(*finals, strict=True):
        assert float((a - b).abs().max()) <= F64_TOL


@needs_cc
@needs_checked_torch
@pytest.mark.usefixtures("one_thread")
def test_one_float32_step_agrees_to_rounding():
    """float32: exp and rho's sum round in another order (rho's in double)."""
    states = []
    for use_native in (True, False):
        torch.manual_seed(0)
        t = Trainer(config(hidden_layers=2), tiny_task())
        if not use_native:
            t._fast.native = None
        else:
            assert t._fast.native is not None
        x, y = t.task.tensors("inner", "train", torch.device("cpu"))
        prior = t.rate_prior(1)
        for i in range(3):  # the first takes the general step
            t.update_widths()
            loss, _, _, _ = t.train_step(x[i * 32 : (i + 1) * 32], y[i * 32 : (i + 1) * 32], prior)
        assert t._fast.steps == 2
        states.append((float(loss), [p.detach().clone() for p in t.model.parameters()]))
    (loss_a, pa), (loss_b, pb) = states
    assert abs(loss_a - loss_b) <= 1e-6
    for a, b in zip(pa, pb, strict=True):
        assert float((a - b).abs().max()) <= 1e-6 * max(1.0, float(b.abs().max()))


@needs_cc
def test_the_library_is_built_once_and_reused(fresh):
    k = native.kernels()
    assert k is not None and native.library_path().exists()
    built = native.library_path().stat().st_mtime_ns
    native._loaded.clear()
    assert native.kernels() is not None
    assert native.library_path().stat().st_mtime_ns == built
    assert not [f for f in fresh.iterdir() if f.name.endswith(aside.SUFFIX)]


@needs_cc
def test_processes_building_at_once_leave_one_library(fresh):
    code = "from awnn import native; import sys; sys.exit(0 if native.kernels() is not None else 3)"
    env = {**os.environ, aside.CACHE_ENV: str(fresh.parent)}
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "not available" not in err, err
    assert [f.name for f in fresh.iterdir()] == [native.library_path().name]


def _falls_back(capsys) -> str:
    assert native.kernels() is None
    assert native.kernels() is None  # (asked again: said once)
    err = capsys.readouterr().err
    assert err.count("awnn: the C step kernels are not available") == 1, err
    return err


def test_no_compiler_leaves_the_torch_path_and_says_so(fresh, monkeypatch, capsys):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    err = _falls_back(capsys)
    assert "no C compiler found" in err and native.SWITCH in err
    assert not fresh.exists() or not list(fresh.iterdir())


def test_a_failing_compiler_leaves_nothing_behind(fresh, tmp_path, monkeypatch, capsys):
    cc = tmp_path / "badcc"
    cc.write_text("#!/bin/sh\necho 'fatal error: no headers today' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    err = _falls_back(capsys)
    assert "badcc failed (exit 1): fatal error: no headers today" in err
    assert not list(fresh.iterdir())  # (nothing aside, no library)


def test_an_unwritable_cache_leaves_the_torch_path(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(aside.CACHE_ENV, str(tmp_path / "a-file"))  # (its folder cannot be made)
    monkeypatch.setattr(native, "_loaded", {})
    monkeypatch.delenv(native.SWITCH, raising=False)
    _falls_back(capsys)


@needs_cc
def test_a_damaged_library_is_rebuilt(fresh, capsys):
    path = native.library_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x7fELF not really")
    assert native.kernels() is not None
    assert "not available" not in capsys.readouterr().err
    assert path.read_bytes()[:4] == b"\x7fELF" and path.stat().st_size > 1000


def test_the_switch_turns_it_off_and_training_still_runs(fresh, monkeypatch, capsys):
    monkeypatch.setenv(native.SWITCH, "0")
    assert native.kernels() is None
    t = Trainer(config(epochs=1), tiny_task())
    assert t._fast is not None and t._fast.native is None
    t.run()
    assert t.history and capsys.readouterr().err == ""
    assert not fresh.exists()  # nothing built
