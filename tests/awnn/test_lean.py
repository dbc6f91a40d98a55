"""The lean loop (awnn/lean.py, issue #30): one fusable config trained by the
stacked trainer with N = 1 must give the run the reference Trainer gives it,
continue its own checkpoints bit for bit, and read and write the Trainer's
checkpoint format.  Trajectories are compared in float64 (the tolerance and
why: the top of tests/awnn/test_stacked.py)."""
import io
import math

import pytest
import torch

from awnn.config import TrainConfig
from awnn.lean import LeanTrainer, lean_applies, make_trainer
from awnn.models import load_model
from awnn.train import CheckpointError, Trainer
from train_helpers import F64_TOL, fixed_config, one_thread, task, task64, tiny_task  # noqa: F401 - one_thread, task, task64: fixtures

pytestmark = pytest.mark.usefixtures("one_thread")


cfg = fixed_config


def without_time(history):
    return [{k: v for k, v in r.items() if k != "train_seconds"} for r in history]


def weight_diff(a: dict, b: dict) -> float:
    """The largest |difference| of two state dicts' entries (NaN where one alone is NaN)."""
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().masked_fill(a[k].isnan() & b[k].isnan(), 0.0).max()) for k in a)


def assert_same_run(lean: LeanTrainer, got, trainer: Trainer, ref, tol: float = F64_TOL) -> None:
    """Per-epoch records (the same keys; losses within tol, the rest equal), result and weights."""
    assert [r["epoch"] for r in got.history] == [r["epoch"] for r in ref.history]
    for mine, theirs in zip(without_time(got.history), without_time(ref.history)):
        assert mine.keys() == theirs.keys()
        for k in mine:
            if k in ("train_loss", "train_nll", "val_loss"):
                assert abs(mine[k] - theirs[k]) <= tol or (math.isnan(mine[k]) and math.isnan(theirs[k])), (mine["epoch"], k, mine[k], theirs[k])
            else:  # (NaN on both sides: no score yet, e.g. best_val_acc of a first epoch that diverged)
                both_nan = isinstance(mine[k], float) and isinstance(theirs[k], float) and math.isnan(mine[k]) and math.isnan(theirs[k])
                assert mine[k] == theirs[k] or both_nan, (mine["epoch"], k, mine[k], theirs[k])
    a, b = got.summary(), ref.summary()
    for k in ("train_seconds", "history"):
        a.pop(k, None), b.pop(k, None)
    for k in ("test_loss", "best_val_loss"):
        x, y = a.pop(k), b.pop(k)
        assert x == y or abs(x - y) <= tol or (math.isnan(x) and math.isnan(y)), k
    assert a.keys() == b.keys() and all(a[k] == b[k] or (a[k] != a[k] and b[k] != b[k]) for k in a), (a, b)
    assert weight_diff(lean.weights(), trainer.model.state_dict()) <= tol
    if trainer.best_model is not None:
        assert weight_diff(lean.best_model, trainer.best_model) <= tol
    else:
        assert lean.best_model is None


# ------------------------------------------------------------ the reference path
@pytest.mark.parametrize("changes", [
    {},
    {"split": "inner", "lr": 0.1, "select_metric": "loss"},
    {"hidden_layers": 1, "width": 40, "activation": "tanh", "weight_decay": 1e-3, "adam_eps": 1e-6},
    {"lr": 0.5, "patience": 1, "epochs": 6, "seed": 2},  # stops early (out of patience)
    {"lr": 1e300, "seed": 1},  # weights of ~1e300 overflow the logits: NaN loss, diverged in the first epoch
], ids=["outer", "inner-loss", "tanh-decay-eps", "patience", "diverges"])
def test_lean_run_matches_trainer_per_epoch_and_in_weights(task64, changes):
    c = cfg(**changes)
    lean, trainer = LeanTrainer(c, task64), Trainer(c, task64)
    batches = [], []
    got = lean.run(on_batch=lambda *a: batches[0].append(a[:3]))
    ref = trainer.run(on_batch=lambda *a: batches[1].append(a[:3]))
    assert_same_run(lean, got, trainer, ref)
    assert batches[0] == batches[1] and batches[0]  # (epoch, done, total) after every step, as the Trainer
    if "patience" in changes:
        assert got.epochs_run < c.epochs and got.status == "ok"
    if changes.get("lr") == 1e300:
        assert (got.status, got.epochs_run) == ("diverged", 1)
    assert (lean.epoch, lean.status, lean.step) == (trainer.epoch, trainer.status, trainer.step)


