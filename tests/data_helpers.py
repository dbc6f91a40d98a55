"""Small datasets written in the real on-disk formats, for the data tests
(tests/awnn/test_data_*.py) and the end-to-end runs on real formats
(tests/system/test_real_data.py): TU raw text files (graphs), IDX files
(MNIST), CIFAR python batches, Multi30k parallel text files and GPT-2
tokenizer files."""
from __future__ import annotations

import json
import os
import pickle
import random
import struct

import numpy as np

WORDS = "a man dog runs the in park woman red blue sits plays ball".split()


def write_tu(root, name, n_graphs=60, node_labels=True, seed=0, nodes=(5, 11)):
    """A TU dataset whose label depends on structure only: cycles (label 1)
    versus paths (label -1, as in TU files) of 5..10 nodes; node labels,
    when written, are random noise."""
    rng = np.random.default_rng(seed)
    raw = os.path.join(root, name, "raw")
    os.makedirs(raw, exist_ok=True)
    edges, indicator, graph_labels, labels = [], [], [], []
    offset = 0
    for g in range(n_graphs):
        cycle = g % 2 == 0
        n = int(rng.integers(*nodes))
        pairs = [(i, i + 1) for i in range(n - 1)] + ([(n - 1, 0)] if cycle else [])
        for a, b in pairs:  # 1-based node ids, both directions
            edges += [(offset + a + 1, offset + b + 1), (offset + b + 1, offset + a + 1)]
        indicator += [g + 1] * n
        labels += list(rng.integers(0, 3, n))
        graph_labels.append(1 if cycle else -1)
        offset += n

    _put_tu(raw, name, edges, indicator, graph_labels, labels if node_labels else None)


def write_idx(path, array):
    """An IDX file (the MNIST format): magic, big-endian dims, unsigned bytes."""
    array = np.asarray(array, dtype=np.uint8)
    with open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 0x08, array.ndim))
        f.write(struct.pack(f">{array.ndim}I", *array.shape))
        f.write(array.tobytes())


def make_mnist(root, n_train=120, n_test=30, seed=0):
    rng = np.random.default_rng(seed)
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw)
    data = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, (n, 28, 28))
        labels = np.arange(n) % 10
        write_idx(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), images)
        write_idx(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), labels)
        data[prefix] = (images, labels)
    return data


def make_cifar(root, hundred=False, per_batch=20, n_test=20, seed=0):
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, "cifar-100-python" if hundred else "cifar-10-batches-py")
    os.makedirs(folder)
    key, classes = ("fine_labels", 100) if hundred else ("labels", 10)
    files = (["train"] if hundred else [f"data_batch_{i}" for i in range(1, 6)]) + (["test"] if hundred else ["test_batch"])
    sizes = ([5 * per_batch] if hundred else [per_batch] * 5) + [n_test]
    out = {}
    for name, n in zip(files, sizes):
        entry = {"data": rng.integers(0, 256, (n, 3072)).astype(np.uint8), key: list(rng.integers(0, classes, n))}
        with open(os.path.join(folder, name), "wb") as f:
            pickle.dump(entry, f)
        out[name] = entry
    return out


def write_multi30k(root, sizes=(("train", 200), ("val", 24), ("test", 24)), test_stem="test", seed=0):
    """A toy translation task: German is each English word upper-cased + 'x'."""
    rng = random.Random(seed)
    folder = os.path.join(root, "multi30k")
    os.makedirs(folder, exist_ok=True)
    for split, n in sizes:
        en = [[rng.choice(WORDS) for _ in range(rng.randint(3, 8))] for _ in range(n)]
        stem = test_stem if split == "test" else split
        with open(os.path.join(folder, f"{stem}.en"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(s) + " .\n" for s in en)
        with open(os.path.join(folder, f"{stem}.de"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(w.upper() + "x" for w in s) + " .\n" for s in en)
    return folder


def write_gpt2(folder):
    """GPT-2's file formats with a tiny vocabulary: 256 byte symbols and 5 merges."""
    from awnn.data.text import _bytes_to_unicode

    os.makedirs(folder, exist_ok=True)
    symbols = list(_bytes_to_unicode().values())
    merges = [("Ġ", "c"), ("a", "t"), ("Ġc", "at"), ("t", "h"), ("th", "e")]
    vocab = {s: i for i, s in enumerate(symbols + ["".join(m) for m in merges] + ["<|endoftext|>"])}
    with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f)
    with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    return vocab


def write_social(root, name="REDDIT-BINARY", n_graphs=200, seed=0, max_nodes=1500, noise=0.2):
    """A social-graph set in TU format without node features, as REDDIT-BINARY:
    question/answer threads (a hub replying to most users, label 1) against
    discussions (chains of replies with branches, label -1), 30..max_nodes
    nodes on a log scale, a share `noise` of the labels flipped."""
    rng = np.random.default_rng(seed)
    raw = os.path.join(root, name, "raw")
    os.makedirs(raw, exist_ok=True)
    edges, indicator, labels = [], [], []
    offset = 0
    for g in range(n_graphs):
        qa = g % 2 == 0
        n = int(np.exp(rng.uniform(np.log(30), np.log(max_nodes))))
        for v in range(1, n):
            if qa:
                p = 0 if rng.random() < 0.8 else int(rng.integers(0, v))
            else:
                p = v - 1 if rng.random() < 0.7 else int(rng.integers(max(0, v - 5), v))
            edges += [(offset + v + 1, offset + p + 1), (offset + p + 1, offset + v + 1)]
        indicator += [g + 1] * n
        labels.append((1 if qa else -1) * (-1 if rng.random() < noise else 1))
        offset += n

    _put_tu(raw, name, edges, indicator, labels)


def _put_tu(raw, name, edges, indicator, graph_labels, node_labels=None):
    """The TU raw text files: `<name>_A.txt` (1-based edge pairs), graph indicator, graph labels[, node labels]."""
    parts = {"A": [f"{a}, {b}" for a, b in edges], "graph_indicator": indicator, "graph_labels": graph_labels}
    if node_labels is not None:
        parts["node_labels"] = node_labels
    for part, lines in parts.items():
        with open(os.path.join(raw, f"{name}_{part}.txt"), "w") as f:
            f.writelines(f"{line}\n" for line in lines)


def cut_file(path, size):
    """Truncate the file at `path` to its first `size` bytes (a download cut short)."""
    with open(path, "r+b") as f:
        f.truncate(size)


def mid_line_offset(path, line):
    """A byte offset inside 1-based `line` of a text file (after its first character, before its newline)."""
    with open(path, "rb") as f:
        raw = f.read()
    start = 0
    for _ in range(line - 1):
        start = raw.index(b"\n", start) + 1
    end = raw.index(b"\n", start)
    assert end - start >= 2, "the line is too short to cut inside"
    return start + (end - start) // 2


def keep_lines(path, n):
    """Keep the first `n` lines of a text file (each with its newline)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")[:n]
    with open(path, "wb") as f:
        f.write(b"".join(line + b"\n" for line in lines))


def set_line(path, line, text):
    """Replace 1-based `line` of a text file by `text`."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    lines[line - 1] = text
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
