"""What a copy of a dataset on disk holds, in 16 hex characters.

A comparison's driver reads the data once and keeps its digest
(`Task.data_digest`, the comparison param `data_digest`); each trial, on
whichever node it runs, loads its node's copy and checks the digest against
the driver's (search/trial_common.py `check_data_copy`), and a `--resume`
checks the data against the digest the comparison saved.  So a node with
another copy (another MNIST release, a corrected TU file, a half-synced
CIFAR folder) or data replaced between a run and its resume stops the
comparison in one line instead of mixing two datasets in one answer.

The digest is the SHA-256 of the files the task reads, each with its name
(relative to the dataset's folder) and size, in name order: the same bytes
under another data root give the same digest, so two clusters' comparisons
on one dataset are draws of one comparison (`awnn draws`).  It covers the
files, not the options a config gives the loader (augmentation, tokenizer,
fold), so every trial of a comparison expects the one digest.  Measured on
the 2-core dev VM: 0.11 s for CIFAR-10's 185 MB, of a 1.17 s load.
"""
from __future__ import annotations

import hashlib
import os

from . import DataError

__all__ = ["files_digest", "DIGEST_CHARS"]

DIGEST_CHARS = 16
_CHUNK = 1 << 20


def files_digest(folder: str, names: list[str]) -> str:
    """The digest of `names` (paths relative to `folder`), whatever order they come in.
    A file that cannot be read is a DataError naming it."""
    h = hashlib.sha256()
    for name in sorted(set(names)):
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                h.update(f"{name}\0{size}\0".encode())
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
        except OSError as e:
            raise DataError(f"{path}: could not read it to check this copy of the data ({e.strerror or e})") from None
    return h.hexdigest()[:DIGEST_CHARS]