def test_lean_builds_the_trainers_weights_from_the_data_root(tmp_path):
    """Without a task handed in, both load the task themselves (a trial's case): the same initial weights."""
    c = cfg(data_root=str(tmp_path), epochs=1)
    assert weight_diff(LeanTrainer(c).weights(), Trainer(c).model.state_dict()) == 0.0


def test_make_trainer_takes_the_lean_loop_only_where_it_applies(task):
    assert isinstance(make_trainer(cfg(), task), LeanTrainer) and lean_applies(cfg())
    assert type(make_trainer(cfg(), task, lean=False)) is Trainer  # the switch: the reference path
    for other in (cfg(model="awnn"), cfg(optimizer="sgd"), cfg(lr_schedule="multistep", lr_milestones="2")):
        assert not lean_applies(other) and type(make_trainer(other, task)) is Trainer
    with pytest.raises(ValueError, match="key 'model'"):
        LeanTrainer(cfg(model="awnn"), task)


def test_lean_export_model_is_the_trainers(task64):
    c = cfg()
    lean, trainer = LeanTrainer(c, task64), Trainer(c, task64)
    lean.run(), trainer.run()
    mine, theirs = lean.export_model(), trainer.export_model()
    assert mine.keys() == theirs.keys() and mine["format"] == theirs["format"]
    assert {k: mine[k] for k in mine if k != "model"} == {k: theirs[k] for k in theirs if k != "model"}
    assert weight_diff(mine["model"], theirs["model"]) <= F64_TOL
    model = load_model(mine)  # a kept model builds back without its data
    assert weight_diff(model.state_dict(), mine["model"]) == 0.0
    assert lean.truncation() is None and trainer.truncation() is None  # a fixed MLP is not truncated


# ------------------------------------------------------------------ checkpoints
def through_bytes(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)  # as a checkpoint file would go
    buf.seek(0)
    return torch.load(buf, weights_only=True)  # plain tensors and containers, as the Trainer's


@pytest.mark.parametrize("split", ["outer", "inner"])
def test_lean_checkpoint_resume_is_bit_identical_to_uninterrupted_run(task, split):
    """float32, the trials' precision: a run continued from its checkpoint after
    epoch 2 (taken inside the epoch callback, as a trial takes it) is the run that never stopped."""
    c = cfg(epochs=5, split=split, weight_decay=1e-3)
    full = LeanTrainer(c, task)
    full_result = full.run()
    first, saved = LeanTrainer(c, task), []
    first.run(on_epoch=lambda r: saved.append(through_bytes(first.state_dict())) if r["epoch"] == 2 else None)
    resumed = LeanTrainer(c, task)
    resumed.load_state_dict(saved[0])
    assert (resumed.epoch, resumed.step) == (2, saved[0]["step"]) and saved[0]["step"] > 0
    seen = []
    result = resumed.run(on_epoch=lambda r: seen.append(r["epoch"]))
    assert seen == [3, 4, 5]
    assert without_time(resumed.history) == without_time(full.history)
    assert all(torch.equal(resumed.weights()[k], full.weights()[k]) for k in full.weights())
    if split == "outer":
        assert all(torch.equal(resumed.best_model[k], full.best_model[k]) for k in full.best_model)
    a, b = result.summary(), full_result.summary()
    a.pop("train_seconds"), b.pop("train_seconds")
    assert a == b


