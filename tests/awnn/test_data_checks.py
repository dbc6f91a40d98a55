"""Every dataset file is checked before a library reads it (awnn/data/checks.py):
a cut, short, inconsistent or malformed file of any domain is one DataError
line naming the file, the line (or item) and what was expected."""
import os
import pickle
import struct

import numpy as np
import pytest

from awnn.data import DataError, load_task
from data_helpers import cut_file, keep_lines, make_cifar, make_mnist, mid_line_offset, set_line, write_idx, write_multi30k, write_tu


def data_error(task, root) -> str:
    with pytest.raises(DataError) as e:
        load_task(task, str(root))
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def lines(path) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


# ------------------------------------------------------------------ TU graphs
@pytest.fixture
def tu(tmp_path):
    pytest.importorskip("torch_geometric")
    write_tu(tmp_path, "NCI1", n_graphs=60)
    raw = tmp_path / "NCI1" / "raw"
    return tmp_path, {p: str(raw / f"NCI1_{p}.txt") for p in ("A", "graph_indicator", "graph_labels", "node_labels")}


def test_tu_edge_file_cut_mid_line_names_the_file_and_line(tu):
    root, path = tu
    n = lines(path["A"])
    cut_file(path["A"], mid_line_offset(path["A"], n // 2))
    msg = data_error("nci1", root)
    assert msg.startswith(f"{path['A']}, line {n // 2}: cut mid-line"), msg
    assert not os.path.exists(root / "NCI1" / "processed")  # checked before torch-geometric read anything


def test_tu_edge_file_cut_at_a_line_end_is_caught_by_the_graphs_left_without_edges(tu):
    """torch-geometric keeps only the graphs up to the last one with an edge."""
    root, path = tu
    keep_lines(path["A"], lines(path["A"]) // 2)
    msg = data_error("nci1", root)
    assert msg.startswith(f"{path['A']}: the last edge (line {lines(path['A'])}) belongs to graph "), msg
    assert "numbers 60 graphs" in msg and "..60 have none" in msg


def test_tu_a_cut_file_is_caught_even_with_a_processed_cache(tu):
    root, path = tu
    assert len(load_task("nci1", str(root)).graphs) == 60  # torch-geometric's cache now exists
    cut_file(path["A"], mid_line_offset(path["A"], 3))
    assert data_error("nci1", root).startswith(f"{path['A']}, line 3: cut mid-line")


def test_tu_short_graph_label_file_names_the_file_and_counts(tu):
    root, path = tu
    keep_lines(path["graph_labels"], 50)
    msg = data_error("nci1", root)
    assert msg == (f"{path['graph_labels']}, line 50: expected one line per graph, 60 lines "
                   f"({path['graph_indicator']} has 60 graphs), found 50 (is the file cut?)")


def test_tu_long_node_label_file_names_the_first_extra_line(tu):
    root, path = tu
    nodes = lines(path["graph_indicator"])
    with open(path["node_labels"], "a") as f:
        f.write("1\n2\n")
    msg = data_error("nci1", root)
    assert msg.startswith(f"{path['node_labels']}, line {nodes + 1}: expected one line per node, {nodes} lines"), msg
    assert f"found {nodes + 2}" in msg


@pytest.mark.parametrize(
    "part, line, text, expected",
    [
        ("A", 7, "3, x", "expected 2 comma-separated numbers, found '3, x'"),
        ("A", 9, "1, 2, 3", "expected 2 comma-separated values, found 3"),
        ("A", 5, "1.5, 2", "expected integers, found '1.5, 2'"),
        ("A", 4, "", "expected 2 comma-separated values, found 1"),
        ("A", 11, "1, 99999", "node id out of range: expected ids 1.."),
        ("A", 12, "1, {last}", "joins graph 1 to graph 60; expected both ends in one graph"),
        ("graph_indicator", 1, "2", "expected graph id 1 (ids are 1-based"),
        ("graph_indicator", 3, "5", "expected graph id 1 or 2 (nodes sorted by graph, ids contiguous), found 5"),
        ("graph_labels", 30, "yes", "expected 1 comma-separated numbers, found 'yes'"),
        ("node_labels", 3, "1, 2", "expected 1 comma-separated values, found 2"),
    ],
    ids=["junk", "columns", "not-integer", "blank-line", "id-out-of-range", "edge-between-graphs", "indicator-start", "indicator-gap", "junk-label", "node-label-columns"],
)
def test_tu_malformed_line_names_the_file_and_line(tu, part, line, text, expected):
    root, path = tu
    set_line(path[part], line, text.format(last=lines(path["graph_indicator"])))
    msg = data_error("nci1", root)
    assert msg.startswith(f"{path[part]}, line {line}: "), msg
    assert expected in msg, msg


def test_tu_empty_file_is_an_error(tu):
    root, path = tu
    cut_file(path["graph_labels"], 0)
    assert data_error("nci1", root) == f"{path['graph_labels']}: empty file; expected one line of comma-separated numbers per entry"


def test_tu_missing_file_names_the_data_root_layout(tmp_path):
    pytest.importorskip("torch_geometric")
    msg = data_error("reddit_binary", tmp_path)
    assert os.path.join(str(tmp_path), "REDDIT-BINARY", "raw") in msg and "--data-root must name the folder that holds REDDIT-BINARY/raw" in msg


# ------------------------------------------------------------------ MNIST IDX
@pytest.fixture
def mnist(tmp_path):
    pytest.importorskip("torchvision")
    make_mnist(tmp_path)
    raw = tmp_path / "MNIST" / "raw"
    return tmp_path, {f"{p}-{k}": str(raw / f"{p}-{k}-idx{d}-ubyte") for p in ("train", "t10k") for k, d in (("images", 3), ("labels", 1))}


def test_idx_image_file_cut_mid_file_names_the_file_and_item(mnist):
    root, path = mnist
    cut_file(path["train-images"], 16 + 50 * 784 + 100)
    msg = data_error("mnist", root)
    assert msg == (f"{path['train-images']}: {16 + 50 * 784 + 100} bytes; expected {16 + 120 * 784}: "
                   "the header announces cut inside item 50 (0-based) of 120 images of 28x28 bytes (is the file cut?)")


def test_idx_header_count_against_file_size(mnist):
    root, path = mnist
    with open(path["t10k-labels"], "r+b") as f:
        f.seek(4)
        f.write(struct.pack(">I", 31))  # 30 labels follow
    msg = data_error("mnist", root)
    assert msg.startswith(f"{path['t10k-labels']}: 38 bytes; expected 39: the header announces cut inside item 30 (0-based) of 31 labels"), msg


def test_idx_label_count_must_match_image_count(mnist):
    root, path = mnist
    write_idx(path["train-labels"], np.arange(119) % 10)
    assert data_error("mnist", root) == f"{path['train-labels']}: 119 labels, but {path['train-images']} holds 120 images; expected one label per image"


def test_idx_magic_and_label_range(mnist):
    root, path = mnist
    labels = open(path["t10k-labels"], "rb").read()
    with open(path["t10k-labels"], "wb") as f:
        f.write(b"\x1f\x8b" + labels[2:])  # a gzip file left compressed
    assert data_error("mnist", root).startswith(f"{path['t10k-labels']}: magic number 0x1f8b0801; expected 0x00000801")
    write_idx(path["t10k-labels"], [3] * 7 + [10] + [1] * 22)
    assert data_error("mnist", root) == f"{path['t10k-labels']}: label 10 at item 7 (0-based); expected labels 0..9"


def test_idx_missing_file_names_data_root_and_the_expected_path(mnist):
    root, path = mnist
    os.remove(path["t10k-images"])
    msg = data_error("mnist", root)
    assert f"in {os.path.join(str(root), 'MNIST', 'raw')} (missing: t10k-images-idx3-ubyte)" in msg
    assert f"--data-root must name the folder that holds {os.path.join('MNIST', 'raw')}" in msg


# ------------------------------------------------------------------ CIFAR batches
def rewrite(path, change):
    with open(path, "rb") as f:
        entry = pickle.load(f)
    change(entry)
    with open(path, "wb") as f:
        pickle.dump(entry, f)


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda e: e.update(labels=e["labels"][:-1]), "'labels' holds 19 int64 values for 20 images; expected one integer label per image"),
        (lambda e: e.update(data=e["data"][:, :3000]), "'data' of shape (20, 3000) (uint8); expected (images, 3072) bytes, one 3x32x32 image per row"),
        (lambda e: e["labels"].__setitem__(4, 10), "'labels' has label 10 at position 4 (0-based); expected labels 0..9"),
        (lambda e: e.pop("labels"), "expected a CIFAR python batch, a dict with keys 'data' and 'labels'; found ['data']"),
    ],
    ids=["label-count", "shape", "label-range", "key"],
)
def test_cifar_batch_with_wrong_counts_names_the_file(tmp_path, change, expected):
    make_cifar(tmp_path)
    path = str(tmp_path / "cifar-10-batches-py" / "data_batch_4")
    rewrite(path, change)
    assert data_error("cifar10", tmp_path) == f"{path}: {expected}"


