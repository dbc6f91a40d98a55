"""One training run: checkpoints, width cap, divergence, compression, truncation."""
import io
import json
import math
import warnings

import pytest
import torch

from awnn.distributions import rho_from_rate
from awnn.layers import MaxWidthReached, model_widths
from awnn.loss import RatePrior, elbo_loss, gaussian_log_prob_sum
from awnn.train import CheckpointError, Trainer, evaluate, train, truncation_curve
from train_helpers import config, one_thread, tiny_task  # noqa: F401 - one_thread: a fixture

CPU = torch.device("cpu")
START = 48  # the starting width at rate 0.05, k 0.9 (the `authors` profile's floor + 2)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def task():
    return tiny_task()


def without_time(history):
    return [{k: v for k, v in r.items() if k != "train_seconds"} for r in history]


def assert_same_tensors(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        if torch.is_tensor(a[k]):
            assert torch.equal(a[k], b[k]), k
        elif isinstance(a[k], dict):
            assert_same_tensors(a[k], b[k])
        else:
            assert a[k] == b[k], k


# ------------------------------------------------------------------ checkpoints
@pytest.mark.parametrize("changes", [{}, {"optimizer": "sgd", "hidden_layers": 2}, {"lr_schedule": "multistep", "lr_milestones": "2,4", "width_update_interval": 3}], ids=["adam", "sgd-2-layers", "schedule-interval"])
def test_trainer_checkpoint_resume_is_bit_identical_to_uninterrupted_run(task, changes):
    full = Trainer(config(epochs=6, **changes), task)
    full_result = full.run()

    first = Trainer(config(epochs=3, **changes), task)
    first.run()
    buf = io.BytesIO()
    torch.save(first.state_dict(), buf)  # through bytes, as a checkpoint file would go
    buf.seek(0)
    state = torch.load(buf, weights_only=True)  # plain tensors and containers: loads without unpickling code

    resumed = Trainer(config(epochs=6, **changes), task)
    resumed.load_state_dict(state)
    assert resumed.epoch == 3 and resumed.step == first.step
    seen = []
    result = resumed.run(on_epoch=lambda r: seen.append(r["epoch"]))
    assert seen == [4, 5, 6]  # the epoch counter continues
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3, 4, 5, 6]
    # widths changed along the way, so the check covers resizes after resuming
    assert len({r["width_total"] for r in full.history}) > 1
    # bit-identical: every record, the weights, the optimiser state, the result
    assert without_time(resumed.history) == without_time(full.history)
    assert_same_tensors(resumed.model.state_dict(), full.model.state_dict())
    assert_same_tensors(resumed.optimizer.state_dict()["state"], full.optimizer.state_dict()["state"])
    a, b = result.summary(), full_result.summary()
    a.pop("train_seconds"), b.pop("train_seconds")
    assert json.dumps(a) == json.dumps(b)
    assert result.train_seconds > 0


def test_train_resume_argument_continues_a_checkpoint(task):
    first = Trainer(config(epochs=2), task)
    first.run()
    result = train(config(epochs=4), resume=first.state_dict(), task=task)
    assert result.epochs_run == 4 and [r["epoch"] for r in result.history] == [1, 2, 3, 4]


def test_trainer_checkpoint_of_other_width_loads_with_its_widths(task):
    src = Trainer(config(epochs=4), task)
    src.run()
    dst = Trainer(config(epochs=6), task)
    assert model_widths(dst.model) == [START]
    assert model_widths(src.model) != [START]  # the width moved during training
    dst.load_state_dict(src.state_dict())
    assert model_widths(dst.model) == model_widths(src.model)
    x = task.x[:20]
    assert torch.equal(dst.model(x), src.model(x))
    for p in dst.model.parameters():  # optimiser state follows the widths
        for v in dst.optimizer.state[p].values():
            assert v.dim() == 0 or v.shape == p.shape
    result = dst.run()
    assert result.status == "ok" and result.epochs_run == 6