@pytest.mark.parametrize("writer, reader", [(LeanTrainer, Trainer), (Trainer, LeanTrainer)], ids=["lean-to-trainer", "trainer-to-lean"])
def test_checkpoints_continue_across_the_two_paths(task64, writer, reader):
    """Either path continues the other's checkpoint (the Trainer's format, Adam's
    state included): the continued run is the uninterrupted Trainer's, in float64."""
    c = cfg(epochs=5, weight_decay=1e-3)
    ref_trainer = Trainer(c, task64)
    ref = ref_trainer.run()
    first = writer(c.replace(epochs=2), task64)
    first.run()  # a finished run's checkpoint, continued with more epochs (how a run is extended)
    second = reader(c, task64)
    second.load_state_dict(through_bytes(first.state_dict()))
    got = second.run()
    assert [r["epoch"] for r in got.history] == [1, 2, 3, 4, 5]
    for mine, theirs in zip(got.history, ref.history):
        assert all(abs(mine[k] - theirs[k]) <= F64_TOL for k in ("train_loss", "val_loss")), mine["epoch"]
        assert (mine["val_acc"], mine["best_val_acc"]) == (theirs["val_acc"], theirs["best_val_acc"])
    weights = second.weights() if isinstance(second, LeanTrainer) else second.model.state_dict()
    assert weight_diff(weights, ref_trainer.model.state_dict()) <= F64_TOL
    # Adam's state is the Trainer's, entry for entry
    mine, theirs = (t.state_dict()["optimizer"] if isinstance(t, LeanTrainer) else t.optimizer.state_dict() for t in (second, ref_trainer))
    assert mine["param_groups"] == theirs["param_groups"]
    for i, s in theirs["state"].items():
        assert int(mine["state"][i]["step"]) == int(s["step"]) == ref_trainer.step
        assert all(float((mine["state"][i][k] - s[k]).abs().max()) <= F64_TOL for k in ("exp_avg", "exp_avg_sq"))


def test_a_checkpoint_of_an_ended_run_trains_no_further(task):
    """Out of patience at the checkpoint's epoch: the continued run ends at once, with the same result."""
    c = cfg(lr=0.5, patience=1, epochs=8, seed=2)
    saved = []
    full = LeanTrainer(c, task)
    result = full.run(on_epoch=lambda r: saved.append(full.state_dict()))
    assert result.epochs_run < c.epochs
    resumed = LeanTrainer(c, task)
    resumed.load_state_dict(saved[-1])
    seen = []
    again = resumed.run(on_epoch=seen.append)
    assert seen == [] and again.epochs_run == result.epochs_run and again.best_epoch == result.best_epoch


def test_lean_checkpoint_from_other_config_or_format_raises(task):
    src = LeanTrainer(cfg(epochs=1, lr=0.02, width=8), task)
    src.run()
    with pytest.raises(CheckpointError, match=r"another configuration \(differs in: lr, width\)"):
        LeanTrainer(cfg(epochs=2), task).load_state_dict(src.state_dict())
    with pytest.raises(CheckpointError, match="not an awnn training checkpoint"):
        LeanTrainer(cfg(epochs=2), task).load_state_dict({"format": "awnn-stacked-v1"})
    awnn = Trainer(TrainConfig.from_dict({"task": "doublemoon", "batch_size": 32, "epochs": 1, "device": "cpu"}), task)
    with pytest.raises(CheckpointError, match="another configuration"):
        LeanTrainer(cfg(epochs=2), task).load_state_dict(awnn.state_dict())
    state = src.state_dict()
    state["model"]["layers.0.weight"] = torch.zeros(3, 2)
    with pytest.raises(CheckpointError, match="checkpoint does not fit the model"):
        LeanTrainer(cfg(epochs=2, lr=0.02, width=8), task).load_state_dict(state)


def test_every_trainer_path_records_the_same_keys_every_epoch_and_no_gpu_memory_on_a_cpu():
    """Each path a trial trains in gives a record per epoch with the keys the
    Trainer's has (a fixed MLP's in the lean loop and a fused group alike; the
    AWNN's adds its rates and prior), so MLflow gets the same metrics whichever
    path trained a config: a key one path forgot (a fused group's gpu_mem_mib
    on CUDA until 2026-12-04, tests/system/test_gpu.py) fails here on a CPU's
    keys.  On a CPU none claims GPU memory."""
    from train_helpers import every_trainer_path

    paths = every_trainer_path("cpu")
    assert sorted(paths) == ["fused", "lean", "trainer-awnn", "trainer-fixed"]
    keys = {path: [sorted(r) for r in history] for path, history in paths.items()}
    fixed = set(keys["trainer-fixed"][0])
    for path, per_epoch in keys.items():
        assert len(per_epoch) >= 2, path
        expected = fixed | ({"rate_l0", "train_prior"} if path == "trainer-awnn" else set())
        assert all(set(k) == expected for k in per_epoch), (path, per_epoch[0], sorted(expected))
        assert all("gpu_mem_mib" not in r and r["epoch"] >= 1 for r in paths[path]), path
