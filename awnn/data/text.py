"""Text translation task: Multi30k English -> German.

Read from plain parallel text files (one sentence per line, utf-8):

    <data_root>/multi30k/train.en  train.de     29000 pairs
    <data_root>/multi30k/val.en    val.de        1014 pairs
    <data_root>/multi30k/test.en   test.de       1000 pairs
        (test_2016_flickr.{en,de} and test2016.{en,de} are accepted too)

Each pair of files is checked first (`checks.check_text_pair`: not empty,
utf-8, complete last lines, as many lines in both).

Splits (paper Table 2): outer = the official train / val / test files,
inner = the official train / val files.

Tokenizer.  The paper uses the pretrained GPT-2 tokenizer (50257 byte-level
BPE tokens), which cannot be downloaded here.  `tokenizer=gpt2` (and
`auto` when the files exist) loads it from GPT-2's own files,
`<data_root>/multi30k/gpt2/{vocab.json,merges.txt}` (or `<data_root>/gpt2/`),
and applies the byte-level BPE in pure Python (pre-tokenisation uses
Python's `re`, which approximates GPT-2's `\\p{L}`/`\\p{N}` classes with
`[^\\W\\d_]`/`\\d`).  Otherwise (`word`, or `auto` without those files) a
word-level vocabulary is built offline from the training text of both
languages: words and punctuation marks (`\\w+|[^\\w\\s]`), case kept,
words seen fewer than `WORD_MIN_FREQ` times map to `<unk>`.  On Multi30k
that vocabulary is far smaller than GPT-2's, so losses are not comparable
with the paper's numbers (docs/domains.md).

Sequences are `<bos> tokens <eos>`, at most `max_len` tokens (longer
sentences are cut).  Inputs are (source, decoder input = target[:-1]) and
targets are target[1:], padded per batch; padding targets are -100 and not
scored.  `n_train` counts the scored target tokens of the training part:
the trainer's loss is a mean over tokens, so the ELBO's N is the number of
tokens (the likelihood is over every target token).
"""
from __future__ import annotations

import collections
import json
import os
import re
from functools import lru_cache
from typing import Iterable, Iterator

import numpy as np
import torch

from . import DataError, Task
from .checks import check_text_pair, missing_files_error
from .digest import files_digest
from .splits import Split, index_batches

__all__ = ["WordTokenizer", "GPT2Tokenizer", "TextTask", "load_multi30k", "WORD_MIN_FREQ"]

IGNORE_INDEX = -100
WORD_MIN_FREQ = 2
EVAL_BATCH = 256  # sentence pairs per evaluation batch (logits are B x T x vocab)
SPLIT_FILES = {"train": ["train"], "val": ["val"], "test": ["test", "test_2016_flickr", "test2016"]}
LANGS = ("en", "de")


class WordTokenizer:
    """Word-level vocabulary built from training text (offline)."""

    name = "word"
    SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
    _SPLIT = re.compile(r"\w+|[^\w\s]")

    def __init__(self, itos: list[str]):
        self.itos = list(itos)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        self.pad_id, self.unk_id, self.bos_id, self.eos_id = (self.stoi[s] for s in self.SPECIALS)

    @classmethod
    def build(cls, texts: Iterable[str], min_freq: int = WORD_MIN_FREQ) -> "WordTokenizer":
        counts = collections.Counter(t for line in texts for t in cls._SPLIT.findall(line))
        words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
        return cls(list(cls.SPECIALS) + words)

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, text: str) -> list[int]:
        unk = self.unk_id
        return [self.stoi.get(t, unk) for t in self._SPLIT.findall(text)]


@lru_cache(maxsize=1)
def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable unicode characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class GPT2Tokenizer:
    """GPT-2's byte-level BPE from its `vocab.json` and `merges.txt`.

    `<|endoftext|>` serves as both <bos> and <eos> (as in GPT-2); a
    `<pad>` token is appended after the pretrained vocabulary."""

    name = "gpt2"
    _PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]]):
        self.encoder = dict(vocab)
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.byte_encoder = _bytes_to_unicode()
        eot = self.encoder.get("<|endoftext|>")
        if eot is None:
            raise DataError("GPT-2 vocab.json has no '<|endoftext|>' token")
        self.bos_id = self.eos_id = eot
        self.pad_id = max(self.encoder.values()) + 1
        self.unk_id = eot
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_files(cls, folder: str) -> "GPT2Tokenizer":
        try:
            with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
                vocab = json.load(f)
            with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
                lines = [l.rstrip("\n") for l in f]
        except (OSError, ValueError) as e:
            raise DataError(f"{folder}: cannot read GPT-2 tokenizer files vocab.json/merges.txt ({e})") from None
        merges = [tuple(l.split(" ")) for l in lines if l and not l.startswith("#version")]
        if any(len(m) != 2 for m in merges):
            raise DataError(f"{folder}/merges.txt: every line must hold two symbols separated by one space")
        return cls(vocab, merges)

    def __len__(self) -> int:
        return self.pad_id + 1

    def _bpe(self, word: str) -> list[int]:
        if word in self._cache:
            return self._cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get(p, float("inf")), i) for i, p in enumerate(zip(parts, parts[1:]))]
            rank, _ = min(pairs)
            if rank == float("inf"):
                break
            first, second = next(p for p in zip(parts, parts[1:]) if self.ranks.get(p) == rank)
            merged, i = [], 0
            while i < len(parts):
                if i < len(parts) - 1 and parts[i] == first and parts[i + 1] == second:
                    merged.append(first + second)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        ids = [self.encoder.get(p, self.unk_id) for p in parts]
        self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self._PAT.findall(text):
            out.extend(self._bpe("".join(self.byte_encoder[b] for b in piece.encode("utf-8"))))
        return out