def _corrupt(state: dict, how: str) -> object:
    s = dict(state)
    if how == "not-a-dict":
        return [1, 2, 3]
    if how == "wrong-format":
        s["format"] = "something-else"
    elif how == "missing-config":
        del s["config"]
    elif how == "missing-model":
        del s["model"]
    elif how == "missing-epoch":
        del s["epoch"]
    elif how == "rho-shape":
        s["model"] = {**s["model"], "rho": torch.zeros(3)}
    elif how == "input-columns":
        s["model"] = {**s["model"], "layers.0.weight": torch.zeros(s["model"]["layers.0.weight"].shape[0], 5)}
    elif how == "width-mismatch":  # the layer's rows disagree with the recorded width
        w = s["model"]["layers.0.weight"]
        s["model"] = {**s["model"], "layers.0.weight": torch.zeros(w.shape[0] + 3, w.shape[1]), "layers.0.bias": torch.zeros(w.shape[0] + 3)}
    elif how == "optimizer-groups":
        s["optimizer"] = {"state": {}, "param_groups": []}
    elif how == "generator":
        s["generator"] = torch.zeros(3, dtype=torch.uint8)
    else:
        raise AssertionError(how)
    return s


@pytest.mark.parametrize(
    "how, message",
    [
        ("not-a-dict", "not an awnn training checkpoint"),
        ("wrong-format", "not an awnn training checkpoint"),
        ("missing-config", "checkpoint"),
        ("missing-model", "checkpoint"),
        ("missing-epoch", "checkpoint"),
        ("rho-shape", "checkpoint does not fit the model"),
        ("input-columns", "checkpoint does not fit the model"),
        ("width-mismatch", "checkpoint does not fit the model"),
        ("optimizer-groups", "checkpoint does not fit the model"),
        ("generator", "checkpoint"),
    ],
)
def test_trainer_corrupt_checkpoint_raises_checkpoint_error(task, how, message):
    src = Trainer(config(epochs=1), task)
    src.run()
    dst = Trainer(config(epochs=2), task)
    with pytest.raises(CheckpointError, match=message) as info:
        dst.load_state_dict(_corrupt(src.state_dict(), how))
    assert "\n" not in str(info.value)


def test_trainer_checkpoint_from_other_config_names_the_keys(task):
    src = Trainer(config(epochs=1, lr=0.02, sigma_theta=3.0), task)
    dst = Trainer(config(epochs=1), task)
    with pytest.raises(CheckpointError, match=r"another configuration \(differs in: lr, sigma_theta\)"):
        dst.load_state_dict(src.state_dict())
    # epochs may differ: that is how a run is extended
    Trainer(config(epochs=9, lr=0.02, sigma_theta=3.0), task).load_state_dict(src.state_dict())


# ------------------------------------------------------------------- the width
def test_trainer_width_cap_stop_reports_status(task):
    with pytest.warns(MaxWidthReached, match="max_width=20"):
        trainer = Trainer(config(max_width=20), task)
    result = trainer.run()
    assert result.status == "width_capped" and result.hit_max_width
    assert result.widths == [20]
    assert result.history[-1]["width_capped"] and result.history[-1]["status"] == "width_capped"
    assert result.best_epoch == 0 and math.isnan(result.history[-1]["best_val_acc"])  # stopped before a scored epoch: no score, not -1


def test_trainer_width_cap_reached_during_training_is_reported(task):
    # starts at START neurons and grows on this task; a cap of 49 is hit mid-run
    result = train(config(epochs=6, max_width=49), task=task)
    assert result.status == "width_capped" and result.hit_max_width
    assert result.epochs_run > 1 and result.widths == [49]
    grown = train(config(epochs=6), task=task)
    assert max(r["width_total"] for r in grown.history) > 49  # (the cap really cut something)


def test_trainer_width_cap_mode_cap_goes_on_and_flags(task):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MaxWidthReached)
        result = train(config(max_width=20, on_max_width="cap"), task=task)
    assert result.status == "ok" and result.hit_max_width and result.epochs_run == 3
    assert all(r["width_capped"] and r["width_total"] == 20 for r in result.history)


def test_trainer_widths_follow_update_interval(task):
    adaptive = train(config(epochs=2), task=task)
    frozen = train(config(epochs=2, width_update_interval=10_000), task=task)
    assert {r["width_total"] for r in frozen.history} == {START}
    assert any(r["width_total"] != START for r in adaptive.history)


def test_evaluate_does_not_change_widths(task):
    trainer = Trainer(config(epochs=2), task)
    trainer.run()
    model = trainer.model
    widths = model_widths(model)
    with torch.no_grad():
        model.widths_ctrl[0].rho.fill_(rho_from_rate(0.005))  # would mean 461 neurons
    params = {k: v.clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}
    model.train()
    for part in ["val", "test"]:
        loss, acc = evaluate(model, task, "outer", part, CPU)
        assert math.isfinite(loss) and 0.0 <= acc <= 1.0
    assert model.training  # mode restored
    assert model_widths(model) == widths
    assert_same_tensors({k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}, params)


