"""Task `table`: a user's CSV file (awnn/data/table.py), read, checked, split and standardised; every class of bad
file is one DataError line naming the file, the line and the column; the file's digest keys a comparison and is
checked on each trial's node."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from awnn.config import TrainConfig
from awnn.data import DataError, load_task, task_kind
from awnn.data.table import MAX_CATEGORIES, MIN_PER_CLASS, read_table, standardise, table_path
from awnn.fusable import check_fusable
from search.trial_common import check_data_copy


def _write(path, header, rows, newline="\n"):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)
    return path


def _blobs(n_per_class=20, labels=("a", "b", "c"), seed=0):
    """Rows of 3 Gaussian blobs in 4 features of very different scales, labelled by `labels`."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, label in enumerate(labels):
        x = rng.normal(3.0 * k, 1.0, (n_per_class, 4)) * np.array([1.0, 10.0, 1000.0, 0.01]) + np.array([0, 5, -200, 7])
        rows += [[*map(repr, r.tolist()), label] for r in x]
    rng.shuffle(rows)
    return rows


HEADER = ["f1", "f2", "f3", "f4", "class"]


def test_a_table_reads_splits_stratified_and_standardises_on_the_outer_training_part(tmp_path):
    path = _write(tmp_path / "my data.csv", HEADER, _blobs())
    task = load_task("table", str(path), data_seed=0)
    assert task_kind("table") == "tabular"
    assert (task.in_features, task.num_classes, task.classes) == (4, 3, ["a", "b", "c"])
    y = task.label_array()
    for split in (task.outer.train, task.outer.val, task.outer.test, task.inner.train, task.inner.val):
        assert set(y[split]) == {0, 1, 2}  # stratified: every class in every part
    x = task.x.numpy()
    train = x[task.outer.train]
    np.testing.assert_allclose(train.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(train.std(0), 1.0, atol=1e-4)
    assert abs(x[task.outer.test].mean(0)).max() > 1e-3  # the test part's own mean is not forced to 0: only train's stats
    # the same file as a folder's table.csv: the same task
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "table.csv").write_bytes(path.read_bytes())
    again = load_task("table", str(folder), data_seed=0)
    assert again.data_digest == task.data_digest and np.array_equal(again.x.numpy(), x)
    assert table_path(str(folder)) == str(folder / "table.csv")


def test_class_names_are_numbered_in_sorted_order_numerically_where_every_label_is_a_number(tmp_path):
    t = read_table(str(_write(tmp_path / "n.csv", HEADER, _blobs(labels=("10", "2", "1.5")))))
    assert t.classes == ["1.5", "2", "10"]
    t = read_table(str(_write(tmp_path / "s.csv", HEADER, _blobs(labels=("no", "yes", "10")))))
    assert t.classes == ["10", "no", "yes"]


def test_the_digest_follows_the_bytes_and_a_bom_blank_lines_quotes_and_crlf_are_read(tmp_path):
    rows = _blobs()
    a = read_table(str(_write(tmp_path / "a.csv", HEADER, rows)))
    assert read_table(str(_write(tmp_path / "b.csv", HEADER, rows))).digest == a.digest
    rows[0][0] = repr(float(rows[0][0]) + 1e-3)
    assert read_table(str(_write(tmp_path / "c.csv", HEADER, rows))).digest != a.digest
    crlf = read_table(str(_write(tmp_path / "d.csv", HEADER, rows, newline="\r\n")))
    text = (tmp_path / "d.csv").read_bytes().decode()
    (tmp_path / "e.csv").write_bytes(b"\xef\xbb\xbf" + text.replace("\r\n", "\r\n\r\n", 3).replace('class', '"the, class"').encode())
    e = read_table(str(tmp_path / "e.csv"))
    assert np.array_equal(e.x, crlf.x) and np.array_equal(e.y, crlf.y) and e.features == HEADER[:-1]


def test_a_text_feature_column_is_a_category_one_hot_encoded_in_sorted_order(tmp_path):
    """Real tables hold categories ("male", "S"): one feature per value, named `column=value`; numeric columns stay as
    they are, in the file's column order; a code column of numbers stays numeric."""
    colours = ["red", "blue", "green"]
    rows = [[f"{0.5 * i:g}", colours[i % 3], str(i % 2), "yes" if i % 2 else "no"] for i in range(2 * MIN_PER_CLASS)]
    path = _write(tmp_path / "t.csv", ["size", "colour", "code", "bought"], rows)
    t = read_table(str(path))
    assert t.features == ["size", "colour=blue", "colour=green", "colour=red", "code"]
    assert t.categories == {"colour": ["blue", "green", "red"]}
    assert t.x.shape == (2 * MIN_PER_CLASS, 5) and t.x.dtype == np.float32
    for i, r in enumerate(rows):
        assert t.x[i, 0] == float(r[0]) and t.x[i, 4] == float(r[2])
        assert t.x[i, 1:4].tolist() == [float(r[1] == c) for c in ("blue", "green", "red")]
    assert t.summary == "20 rows; 5 features from 3 columns (2 numeric, 1 text one-hot into 3); 2 classes: no (10), yes (10)"
    task = load_task("table", str(path))
    assert task.in_features == 5 and task.num_classes == 2
    assert np.allclose(task.x[task.outer.train].mean(0).numpy(), 0.0, atol=1e-6)  # one-hot columns standardised too