def _find(folder: str, split: str, lang: str) -> str | None:
    """The first of the split's file names present in `folder` (a file, or
    anything else by that name: load_multi30k says what is wrong with it)."""
    for stem in SPLIT_FILES[split]:
        path = os.path.join(folder, f"{stem}.{lang}")
        if os.path.lexists(path):
            return path
    return None


def gpt2_folder(data_root: str) -> str | None:
    for folder in (os.path.join(data_root, "multi30k", "gpt2"), os.path.join(data_root, "gpt2")):
        if all(os.path.isfile(os.path.join(folder, f)) for f in ("vocab.json", "merges.txt")):
            return folder
    return None


class TextTask(Task):
    """Parallel sentences as padded id tensors; see the module docstring."""

    kind = "text"

    def __init__(self, name: str, src: list[list[int]], tgt: list[list[int]], parts: dict[str, np.ndarray], tokenizer):
        self.name = name
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_id
        self.num_classes = self.in_features = len(tokenizer)  # vocabulary size
        self.src_len = np.array([len(s) for s in src])
        self.tgt_len = np.array([len(t) for t in tgt])
        self.max_len = int(max(self.src_len.max(), self.tgt_len.max()))
        self.src = _pad(src, self.pad_id)  # (N, S) all pairs of every part
        self.tgt = _pad(tgt, self.pad_id)  # (N, T)
        self.outer = Split(parts["train"], parts["val"], parts["test"])
        self.inner = Split(parts["train"], parts["val"], np.array([], dtype=int))
        self._device_cache: dict = {}

    def indices(self, split: str, part: str) -> np.ndarray:
        return getattr({"inner": self.inner, "outer": self.outer}[split], part)

    def n_train(self, split: str) -> int:
        """Scored target tokens of the training part (the ELBO's N)."""
        return int((self.tgt_len[self.indices(split, "train")] - 1).sum())

    def _on(self, device: torch.device):
        key = str(device)
        if key not in self._device_cache:
            self._device_cache = {key: (self.src.to(device), self.tgt.to(device))}
        return self._device_cache[key]

    def batches(self, split: str, part: str, batch_size: int, device: torch.device, generator: torch.Generator | None = None) -> Iterator:
        src_all, tgt_all = self._on(device)
        for b in index_batches(self.indices(split, part), batch_size, generator, EVAL_BATCH):
            sl, tl = int(self.src_len[b].max()), int(self.tgt_len[b].max())
            bt = torch.as_tensor(b, dtype=torch.long).to(device)
            src = src_all[bt, :sl]  # (B, S)
            tgt = tgt_all[bt, :tl]  # (B, T+1)
            y = tgt[:, 1:].masked_fill(tgt[:, 1:] == self.pad_id, IGNORE_INDEX)  # (B, T)
            yield (src, tgt[:, :-1]), y


def _pad(seqs: list[list[int]], pad_id: int) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def load_multi30k(data_root: str | None = None, data_seed: int = 0, tokenizer: str = "auto", max_len: int = 128) -> TextTask:
    """Multi30k en -> de from `<data_root>/multi30k/`; see the module docstring."""
    root = data_root or "data"
    folder = os.path.join(root, "multi30k")
    paths = {(split, lang): _find(folder, split, lang) for split in SPLIT_FILES for lang in LANGS}
    names = [os.path.basename(p) if p else f"{SPLIT_FILES[s][0]}.{l}" for (s, l), p in paths.items()]
    error = missing_files_error("Multi30k", folder, names, "multi30k", kind="the parallel text files")
    if error:
        raise error
    text = {}
    for split in SPLIT_FILES:  # not empty, utf-8, complete last lines, as many lines in both: DataError naming the file
        text[split, "en"], text[split, "de"] = check_text_pair(paths[split, "en"], paths[split, "de"])
    g2 = gpt2_folder(root)
    if tokenizer == "gpt2" and g2 is None:
        raise DataError(f"tokenizer=gpt2: expected GPT-2's vocab.json and merges.txt in {os.path.join(folder, 'gpt2')} or {os.path.join(root, 'gpt2')}")
    if tokenizer == "gpt2" or (tokenizer == "auto" and g2 is not None):
        tok = GPT2Tokenizer.from_files(g2)
    else:
        tok = WordTokenizer.build(text["train", "en"] + text["train", "de"])
    keep = max_len - 2
    src, tgt, parts, start = [], [], {}, 0
    for split in SPLIT_FILES:
        for en, de in zip(text[split, "en"], text[split, "de"]):
            src.append([tok.bos_id] + tok.encode(en)[:keep] + [tok.eos_id])
            tgt.append([tok.bos_id] + tok.encode(de)[:keep] + [tok.eos_id])
        parts[split] = np.arange(start, len(src))
        start = len(src)
    task = TextTask("multi30k", src, tgt, parts, tok)
    # the text and, when present, GPT-2's files, whichever tokenizer this config asks for (one digest per comparison)
    read = list(paths.values()) + ([os.path.join(g2, f) for f in ("vocab.json", "merges.txt")] if g2 else [])
    task.data_digest = files_digest(root, [os.path.relpath(p, root) for p in read])
    return task