def test_trainer_epoch_records_widths_after_validation(task):
    trainer = Trainer(config(epochs=3), task)
    records = []
    trainer.run(on_epoch=lambda r: records.append((r["width_total"], sum(model_widths(trainer.model)))))
    assert all(a == b for a, b in records)


# --------------------------------------------------------------- results, runs
def test_train_result_has_reported_fields(task):
    result = train(config(task="doublemoon", epochs=8), task=tiny_task("doublemoon"))
    s = result.summary()
    for key in ["status", "test_acc", "best_val_acc", "best_epoch", "widths", "train_seconds", "width_total", "hit_max_width"]:
        assert key in s
    assert s["status"] == "ok" and 1 <= s["best_epoch"] <= 8 and len(result.history) == 8
    assert s["best_val_acc"] == max(r["val_acc"] for r in result.history)
    assert 0.8 <= s["best_val_acc"] <= 1.0 and 0.0 <= s["test_acc"] <= 1.0  # doublemoon is easy
    assert s["width_total"] == sum(s["widths"]) and s["train_seconds"] > 0
    record = result.history[0]
    for key in ["epoch", "train_loss", "train_acc", "val_loss", "val_acc", "width_total", "width_l0", "rate_l0", "status", "width_capped"]:
        assert key in record


def test_train_inner_split_reports_no_test_accuracy(task):
    result = train(config(epochs=1, split="inner"), task=task)
    assert math.isnan(result.test_acc) and result.best_epoch == 1


@pytest.mark.parametrize("changes", [{"lr": 1e6}, {"lr": 1e6, "optimizer": "sgd"}, {"lr": 1e20, "model": "fixed"}], ids=["awnn-adam", "awnn-sgd", "fixed"])
def test_trainer_diverging_run_ends_diverged(task, changes):
    result = train(config(epochs=5, **changes), task=task)
    assert result.status == "diverged", (result.status, [r["train_loss"] for r in result.history])
    assert result.epochs_run < 5
    assert result.history[-1]["status"] == "diverged"
    # before any scored epoch the record's best is NaN, as the result's: never the trainer's -1 sentinel (progress lines,
    # ASHA's rungs and the driver's "best val_acc" read it)
    scored = [r["epoch"] for r in result.history if r["status"] == "ok"]  # (an epoch that ends ok is scored)
    for r in result.history:
        if not scored or r["epoch"] < scored[0]:
            assert math.isnan(r["best_val_acc"]), r
        else:
            assert 0.0 <= r["best_val_acc"] <= 1.0, r
    assert math.isnan(result.best_val_acc) == (not scored)


# ------------------------------------------------------------ online compression
def test_trainer_rate_prior_schedule_anneals_std(task):
    trainer = Trainer(config(epochs=10, compress_start_epoch=3, compress_end_epoch=7, compress_rate_mean=0.2, compress_std_start=1.0, compress_std_end=0.2), task)
    assert not trainer.rate_prior(1).informative and not trainer.rate_prior(2).informative
    assert trainer.rate_prior(3) == RatePrior(0.2, 1.0)
    assert trainer.rate_prior(5).std == pytest.approx(0.6)
    assert trainer.rate_prior(7) == RatePrior(0.2, pytest.approx(0.2))
    assert trainer.rate_prior(10).std == pytest.approx(0.2)
    informative = Trainer(config(rate_prior="gaussian", rate_prior_mean=0.1, rate_prior_std=0.5), task)
    assert informative.rate_prior(1) == RatePrior(0.1, 0.5)


def test_trainer_online_compression_changes_loss_from_start_epoch(task):
    changes = {"compress_start_epoch": 3, "compress_end_epoch": 5, "compress_rate_mean": 0.3, "compress_std_start": 0.05, "compress_std_end": 0.01}
    base = Trainer(config(epochs=6), task)
    base.run()
    comp = Trainer(config(epochs=6, **changes), task)
    comp.run()
    # identical until the prior is introduced, different from then on
    assert without_time(comp.history[:2]) == without_time(base.history[:2])
    assert all(c["train_loss"] != b["train_loss"] for c, b in zip(comp.history[2:], base.history[2:]))
    # the prior pulls the rate up towards 0.3: the compressed network ends narrower
    assert comp.history[-1]["rate_l0"] > base.history[-1]["rate_l0"]
    assert comp.history[-1]["width_total"] < base.history[-1]["width_total"]
    # and the loss differs by exactly -log N(rate; mean, std) / N
    x, y = task.tensors("outer", "train", CPU)
    out = comp.model(x[:32])
    blocks = comp.blocks
    prior = comp.rate_prior(4)
    with_prior, _ = elbo_loss(out, y[:32], blocks, comp.n_train, 1.0, prior)
    without, _ = elbo_loss(out, y[:32], blocks, comp.n_train, 1.0, RatePrior())
    rate = blocks[0].rates()[0].detach()
    expected = -gaussian_log_prob_sum((rate - 0.3) ** 2, 1, prior.std) / comp.n_train
    assert float((with_prior - without).detach()) == pytest.approx(float(expected), rel=1e-5)


