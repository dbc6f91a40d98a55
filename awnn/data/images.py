"""Image classification tasks: MNIST, CIFAR-10, CIFAR-100 and sklearn's digits.

Files are read from `data_root` and never downloaded; the layout is the one
torchvision's own downloads leave behind:

    <data_root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte
    <data_root>/cifar-10-batches-py/{data_batch_1..5,test_batch}
    <data_root>/cifar-100-python/{train,test}

Every file is checked first (`checks.check_mnist`, `checks.cifar_batch`).
MNIST is read by `torchvision.datasets.MNIST(download=False)`.  The CIFAR
python batches are read with `pickle` exactly as torchvision does, without
its md5 check (so a subset or a regenerated batch can be used in tests).
`digits` is scikit-learn's bundled 8x8 digits (1797 real images, no file
needed): the image path can run anywhere.

Splits (paper Table 2): the official test set is the outer test part; the
official training set is split, stratified, into outer train/validation
(MNIST 53000/7000, CIFAR 44000/6000) and, for model selection, into inner
train/validation 90/10 (54000/6000, 45000/5000).  `digits` has no official
test set and uses the project's 70/10/20 outer and 90/10 inner splits.

All images of a task live in one tensor on the training device; batches are
normalised (per-channel mean/std of the training pool) and, for training
batches only, augmented there: random crop with zero padding (4 pixels; 1
for images under 16 pixels) and/or horizontal flip (`augment`).
"""
from __future__ import annotations

import os
import pickle
from typing import Iterator

import numpy as np
import torch

from . import DataError, Task
from .digest import files_digest
from .splits import Split, index_batches, official_test_splits, outer_inner_splits, stratified_holdout

__all__ = ["ImageTask", "load_digits", "load_mnist", "load_cifar10", "load_cifar100", "stratified_holdout"]

EVAL_BATCH = 1024  # evaluation never uses larger batches (activation memory)