def test_a_summary_names_at_most_ten_classes_and_cuts_long_names(tmp_path):
    rows = [["1.0", f"{'a long class name that goes on and on ' if k == 0 else ''}class {k:02d}"] for k in range(12) for _ in range(MIN_PER_CLASS)]
    t = read_table(str(_write(tmp_path / "t.csv", ["x", "label"], rows)))
    assert t.summary.startswith("120 rows; 1 feature from 1 column (1 numeric); 12 classes: a long class name that goes... (10), class 01 (10), ")
    assert t.summary.endswith("class 09 (10), and 2 more")


@pytest.mark.parametrize("where, name", [("Credit Scoring (v2).csv", "credit_scoring_v2"), ("heart/table.csv", "heart"),
                                         ("données.csv", "donn_es"), ("---.csv", ""), ("x" * 40 + ".csv", "x" * 24)])
def test_a_tables_name_for_the_comparison_id_is_its_stem_made_safe(tmp_path, where, name):
    path = tmp_path / where
    path.parent.mkdir(exist_ok=True)
    _write(path, HEADER, _blobs())
    assert read_table(str(path)).name == name


def test_standardise_centres_a_constant_feature_without_dividing_by_zero():
    x = np.array([[1.0, 5.0], [3.0, 5.0], [100.0, 5.0]], dtype=np.float32)
    out = standardise(x, np.array([0, 1]))
    np.testing.assert_allclose(out[:, 0], [-1.0, 1.0, 98.0])
    np.testing.assert_allclose(out[:, 1], 0.0)


def _good():
    return [["1.0", "2.0", "a" if i % 2 else "b"] for i in range(2 * MIN_PER_CLASS)]


BAD = {
    # name: (file text, what the one line must say)
    "empty": ("", ["empty", "header row"]),
    "blank lines only": ("\n\n  \n", ["empty"]),
    "header only": ("x,y,label\n", ["a header row and no example"]),
    "no header": ("1,2,0\n" * 30, ["line 1", "every cell is a number", "header row"]),
    "one column": ("label\n" + "a\n" * 30, ["line 1", "1 column", "at least 2"]),
    "semicolons": ("x;y;label\n1;2;a\n", ["line 1", "1 column", "separated by semicolons", "with commas"]),
    "tabs": ("x\ty\tlabel\n1\t2\ta\n", ["line 1", "separated by tabs"]),
    "a pandas index": (",x,label\n" + "".join(f"{i},{i % 3},{'ab'[i % 2]}\n" for i in range(30)),
                       ["line 1, column 1: no column name", "pandas' to_csv", "index=False"]),
    "an unnamed column": ("x,,label\n1,2,a\n", ["line 1, column 2: no column name"]),
    "ragged row": ("x,y,label\n1,2,a\n1,2\n", ["line 3", "2 columns", "expected 3"]),
    "text among numbers": ("x,y,label\n1,2,a\n1,two,b\n", ["line 3", "column 2 ('y')", "'two'", "finite number", "mixes numbers and text"]),
    "a number among text": ("x,c,label\n1,red,a\n1,blue,b\n1,3,a\n", ["line 4", "column 2 ('c')", "'3', a number in a text column"]),
    "empty text cell": ("x,c,label\n1,red,a\n1,blue,b\n1, ,a\n", ["line 4", "column 2 ('c')", "an empty cell", "or a category"]),
    "too many categories": ("id,x,label\n" + "".join(f"user{i},1,{'ab'[i % 2]}\n" for i in range(MAX_CATEGORIES + 1)),
                            ["column 1 ('id')", f"{MAX_CATEGORIES + 1} distinct text values", f"at most {MAX_CATEGORIES}", "drop the column"]),
    "empty cell": ("x,y,label\n1,2,a\n,2,b\n", ["line 3", "column 1 ('x')", "an empty cell"]),
    "nan": ("x,y,label\n1,nan,a\n", ["line 2", "column 2 ('y')", "'nan'"]),
    "inf": ("x,y,label\n-inf,1,a\n", ["line 2", "column 1 ('x')", "'-inf'"]),
    "beyond float32": ("x,y,label\n1,1e39,a\n", ["line 2", "column 2 ('y')", "float32"]),
    "empty label": ("x,y,label\n1,2,a\n1,2, \n", ["line 3", "column 3 ('label')", "empty class label"]),
    "one class": ("x,y,label\n" + "1,2,a\n" * 30, ["one class ('a')", "at least 2 classes"]),
    "a continuous target": ("x,price\n" + "".join(f"{i},{1.5 * i + 0.25}\n" for i in range(200)),
                            ["column 2 ('price')", "200 distinct labels in 200 rows", "regression", "not supported"]),
    "many small classes": ("x,label\n" + "".join(f"1,c{i % 12}\n" for i in range(36 * MIN_PER_CLASS)) + "".join(f"1,rare{i}\n" for i in range(9)),
                           [f"too few rows of class 'rare0': 1, 'rare1': 1", "and 4 more", f"at least {MIN_PER_CLASS}"]),
    "too few of a class": ("x,y,label\n" + "1,2,a\n" * 30 + "1,2,b\n" * 3, ["too few rows of class 'b': 3", f"at least {MIN_PER_CLASS}"]),
}


