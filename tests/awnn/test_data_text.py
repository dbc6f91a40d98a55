"""Text task: parallel text files, the offline word tokenizer, a pretrained
GPT-2 tokenizer loaded from its files, padded batches, clear errors, and a
tiny Transformer trained end to end with named FFN widths."""
import os

import pytest
import torch

from awnn.config import TrainConfig
from awnn.data import DataError, load_task
from awnn.data.text import IGNORE_INDEX, GPT2Tokenizer, WordTokenizer, _bytes_to_unicode
from awnn.train import train
from data_helpers import write_gpt2, write_multi30k

def test_word_tokenizer_is_built_from_training_text():
    tok = WordTokenizer.build(["a dog, a cat.", "a dog runs"], min_freq=2)
    assert tok.itos == ["<pad>", "<unk>", "<bos>", "<eos>", "a", "dog"]
    assert tok.encode("a cat runs dog") == [4, tok.unk_id, tok.unk_id, 5]


def test_gpt2_tokenizer_applies_byte_level_bpe(tmp_path):
    vocab = write_gpt2(tmp_path)
    tok = GPT2Tokenizer.from_files(str(tmp_path))
    assert tok.encode("the cat") == [vocab["the"], vocab["Ġcat"]]
    assert tok.encode("ü") == [vocab[_bytes_to_unicode()[b]] for b in "ü".encode()]  # bytes, never unknown
    assert tok.bos_id == tok.eos_id == vocab["<|endoftext|>"] and tok.pad_id == len(vocab) == len(tok) - 1


def test_multi30k_reads_parallel_files_and_pads_batches(tmp_path):
    write_multi30k(tmp_path, test_stem="test_2016_flickr")
    task = load_task("multi30k", str(tmp_path))
    assert task.kind == "text" and task.tokenizer.name == "word"
    assert [len(task.outer.train), len(task.outer.val), len(task.outer.test)] == [200, 24, 24]
    assert list(task.inner.train) == list(task.outer.train) and list(task.inner.val) == list(task.outer.val)
    (src, tgt_in), y = next(task.batches("outer", "val", 5, torch.device("cpu")))
    tok = task.tokenizer
    assert src.shape[0] == tgt_in.shape[0] == y.shape[0] == 5 and tgt_in.shape == y.shape
    assert torch.all(src[:, 0] == tok.bos_id) and torch.all(tgt_in[:, 0] == tok.bos_id)
    full = torch.cat([tgt_in[:, :1], y.masked_fill(y == IGNORE_INDEX, tok.pad_id)], 1)  # <bos> words <eos> <pad>...
    assert torch.equal(full[:, :-1], tgt_in)  # decoder input and targets: the same sentence shifted by one
    assert not (y == tok.pad_id).any()  # padding is never a target
    assert (y == tok.eos_id).sum() == 5  # one <eos> target per sentence; padding is -100
    assert task.n_train("outer") == int(sum((y_ != IGNORE_INDEX).sum() for _, y_ in task.batches("outer", "train", 64, torch.device("cpu"))))


def test_multi30k_truncates_to_max_len(tmp_path):
    write_multi30k(tmp_path)
    task = load_task("multi30k", str(tmp_path), config=TrainConfig.from_dict({"task": "multi30k", "max_len": 4}))
    (src, tgt_in), y = next(task.batches("outer", "train", 64, torch.device("cpu"), torch.Generator().manual_seed(0)))
    assert src.shape[1] <= 4 and tgt_in.shape[1] <= 3


def test_multi30k_uses_gpt2_files_when_present(tmp_path):
    write_multi30k(tmp_path)
    with pytest.raises(DataError, match="gpt2"):
        load_task("multi30k", str(tmp_path), config=TrainConfig.from_dict({"task": "multi30k", "tokenizer": "gpt2"}))
    write_gpt2(tmp_path / "multi30k" / "gpt2")
    task = load_task("multi30k", str(tmp_path))  # tokenizer=auto
    assert task.tokenizer.name == "gpt2" and task.num_classes == 256 + 5 + 2
    word = load_task("multi30k", str(tmp_path), config=TrainConfig.from_dict({"task": "multi30k", "tokenizer": "word"}))
    assert word.tokenizer.name == "word"


def test_multi30k_missing_files_is_one_clear_line(tmp_path):
    with pytest.raises(DataError) as e:
        load_task("multi30k", str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and os.path.join(str(tmp_path), "multi30k") in msg
    assert all(f in msg for f in ("train.en", "train.de", "val.en", "val.de", "test.en", "test.de"))
    write_multi30k(tmp_path)
    os.remove(tmp_path / "multi30k" / "val.de")
    with pytest.raises(DataError, match=r"missing: val\.de\)"):
        load_task("multi30k", str(tmp_path))


def test_multi30k_mismatched_line_counts_are_an_error(tmp_path):
    folder = write_multi30k(tmp_path)
    with open(os.path.join(folder, "val.de"), "a", encoding="utf-8") as f:
        f.write("EXTRA .\n")
    with pytest.raises(DataError, match="val.en has 24 lines but .*val.de has 25"):
        load_task("multi30k", str(tmp_path))


@pytest.mark.parametrize("model", ["fixed", "awnn"])
def test_transformer_trains_on_multi30k_and_records_ffn_widths(tmp_path, model):
    write_multi30k(tmp_path, sizes=(("train", 96), ("val", 16), ("test", 16)))
    cfg = TrainConfig.from_dict(
        {
            "task": "multi30k", "model": model, "data_root": str(tmp_path), "epochs": 3, "batch_size": 32, "width": 32, "rate": 0.1,
            "d_model": 32, "heads": 2, "encoder_layers": 1, "decoder_layers": 2, "dropout": 0.0, "lr": 0.003, "adam_eps": 5e-9,
            "select_metric": "loss", "lr_schedule": "plateau", "lr_gamma": 0.9, "device": "cpu",
        }
    )  # fmt: skip
    result = train(cfg)
    assert result.status == "ok"
    losses = [r["val_loss"] for r in result.history]
    assert losses[-1] < losses[0]
    assert result.best_val_loss == min(losses) and torch.isfinite(torch.tensor(result.test_loss))
    record = result.history[-1]
    assert {"width_enc0_ffn", "width_dec0_ffn", "width_dec1_ffn"} <= set(record)


def test_adaptive_transformer_checkpoint_resumes_with_its_widths(tmp_path):
    from awnn.train import Trainer

    write_multi30k(tmp_path, sizes=(("train", 64), ("val", 16), ("test", 16)))
    cfg = TrainConfig.from_dict(
        {"task": "multi30k", "model": "awnn", "data_root": str(tmp_path), "epochs": 1, "batch_size": 16, "rate": 0.1, "d_model": 16, "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "device": "cpu"}
    )
    first = Trainer(cfg)
    first.run()
    state = first.state_dict()
    again = Trainer(cfg.replace(epochs=2), task=first.task)
    for block in again.blocks:
        block.set_widths([w + 3 for w in block.widths])  # the checkpoint's widths must win
    again.load_state_dict(state)
    assert again.model.widths == first.model.widths
    result = again.run()
    assert result.status == "ok" and result.epochs_run == 2 and len(result.history) == 2
