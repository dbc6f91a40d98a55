"""Stratified hold-out splits for the paper's protocol.

Outer split (risk assessment): 70% train / 10% validation / 20% test,
stratified by class.  Inner split (model selection): the union of outer
train and validation, split again 90% train / 10% validation.  Splits are
seeded and independent of the training seed, so every configuration of a
grid sees the same data.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Split", "stratified_split", "stratified_holdout", "outer_inner_splits", "official_test_splits", "index_batches"]


@dataclass(frozen=True)
class Split:
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray  # empty for an inner split's holdout


def stratified_split(labels: np.ndarray, fractions: tuple[float, ...], seed: int) -> list[np.ndarray]:
    """Partition indices 0..n-1 into len(fractions) parts, stratified by label.

    Per class, part sizes are floor(fraction * n_class) and the remainder
    goes to the parts in order of their largest fractional parts, so the
    totals match round(fraction * n) to within the number of classes.
    """
    if abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must sum to 1, but got {fractions=}.")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in fractions]
    for cls in np.unique(labels):
        idx = np.flatnonzero(labels == cls)
        rng.shuffle(idx)
        exact = np.array(fractions) * len(idx)
        sizes = np.floor(exact).astype(int)
        for k in np.argsort(-(exact - sizes), kind="stable")[: len(idx) - sizes.sum()]:
            sizes[k] += 1
        start = 0
        for p, size in zip(parts, sizes):
            p.append(idx[start : start + size])
            start += size
    out = []
    for p in parts:
        merged = np.concatenate(p) if p else np.array([], dtype=int)
        rng.shuffle(merged)
        out.append(merged)
    return out


def stratified_holdout(labels: np.ndarray, n_holdout: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held out) positions of `labels`, exactly `n_holdout` held out,
    stratified: each class gives its share, remainders by largest fraction."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(labels, return_counts=True)
    quota = n_holdout * counts / counts.sum()
    take = np.floor(quota).astype(int)
    for k in np.argsort(-(quota - take), kind="stable")[: n_holdout - int(take.sum())]:
        take[k] += 1
    keep, hold = [], []
    for cls, n in zip(classes, take):
        idx = np.flatnonzero(labels == cls)
        rng.shuffle(idx)
        hold.append(idx[:n])
        keep.append(idx[n:])
    keep, hold = np.concatenate(keep), np.concatenate(hold)
    rng.shuffle(keep)
    rng.shuffle(hold)
    return keep, hold


def outer_inner_splits(labels: np.ndarray, seed: int = 0, outer: tuple[float, float, float] = (0.7, 0.1, 0.2)) -> tuple[Split, Split]:
    """(outer 70/10/20 (or `outer`), inner 90/10 of outer train+val), both stratified."""
    labels = np.asarray(labels)
    tr, va, te = stratified_split(labels, outer, seed)
    pool = np.concatenate([tr, va])
    itr, iva = stratified_split(labels[pool], (0.9, 0.1), seed + 1)
    return Split(tr, va, te), Split(pool[itr], pool[iva], np.array([], dtype=int))


def official_test_splits(train_labels: np.ndarray, n_test: int, val_fraction: float, seed: int) -> tuple[Split, Split]:
    """Outer (train/val of the official training set, official test) and inner
    (90/10 of the official training set) splits over the concatenation
    [official train, official test]: for a dataset that ships its test set
    (MNIST, CIFAR, a table's train.csv/test.csv pair)."""
    n = len(train_labels)
    tr, va = stratified_holdout(train_labels, round(val_fraction * n), seed)
    itr, iva = stratified_holdout(train_labels, round(0.1 * n), seed + 1)
    test = np.arange(n, n + n_test)
    return Split(tr, va, test), Split(itr, iva, np.array([], dtype=int))


def index_batches(idx, batch_size: int, generator, eval_batch: int):
    """The batches of indices of one pass over `idx` (a numpy array or a
    tensor): training (a generator given) in a fresh random order drawn from
    the generator, `batch_size` at a time; evaluation in order, at most
    `eval_batch` at a time (activation memory)."""
    import torch

    if generator is not None:
        perm = torch.randperm(len(idx), generator=generator)
        idx = idx[perm.numpy() if isinstance(idx, np.ndarray) else perm]
    else:
        batch_size = min(batch_size, eval_batch)
    for s in range(0, len(idx), batch_size):
        yield idx[s : s + batch_size]
