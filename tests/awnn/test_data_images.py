"""Image tasks: real on-disk formats (MNIST IDX, CIFAR python batches),
Table 2 splits, normalisation, training-only augmentation, clear errors."""
import os

import pytest
import torch

from awnn.config import TrainConfig
from awnn.data import DataError, Split, load_task
from awnn.train import train
from data_helpers import make_cifar, make_mnist

pytest.importorskip("torchvision", reason="the image tasks read MNIST through torchvision")


def unnormalise(task, x):
    return x * task.std + task.mean


def test_mnist_reads_idx_files_with_table2_splits(tmp_path):
    data = make_mnist(tmp_path)
    task = load_task("mnist", str(tmp_path))
    assert (task.kind, task.in_channels, task.image_size, task.num_classes) == ("image", 1, (28, 28), 10)
    # Table 2: outer 53000/7000/10000 and inner 54000/6000 of 60000; here scaled to 120 + 30
    assert [len(task.outer.train), len(task.outer.val), len(task.outer.test)] == [106, 14, 30]
    assert [len(task.inner.train), len(task.inner.val)] == [108, 12]
    assert not set(task.outer.train) & set(task.outer.val)
    # the outer test part is the official test set, in order
    x, y = next(task.batches("outer", "test", 64, torch.device("cpu")))
    assert torch.allclose(unnormalise(task, x)[:, 0], torch.as_tensor(data["t10k"][0], dtype=torch.float32), atol=1e-3)
    assert torch.equal(y, torch.as_tensor(data["t10k"][1]))


@pytest.mark.parametrize("hundred", [False, True])
def test_cifar_reads_python_batches_with_table2_splits(tmp_path, hundred):
    files = make_cifar(tmp_path, hundred=hundred)
    task = load_task("cifar100" if hundred else "cifar10", str(tmp_path))
    assert (task.in_channels, task.image_size, task.num_classes) == (3, (32, 32), 100 if hundred else 10)
    # Table 2: outer 44000/6000/10000, inner 45000/5000 of 50000; here of 100 + 20
    assert [len(task.outer.train), len(task.outer.val), len(task.outer.test)] == [88, 12, 20]
    assert [len(task.inner.train), len(task.inner.val)] == [90, 10]
    x, y = next(task.batches("outer", "test", 64, torch.device("cpu")))
    test = files["test" if hundred else "test_batch"]
    assert torch.allclose(unnormalise(task, x), torch.as_tensor(test["data"].reshape(-1, 3, 32, 32), dtype=torch.float32), atol=1e-3)
    pool = torch.cat([b for b, _ in task.batches("outer", "train", 512, torch.device("cpu"))] + [b for b, _ in task.batches("outer", "val", 512, torch.device("cpu"))])
    assert pool.mean(dim=(0, 2, 3)).abs().max() < 1e-4  # normalised by the training pool's channel statistics
    assert (pool.std(dim=(0, 2, 3)) - 1).abs().max() < 1e-2


@pytest.mark.parametrize(
    "task, layout",
    [
        ("mnist", os.path.join("MNIST", "raw")),
        ("cifar10", "cifar-10-batches-py"),
        ("cifar100", "cifar-100-python"),
    ],
)
def test_image_task_missing_files_is_one_clear_line(tmp_path, task, layout):
    with pytest.raises(DataError) as e:
        load_task(task, str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and os.path.join(str(tmp_path), layout) in msg
    first = {"mnist": "train-images-idx3-ubyte", "cifar10": "data_batch_1", "cifar100": "train"}[task]
    assert first in msg and "missing" in msg


def test_cifar_partial_folder_names_the_missing_batch(tmp_path):
    make_cifar(tmp_path)
    os.remove(tmp_path / "cifar-10-batches-py" / "data_batch_3")
    with pytest.raises(DataError, match=r"missing: data_batch_3\)"):
        load_task("cifar10", str(tmp_path))


def test_augmentation_only_on_training_batches_and_is_a_crop_or_flip(tmp_path):
    make_cifar(tmp_path)
    cfg = TrainConfig.from_dict({"task": "cifar10", "augment": "crop_flip", "data_root": str(tmp_path)})
    task = load_task("cifar10", str(tmp_path), config=cfg)
    plain = load_task("cifar10", str(tmp_path))
    cpu = torch.device("cpu")
    for part in ("val", "test"):  # evaluation: never augmented
        a = torch.cat([x for x, _ in task.batches("outer", part, 7, cpu)])
        b = torch.cat([x for x, _ in plain.batches("outer", part, 7, cpu)])
        assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    (xa, ya), (xp, yp) = next(task.batches("outer", "train", 16, cpu, g1)), next(plain.batches("outer", "train", 16, cpu, g2))
    assert torch.equal(ya, yp) and not torch.equal(xa, xp)  # same order, images changed
    # every augmented image is its original shifted by at most 4 pixels (zero padding), maybe flipped
    zero = -task.mean / task.std  # a padded pixel after normalisation
    for a, p in zip(xa, xp):
        padded = torch.nn.functional.pad(p[None] * task.std + task.mean, (4, 4, 4, 4))[0]
        padded = (padded - task.mean[0]) / task.std[0]
        found = any(
            torch.allclose(a, cand, atol=1e-4)
            for dy in range(9)
            for dx in range(9)
            for cand in (padded[:, dy : dy + 32, dx : dx + 32], padded[:, dy : dy + 32, dx : dx + 32].flip(2))
        )
        assert found
    assert zero.shape == (1, 3, 1, 1)


def test_digits_is_real_data_without_files(tmp_path):
    task = load_task("digits", str(tmp_path / "nothing-here"))
    assert (task.in_channels, task.image_size, task.num_classes) == (1, (8, 8), 10)
    n = len(task.outer.train) + len(task.outer.val) + len(task.outer.test)
    assert n == 1797 and abs(len(task.outer.test) - 0.2 * 1797) <= 10  # 70/10/20, stratified per class


@pytest.mark.parametrize("model, kw, names", [("fixed", {"width": 0}, []), ("awnn", {"rate": 0.05}, ["width_head"])])
def test_trainer_on_digits_records_head_width(model, kw, names):
    cfg = TrainConfig.from_dict({"task": "digits", "model": model, "epochs": 1, "optimizer": "sgd", "lr": 0.05, "weight_decay": 1e-4, "activation": "leaky_relu", "device": "cpu", **kw})
    task = load_task("digits")
    task.outer = Split(task.outer.train[:256], task.outer.val[:64], task.outer.test[:64])  # keep it quick
    result = train(cfg, task=task)
    record = result.history[-1]
    assert result.status == "ok" and 0.0 <= result.test_acc <= 1.0
    assert sorted(k for k in record if k.startswith("width_") and k not in ("width_total", "width_capped")) == names
    assert record["width_total"] == sum(result.widths)