def test_cifar_cut_batch_names_the_file(tmp_path):
    make_cifar(tmp_path, hundred=True)
    path = tmp_path / "cifar-100-python" / "test"
    cut_file(path, os.path.getsize(path) // 2)
    assert data_error("cifar100", tmp_path).startswith(f"{path}: not a complete CIFAR python batch (")


# ------------------------------------------------------------------ parallel text
@pytest.fixture
def text(tmp_path):
    folder = write_multi30k(tmp_path)
    return tmp_path, {f"{s}.{l}": os.path.join(folder, f"{s}.{l}") for s in ("train", "val", "test") for l in ("en", "de")}


def test_text_pair_cut_mid_line_names_the_file_and_line(text):
    root, path = text
    cut_file(path["train.de"], mid_line_offset(path["train.de"], 120))
    assert data_error("multi30k", root).startswith(f"{path['train.de']}, line 120: cut mid-line (no newline at the end, but {path['train.en']} ends with one)")


def test_text_pair_with_different_line_counts_names_both_files(text):
    root, path = text
    keep_lines(path["test.en"], 20)
    assert data_error("multi30k", root) == (f"{path['test.en']} has 20 lines but {path['test.de']} has 24; expected one sentence per line in both, "
                                            f"line i of one translating line i of the other ({path['test.de']}, line 21 has no pair)")


def test_text_empty_file_and_bad_utf8_name_the_file(text):
    root, path = text
    cut_file(path["val.en"], 0)
    assert data_error("multi30k", root) == f"{path['val.en']}: empty file; expected one sentence per line"
    write_multi30k(root)
    with open(path["val.de"], "r+b") as f:
        f.seek(mid_line_offset(path["val.de"], 5))
        f.write(b"\xff")
    assert data_error("multi30k", root) == f"{path['val.de']}, line 5: expected utf-8 text, found the byte 0xff"


# ------------------------------------------------------------------ what stands where a data file should be
def _as_fifo(path):
    os.remove(path)
    os.mkfifo(path)  # read by the driver, then by every trial: each later read would block for ever
    return "a named pipe (FIFO), not a regular file"


def _as_folder(path):
    os.remove(path)
    os.mkdir(path)
    return "a folder, not a regular file"


def _as_broken_link(path):
    os.remove(path)
    os.symlink("/no/such/volume/file", path)  # a link into an unmounted volume
    return "a broken symbolic link to /no/such/volume/file"


def _unreadable(path):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    os.chmod(path, 0)
    return "not readable by this user (permission denied)"


def _file_set(task, root):
    """(task name, the data root, one required file of it) for each file-backed domain."""
    if task == "nci1":
        pytest.importorskip("torch_geometric")
        write_tu(root, "NCI1", n_graphs=60)
        return str(root / "NCI1" / "raw" / "NCI1_graph_labels.txt")
    if task == "mnist":
        pytest.importorskip("torchvision")
        make_mnist(root)
        return str(root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte")
    if task == "cifar10":
        pytest.importorskip("torchvision")
        make_cifar(root)
        return str(root / "cifar-10-batches-py" / "data_batch_2")
    folder = write_multi30k(root)
    return os.path.join(folder, "val.de")


@pytest.mark.parametrize("task", ["nci1", "mnist", "cifar10", "multi30k"])
@pytest.mark.parametrize("make", [_as_fifo, _as_folder, _as_broken_link, _unreadable], ids=["fifo", "folder", "broken-link", "unreadable"])
def test_a_data_file_that_is_no_readable_file_is_named_as_what_it_is(tmp_path, task, make):
    path = _file_set(task, tmp_path)
    what = make(path)
    msg = data_error(task, tmp_path)  # (returns: a named pipe is never opened)
    assert f"{os.path.basename(path)} is {what}" in msg, msg
    assert "missing" not in msg, msg
    assert f"in {os.path.dirname(path)} (" in msg, msg


@pytest.mark.parametrize("task", ["nci1", "mnist", "cifar10", "multi30k"])
def test_a_data_root_that_is_a_file_is_named(tmp_path, task):
    root = tmp_path / "data.tar"
    root.write_bytes(b"not a folder")
    assert f"({root} is a file, not a folder)" in data_error(task, root)


def test_an_optional_tu_file_that_is_no_readable_file_is_an_error_not_an_absent_file(tu):
    root, path = tu
    _as_fifo(path["node_labels"])
    assert data_error("nci1", root) == f"{path['node_labels']}: a named pipe (FIFO), not a regular file; expected a readable text file (or no file: it is optional)"


def _pack_mnist(root):
    """MNIST as its publisher ships it: each IDX file gzipped, the extracted files gone."""
    import gzip
    import shutil

    make_mnist(str(root))
    raw = root / "MNIST" / "raw"
    for f in list(raw.iterdir()):
        with open(f, "rb") as a, gzip.open(f"{f}.gz", "wb") as b:
            shutil.copyfileobj(a, b)
        f.unlink()
    return [str(p) for p in sorted(raw.iterdir())]


def _pack_cifar10(root):
    """torchvision's download of CIFAR-10 and CIFAR-100 (the tar.gz files at the data root), not extracted."""
    import tarfile

    archives = []
    for hundred, folder, archive in ((False, "cifar-10-batches-py", "cifar-10-python.tar.gz"), (True, "cifar-100-python", "cifar-100-python.tar.gz")):
        make_cifar(str(root), hundred=hundred)
        with tarfile.open(root / archive, "w:gz") as t:
            t.add(root / folder, arcname=folder)
        _rmtree(root / folder)
        archives.append(str(root / archive))
    return archives[:1]  # (CIFAR-100's archive is no candidate for CIFAR-10)


def _pack_nci1(root):
    """The TU zip next to where its raw folder should be."""
    import zipfile

    write_tu(str(root), "NCI1", n_graphs=20)
    with zipfile.ZipFile(root / "NCI1.zip", "w") as z:
        for f in (root / "NCI1" / "raw").iterdir():
            z.write(f, f"NCI1/{f.name}")
    _rmtree(root / "NCI1")
    (root / "unrelated.zip").write_bytes(b"PK\x05\x06" + b"\0" * 18)  # another archive at the root: not named
    return [str(root / "NCI1.zip")]


def _pack_multi30k(root):
    """Multi30k's archives in its folder, not extracted."""
    import tarfile

    folder = write_multi30k(str(root))
    with tarfile.open(os.path.join(folder, "training.tar.gz"), "w:gz") as t:
        for f in ("train.en", "train.de"):
            t.add(os.path.join(folder, f), arcname=f)
    for f in os.listdir(folder):
        if not f.endswith(".tar.gz"):
            os.remove(os.path.join(folder, f))
    return [os.path.join(folder, "training.tar.gz")]


def _rmtree(path):
    import shutil

    shutil.rmtree(path)


@pytest.mark.parametrize("task, pack, layout", [("mnist", _pack_mnist, "MNIST/raw"), ("cifar10", _pack_cifar10, "cifar-10-batches-py"),
                                                 ("nci1", _pack_nci1, "NCI1/raw"), ("multi30k", _pack_multi30k, "multi30k")])
def test_data_still_compressed_is_named_with_what_to_extract(tmp_path, task, pack, layout):
    """Data copied as its publisher ships it (gzip, tar.gz, zip) is not "missing": the line names the archives found
    there and says to extract them where the loader reads, and names no unrelated archive."""
    if task == "nci1":
        pytest.importorskip("torch_geometric")
    archives = pack(tmp_path)
    with pytest.raises(DataError) as e:
        load_task(task, str(tmp_path))
    msg = str(e.value)
    assert "\n" not in msg and "found compressed files: " + ", ".join(archives) + ": extract them so that " + layout in msg, msg
    assert "cifar-100-python.tar.gz" not in msg and "unrelated.zip" not in msg


@pytest.mark.parametrize("task, inside, right", [("mnist", "MNIST", "."), ("mnist", "MNIST/raw", "."), ("nci1", "NCI1", "."),
                                                 ("multi30k", "multi30k", "."), ("cifar10", "cifar-10-batches-py", ".")])
def test_a_data_root_inside_the_layout_says_which_data_root_reads_the_files(tmp_path, task, inside, right):
    """`--data-root data/MNIST` (or the CIFAR folder itself) is the most common wrong root: the line says where the files
    are and which --data-root reads them."""
    if task == "nci1":
        pytest.importorskip("torch_geometric")
    {"mnist": lambda r: make_mnist(r), "nci1": lambda r: write_tu(r, "NCI1", n_graphs=20), "multi30k": write_multi30k,
     "cifar10": lambda r: make_cifar(r)}[task](str(tmp_path))
    with pytest.raises(DataError) as e:
        load_task(task, str(tmp_path / inside))
    root = os.path.normpath(str(tmp_path / right))
    assert "\n" not in str(e.value) and f"--data-root {root} reads them" in str(e.value), str(e.value)
    load_task(task, root)  # ... and it does


def test_the_data_root_said_for_a_folder_inside_the_layout_is_quoted_for_the_shell(tmp_path):
    """A root whose name a shell splits ('my data'): the --data-root the line gives, pasted back, is that root."""
    import shlex

    root = tmp_path / "my data"
    make_mnist(str(root))
    with pytest.raises(DataError) as e:
        load_task("mnist", str(root / "MNIST"))
    words = shlex.split(str(e.value).split("--data-root ", 1)[1])
    assert words[:2] == [str(root), "reads"], str(e.value)
    load_task("mnist", words[0])


def test_files_in_a_folder_of_another_name_are_to_be_moved_into_the_layout(tmp_path):
    make_cifar(str(tmp_path))
    os.rename(tmp_path / "cifar-10-batches-py", tmp_path / "my cifar")
    with pytest.raises(DataError) as e:
        load_task("cifar10", str(tmp_path / "my cifar"))
    assert f"they are in {tmp_path / 'my cifar'}: move them to a folder cifar-10-batches-py" in str(e.value)