@pytest.mark.parametrize("name", list(BAD))
def test_every_bad_file_is_one_line_naming_the_file_and_where(tmp_path, name):
    text, says = BAD[name]
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(DataError) as e:
        load_task("table", str(path))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for part in says:
        assert part in msg, msg


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes(b"x,caf\xe9,label\n1,2,a\n")
    with pytest.raises(DataError, match=r"latin.csv: not UTF-8 text \(at byte offset 5"):
        read_table(str(path))


@pytest.mark.parametrize("where", ["missing file", "missing folder", "folder without table.csv", "a folder named .csv"])
def test_no_file_says_where_it_was_expected_and_what_data_root_must_name(tmp_path, where):
    if where == "missing file":
        root, expected = tmp_path / "nope.csv", tmp_path / "nope.csv"
    elif where == "missing folder":  # e.g. the default data root, `data`, where there is none
        root, expected = tmp_path / "data", tmp_path / "data" / "table.csv"
    elif where == "folder without table.csv":
        root, expected = tmp_path, tmp_path / "table.csv"
    else:
        root = tmp_path / "x.csv"
        (root / "table.csv").mkdir(parents=True)
        expected = root / "table.csv"
    with pytest.raises(DataError) as e:
        read_table(str(root))
    msg = str(e.value)
    assert f"expected a CSV file at {expected}" in msg and "--data-root must name the CSV file" in msg, msg
    assert ("missing" in msg) if where != "a folder named .csv" else ("a folder, not a regular file" in msg)
    assert "reads it" not in msg and "reads the first" not in msg


@pytest.mark.parametrize("files, says", [(["wine.csv"], "holds wine.csv: --data-root {d}/wine.csv reads it"),
                                         (["b.csv", "a.CSV", "notes.txt"], "holds a.CSV, b.csv: --data-root {d}/a.CSV reads the first"),
                                         (["a.csv", "b.csv", "c.csv", "d.csv"], "holds a.csv, b.csv, c.csv, ...: --data-root {d}/a.csv")])
def test_a_folder_without_table_csv_names_the_csv_files_it_holds(tmp_path, files, says):
    for f in files:
        _write(tmp_path / f, HEADER, _blobs())
    with pytest.raises(DataError) as e:
        read_table(str(tmp_path))
    assert says.format(d=tmp_path) in str(e.value) and "notes.txt" not in str(e.value), str(e.value)


def test_a_table_config_is_fusable_and_trains_in_the_trainer(tmp_path):
    path = _write(tmp_path / "t.csv", HEADER, _blobs())
    check_fusable(TrainConfig(task="table", model="fixed", data_root=str(path)))
    from awnn.train import train

    result = train(TrainConfig(task="table", model="awnn", epochs=2, data_root=str(path), batch_size=16))
    assert result.status == "ok" and len(result.widths) == 1 and result.widths[0] > 0


def test_a_trial_refuses_a_node_copy_of_the_file_that_differs_from_the_drivers(tmp_path):
    rows = _blobs()
    path = _write(tmp_path / "t.csv", HEADER, rows)
    task = load_task("table", str(path))
    check_data_copy(task, {"data_root": str(path), "data_digest": task.data_digest})  # the same file: nothing said
    check_data_copy(task, {"data_root": str(path)})  # no digest asked for (another task's settings)
    rows[3][1] = "0.5"
    _write(path, HEADER, rows)
    edited = load_task("table", str(path))
    with pytest.raises(DataError) as e:
        check_data_copy(edited, {"data_root": str(path), "data_digest": task.data_digest})
    assert f"SHA-256 {edited.data_digest}, expected {task.data_digest}" in str(e.value) and "changed since the comparison started" in str(e.value)


def test_the_comparison_key_and_its_param_follow_the_file(tmp_path):
    """Two files, or one file edited, are two comparisons (--resume never mixes them); the same bytes elsewhere are one."""
    from search.sweep import Comparison
    from search.tune import RunSettings
    from tracking.contract import Param

    rows = _blobs()
    a = _write(tmp_path / "a.csv", HEADER, rows)
    b = tmp_path / "b"
    b.mkdir()
    (b / "table.csv").write_bytes(a.read_bytes())

    def cmp(root):
        return Comparison("table", ["fixed", "awnn"], "smoke", RunSettings(storage=str(tmp_path / "results")),
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", data_root=str(root))

    first, same = cmp(a), cmp(b)
    assert first.key == same.key and first._search_options()[Param.DATA_DIGEST] == read_table(str(a)).digest
    rows[0][-1] = "b" if rows[0][-1] != "b" else "a"
    _write(a, HEADER, rows)
    assert cmp(a).key != first.key
    with pytest.raises(DataError, match="expected a CSV file at"):
        cmp(tmp_path / "missing.csv")  # before anything starts