# ------------------------------------------------------------------- truncation
def test_truncation_curve_sizes_shrink_with_fraction(task):
    trainer = Trainer(config(epochs=3, hidden_layers=2), task)
    trainer.run()
    widths = model_widths(trainer.model)
    curve = truncation_curve(trainer.model, task)
    assert [p["fraction"] for p in curve] == [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    assert curve[0]["widths"] == widths
    sizes = [p["width_total"] for p in curve]
    assert all(b <= a for a, b in zip(sizes, sizes[1:])) and sizes[-1] < sizes[0]
    assert all(all(w >= 1 for w in p["widths"]) for p in curve)
    loss, acc = evaluate(trainer.model, task, "outer", "test", CPU)
    assert curve[0]["acc"] == acc and curve[0]["loss"] == pytest.approx(loss)
    assert all(0.0 <= p["acc"] <= 1.0 for p in curve)
    assert model_widths(trainer.model) == widths  # the model itself is untouched


def test_truncation_curve_counts_parameters_and_times_inference(task):
    trainer = Trainer(config(epochs=2, hidden_layers=2), task)
    trainer.run()
    curve = truncation_curve(trainer.model, task, fractions=[1.0, 0.5], timing_repeats=2)
    full = sum(p.numel() for p in trainer.model.parameters())
    assert curve[0]["params"] == full and curve[1]["params"] < full
    dims = [task.in_features, *curve[1]["widths"], task.num_classes]  # a truncated MLP's weights and biases, plus its rates
    assert curve[1]["params"] == sum(dims[i] * dims[i + 1] + dims[i + 1] for i in range(len(dims) - 1)) + (full - sum(
        d_in * d_out + d_out for d_in, d_out in zip([task.in_features, *curve[0]["widths"]], [*curve[0]["widths"], task.num_classes])))
    assert all(p["infer_us"] > 0 and math.isfinite(p["infer_us"]) for p in curve)


def test_trainer_truncates_the_selected_epochs_model_of_a_retraining_run(task):
    trainer = Trainer(config(epochs=4, hidden_layers=1, split="outer"), task)
    result = trainer.run()
    curve = trainer.truncation()
    assert curve[0]["acc"] == pytest.approx(result.test_acc, abs=1e-12)  # the model the run's test_acc scores
    assert curve[0]["widths"] == result.widths_at_best
    assert Trainer(config(epochs=1, split="inner"), task).truncation() is None  # selection runs: none
    assert Trainer(config(model="fixed", width=8, split="outer"), task).truncation() is None


def test_truncation_curve_rejects_fixed_model(task):
    trainer = Trainer(config(model="fixed", width=8), task)
    with pytest.raises(TypeError, match="AdaptiveMLP"):
        truncation_curve(trainer.model, task)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-step", "general-step"])
def test_a_float64_model_whose_widths_stay_below_16_trains(fast, monkeypatch):
    """The importances' index buffer is made in rho's dtype: it was float32 whatever
    the default dtype, and a float64 model whose widths never passed its first
    capacity (16) failed its first step (addmv of Float and Double)."""
    import dataclasses

    monkeypatch.setattr(Trainer, "fast_step", fast)
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        task = tiny_task()
        task = dataclasses.replace(task, x=task.x.to(torch.float64), _cache={})
        t = Trainer(config(epochs=2, hidden_layers=2, rate=1.0), task)
        assert all(c._arange.dtype == torch.float64 for c in t.model.widths_ctrl)
        t.run()
    finally:
        torch.set_default_dtype(old)
    assert [h["width_total"] <= 2 * 15 for h in t.history] == [True, True]
    assert all(math.isfinite(h["train_loss"]) for h in t.history)
