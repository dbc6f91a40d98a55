"""The digest of a dataset's copy on disk (awnn/data/digest.py), for every task that reads files: the same bytes under
another data root are the same digest, another copy is another, files the task does not read and the options a config
gives the loader change nothing; a trial refuses a node copy that differs from the driver's, and a --resume refuses
data that differs from what the comparison started on (real MLflow), while the --resume key of a named dataset stays
what it was before the digest."""
from __future__ import annotations

import os
import shutil

import pytest

from awnn.data import DataError, load_task
from awnn.data.digest import DIGEST_CHARS, files_digest
from data_helpers import make_cifar, make_mnist, write_gpt2, write_multi30k, write_social, write_tu
from search.trial_common import check_data_copy

pytest.importorskip("torchvision", reason="the image tasks read MNIST through torchvision")


def test_files_digest_follows_names_and_bytes_not_the_folder_or_the_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "x.bin").write_bytes(b"\x00\x01" * 1000)
        (d / "y.txt").write_text("one\ntwo\n")
    first = files_digest(str(a), ["x.bin", "y.txt"])
    assert len(first) == DIGEST_CHARS and int(first, 16) >= 0
    assert files_digest(str(b), ["y.txt", "x.bin"]) == first  # another folder, another order
    (b / "y.txt").write_text("one\ntwO\n")
    assert files_digest(str(b), ["x.bin", "y.txt"]) != first  # one byte
    (b / "y.txt").write_text("one\ntwo\n")
    (b / "y.txt").rename(b / "z.txt")
    assert files_digest(str(b), ["x.bin", "z.txt"]) != first  # same bytes under another name
    (a / "xy").write_bytes(b"\x00\x01" * 1000 + b"one\ntwo\n")
    assert files_digest(str(a), ["xy"]) != first  # the file boundaries count
    with pytest.raises(DataError) as e:
        files_digest(str(a), ["x.bin", "gone.txt"])
    assert str(a / "gone.txt") in str(e.value) and "could not read it" in str(e.value)


def _mnist(root, seed):
    make_mnist(str(root), n_train=60, n_test=20, seed=seed)


def _cifar10(root, seed):
    make_cifar(str(root), seed=seed)


def _cifar100(root, seed):
    make_cifar(str(root), hundred=True, seed=seed)


def _nci1(root, seed):
    pytest.importorskip("torch_geometric")
    write_tu(str(root), "NCI1", n_graphs=40, seed=seed)


def _reddit(root, seed):
    pytest.importorskip("torch_geometric")
    write_social(str(root), n_graphs=40, seed=seed, max_nodes=60)


def _multi30k(root, seed):
    write_multi30k(str(root), sizes=(("train", 40), ("val", 8), ("test", 8)), seed=seed)


DISK = {"mnist": _mnist, "cifar10": _cifar10, "cifar100": _cifar100, "nci1": _nci1, "reddit_binary": _reddit, "multi30k": _multi30k}


@pytest.mark.parametrize("task", sorted(DISK))
def test_every_task_on_disk_has_a_digest_of_its_copy(tmp_path, task):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    DISK[task](a, 0)
    first = load_task(task, str(a)).data_digest
    assert first and len(first) == DIGEST_CHARS
    shutil.copytree(a, b)  # (with any cache the first load made)
    for dirpath, _, files in os.walk(b):  # a file no loader reads, beside each of the copy's files
        if files:
            (b / dirpath / "notes.md").write_text("downloaded on a Tuesday\n")
    assert load_task(task, str(b)).data_digest == first  # the same bytes elsewhere: the same data
    DISK[task](c, 1)
    other = load_task(task, str(c))
    assert other.data_digest != first  # another copy
    with pytest.raises(DataError) as e:  # ... which a trial refuses when the driver read the first
        check_data_copy(other, {"data_root": str(c), "data_digest": first})
    assert f"SHA-256 {other.data_digest}, expected {first}" in str(e.value) and str(c) in str(e.value)
    check_data_copy(load_task(task, str(b)), {"data_root": str(b), "data_digest": first})


def test_data_made_from_a_seed_or_shipped_in_a_package_has_no_digest(tmp_path):
    pytest.importorskip("sklearn")
    assert load_task("spiralhard").data_digest is None
    assert load_task("digits").data_digest is None
    check_data_copy(load_task("spiralhard"), {"data_root": None})  # nothing to check


def test_a_text_copy_has_one_digest_whatever_tokenizer_a_config_asks_for(tmp_path):
    """The driver reads the data with the loader's defaults and every trial with its config's options: one digest."""
    from awnn.config import TrainConfig

    write_multi30k(str(tmp_path), sizes=(("train", 40), ("val", 8), ("test", 8)))
    write_gpt2(str(tmp_path / "multi30k" / "gpt2"))
    driver = load_task("multi30k", str(tmp_path)).data_digest
    for tokenizer in ("word", "gpt2", "auto"):
        config = TrainConfig(task="multi30k", model="awnn-transformer", data_root=str(tmp_path), tokenizer=tokenizer, max_len=16)
        assert load_task("multi30k", str(tmp_path), config=config).data_digest == driver, tokenizer
    (tmp_path / "multi30k" / "gpt2" / "merges.txt").write_text("#version: 0.2\n")  # another tokenizer: other training data
    assert load_task("multi30k", str(tmp_path)).data_digest != driver