def channel_stats(x: torch.Tensor, rows: np.ndarray, chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std of x[rows], as (1, C, 1, 1), in float64 chunks."""
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    total_sq = torch.zeros_like(total)
    rows = torch.as_tensor(rows, dtype=torch.long)
    for s in range(0, len(rows), chunk):
        xc = x[rows[s : s + chunk]].double()
        total += xc.sum(dim=(0, 2, 3))
        total_sq += xc.pow(2).sum(dim=(0, 2, 3))
    n = max(len(rows) * x.shape[2] * x.shape[3], 1)
    mean = total / n
    std = (total_sq / n - mean.pow(2)).clamp_min(0).sqrt().clamp_min(1e-6)
    return mean.float().view(1, -1, 1, 1), std.float().view(1, -1, 1, 1)


class ImageTask(Task):
    """Images (N, C, H, W) in memory; `outer`/`inner` index into them."""

    kind = "image"

    def __init__(self, name: str, x: torch.Tensor, y: torch.Tensor, outer: Split, inner: Split, num_classes: int, augment: str = "none"):
        if x.dim() != 4:
            raise ValueError(f"images must be (N, C, H, W), but got shape {tuple(x.shape)}.")
        self.name = name
        self.x, self.y = x, y.long()
        self.outer, self.inner = outer, inner
        self.num_classes = int(num_classes)
        self.augment = augment
        self.in_channels = int(x.shape[1])
        self.image_size = (int(x.shape[2]), int(x.shape[3]))
        self.in_features = self.in_channels * self.image_size[0] * self.image_size[1]
        self.padding = 4 if min(self.image_size) >= 16 else 1
        self.mean, self.std = channel_stats(x, np.concatenate([outer.train, outer.val]))
        self._device_cache: dict = {}

    def indices(self, split: str, part: str) -> np.ndarray:
        return getattr({"inner": self.inner, "outer": self.outer}[split], part)

    def n_train(self, split: str) -> int:
        return len(self.indices(split, "train"))

    def label_array(self) -> np.ndarray:
        return self.y.numpy()

    def _on(self, device: torch.device):
        key = str(device)
        if key not in self._device_cache:
            self._device_cache = {key: (self.x.to(device), self.y.to(device), self.mean.to(device), self.std.to(device))}
        return self._device_cache[key]

    def batches(self, split: str, part: str, batch_size: int, device: torch.device, generator: torch.Generator | None = None) -> Iterator:
        x_all, y_all, mean, std = self._on(device)
        train = generator is not None
        for b in index_batches(torch.as_tensor(self.indices(split, part), dtype=torch.long), batch_size, generator, EVAL_BATCH):
            xb = x_all[b.to(device)].float()  # (B, C, H, W), raw pixel scale
            if train and self.augment != "none":
                xb = self._augment(xb, generator)
            yield (xb - mean) / std, y_all[b.to(device)]

    def _augment(self, xb: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Random crop after zero padding, then (crop_flip) a random horizontal flip."""
        n, _, h, w = xb.shape
        p = self.padding
        padded = torch.nn.functional.pad(xb, (p, p, p, p))  # (B, C, H+2p, W+2p)
        dy = torch.randint(0, 2 * p + 1, (n,), generator=generator).to(xb.device)
        dx = torch.randint(0, 2 * p + 1, (n,), generator=generator).to(xb.device)
        rows = (dy[:, None] + torch.arange(h, device=xb.device))[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(w, device=xb.device))[:, None, None, :]  # (B, 1, 1, W)
        batch = torch.arange(n, device=xb.device)[:, None, None, None]
        chan = torch.arange(xb.shape[1], device=xb.device)[None, :, None, None]
        xb = padded[batch, chan, rows, cols]  # (B, C, H, W)
        if self.augment == "crop_flip":
            flip = (torch.rand(n, generator=generator) < 0.5).to(xb.device)
            xb = torch.where(flip[:, None, None, None], xb.flip(3), xb)
        return xb


# ------------------------------------------------------------------ loaders
def _require(folder: str, files: list[str], what: str, hint: str, layout: str) -> None:
    from .checks import missing_files_error

    error = missing_files_error(what, folder, files, layout, hint)
    if error:
        raise error


def load_digits(data_root: str | None = None, data_seed: int = 0, augment: str = "none") -> ImageTask:
    """scikit-learn's 8x8 digits as 1-channel images (pixel values 0..16)."""
    try:
        from sklearn.datasets import load_digits as sk_digits
    except ImportError:
        raise DataError("task 'digits' needs scikit-learn (pip install 'awnn-search[vision]')") from None
    d = sk_digits()
    x = torch.as_tensor(d.images, dtype=torch.float32).unsqueeze(1)  # (1797, 1, 8, 8)
    y = torch.as_tensor(d.target, dtype=torch.long)
    outer, inner = outer_inner_splits(d.target, seed=data_seed)
    return ImageTask("digits", x, y, outer, inner, num_classes=10, augment=augment)


MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def load_mnist(data_root: str | None = None, data_seed: int = 0, augment: str = "none") -> ImageTask:
    root = data_root or "data"
    folder = os.path.join(root, "MNIST", "raw")
    _require(folder, MNIST_FILES, "MNIST", "the uncompressed IDX files that torchvision.datasets.MNIST(root, download=True) leaves there", os.path.join("MNIST", "raw"))
    from .checks import check_mnist

    check_mnist(folder)  # magic numbers, sizes against headers, labels against images: DataError naming the file
    from torchvision.datasets import MNIST

    train = MNIST(root, train=True, download=False)
    test = MNIST(root, train=False, download=False)
    x = torch.cat([train.data, test.data]).unsqueeze(1)  # (N, 1, 28, 28) uint8
    y = torch.cat([train.targets, test.targets])
    outer, inner = official_test_splits(train.targets.numpy(), len(test.targets), 7000 / 60000, data_seed)
    task = ImageTask("mnist", x, y, outer, inner, num_classes=10, augment=augment)
    task.data_digest = files_digest(folder, MNIST_FILES)
    return task


def _read_cifar_batches(folder: str, files: list[str], label_key: str, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    from .checks import cifar_batch

    xs, ys = [], []
    for f in files:
        path = os.path.join(folder, f)
        try:
            with open(path, "rb") as fh:
                entry = pickle.load(fh, encoding="latin1")
        except Exception as e:  # a cut or foreign pickle fails in many ways (EOFError, UnpicklingError, ...)
            raise DataError(f"{path}: not a complete CIFAR python batch ({type(e).__name__}: {e}); is the file cut?") from None
        x, y = cifar_batch(path, entry, label_key, num_classes)  # keys, shape, one label in range per image
        xs.append(x)
        ys.append(y)
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def _load_cifar(name: str, folder_name: str, train_files: list[str], test_files: list[str], label_key: str, num_classes: int, data_root, data_seed, augment) -> ImageTask:
    folder = os.path.join(data_root or "data", folder_name)
    _require(folder, train_files + test_files, name.upper().replace("CIFAR", "CIFAR-"), "the python version of the dataset that torchvision.datasets.CIFAR*(root, download=True) leaves there", folder_name)
    xtr, ytr = _read_cifar_batches(folder, train_files, label_key, num_classes)
    xte, yte = _read_cifar_batches(folder, test_files, label_key, num_classes)
    outer, inner = official_test_splits(ytr.numpy(), len(yte), 6000 / 50000, data_seed)
    task = ImageTask(name, torch.cat([xtr, xte]), torch.cat([ytr, yte]), outer, inner, num_classes=num_classes, augment=augment)
    task.data_digest = files_digest(folder, train_files + test_files)
    return task


def load_cifar10(data_root: str | None = None, data_seed: int = 0, augment: str = "none") -> ImageTask:
    files = [f"data_batch_{i}" for i in range(1, 6)]
    return _load_cifar("cifar10", "cifar-10-batches-py", files, ["test_batch"], "labels", 10, data_root, data_seed, augment)


def load_cifar100(data_root: str | None = None, data_seed: int = 0, augment: str = "none") -> ImageTask:
    return _load_cifar("cifar100", "cifar-100-python", ["train"], ["test"], "fine_labels", 100, data_root, data_seed, augment)