def test_a_tu_cache_is_not_part_of_the_copy(tmp_path):
    """TUDataset's processed/ cache is made by the first load on each node: only the raw files count."""
    pytest.importorskip("torch_geometric")
    write_tu(str(tmp_path), "NCI1", n_graphs=40)
    first = load_task("nci1", str(tmp_path)).data_digest
    assert (tmp_path / "NCI1" / "processed").is_dir()
    assert load_task("nci1", str(tmp_path)).data_digest == first  # read from the cache this time


def _comparison(tmp_path, root, resume=False):
    from search.sweep import Comparison
    from search.tune import RunSettings

    return Comparison("mnist", ["awnn"], "smoke", RunSettings(storage=str(tmp_path / "results")),
                      tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", data_root=str(root), resume=resume)


def test_a_named_datasets_digest_is_checked_on_resume_but_keys_nothing(tmp_path):
    """Another copy of MNIST is the same comparison (the key of a comparison started before the digest is unchanged),
    but a --resume on data other than the comparison started on is refused in one line before Ray starts; a comparison
    that saved no digest (from before it was saved) resumes on whatever it finds."""
    from tracking.checks import init_tracking
    from tracking.contract import Param, Tag, client, experiment_name

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _mnist(a, 0)
    shutil.copytree(a, b)
    _mnist(c, 1)
    first = _comparison(tmp_path, a)
    assert first.data_digest == load_task("mnist", str(a)).data_digest
    assert Param.DATA_DIGEST not in first._search_options()
    assert _comparison(tmp_path, c).key == first.key and _comparison(tmp_path, c).data_digest != first.data_digest

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    mlflow = client(uri)
    exp = mlflow.create_experiment(experiment_name("mnist"))

    def interrupted(cid, params):
        run = mlflow.create_run(exp, tags={Tag.KIND: "comparison", Tag.COMPARISON: cid, Tag.COMPARISON_KEY: first.key,
                                           Tag.TASK: "mnist", Tag.STATE: "interrupted"})
        for k, v in params.items():
            mlflow.log_param(run.info.run_id, k, v)
        mlflow.set_terminated(run.info.run_id, "KILLED")

    interrupted("mnist-old", {})  # from before the digest: nothing to check against
    assert _comparison(tmp_path, c, resume=True).data_digest
    interrupted("mnist-new", {Param.DATA_DIGEST: first.data_digest})  # the newest: the one --resume adopts
    with pytest.raises(DataError) as e:
        _comparison(tmp_path, c, resume=True)
    message = str(e.value)
    assert "\n" not in message and str(c) in message and "mnist-new" in message
    assert f"saved {first.data_digest}" in message and "restore it, or run without --resume" in message
    assert _comparison(tmp_path, b, resume=True).data_digest == first.data_digest  # the same bytes elsewhere: resumable


def test_a_new_comparison_beside_an_unfinished_one_on_other_data_is_not_told_to_resume(tmp_path):
    """The note a new comparison gives when the same arguments are unfinished suggests --resume only where --resume
    would take this data."""
    import io

    from tracking.checks import init_tracking
    from tracking.contract import Param, Tag, client, experiment_name
    from tracking.store import TrackingWriter

    a, c = tmp_path / "a", tmp_path / "c"
    _mnist(a, 0)
    _mnist(c, 1)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    first = _comparison(tmp_path, a)
    mlflow = client(uri)
    exp = mlflow.create_experiment(experiment_name("mnist"))
    run = mlflow.create_run(exp, tags={Tag.KIND: "comparison", Tag.COMPARISON: "mnist-old", Tag.COMPARISON_KEY: first.key,
                                       Tag.TASK: "mnist", Tag.STATE: "interrupted"})
    mlflow.log_param(run.info.run_id, Param.DATA_DIGEST, first.data_digest)

    def note(root):
        cmp = _comparison(tmp_path, root)
        cmp.stream = io.StringIO()
        cmp.writer = TrackingWriter(uri, experiment_name("mnist"))
        try:
            cmp._note_unfinished()
        finally:
            cmp.writer.close(timeout=30)
        return cmp.stream.getvalue()

    same, other = note(a), note(c)
    assert "note: comparison mnist-old with these arguments is unfinished (interrupted)" in same and "--resume to continue it" in same
    assert f"unfinished (interrupted) on other data (SHA-256 {first.data_digest}; here " in other and "--resume" not in other
