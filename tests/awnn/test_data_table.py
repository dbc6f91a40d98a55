"""Task `table`: a user's CSV file, or a folder's train.csv/test.csv pair (awnn/data/table.py), read, checked, split
and standardised; every class of bad file (or pair) is one DataError line naming the file, the line and the column; the
data's digest keys a comparison and is checked on each trial's node."""
from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import hashlib
import io
import lzma
import re
import shlex
import sqlite3
import zipfile

import numpy as np
import pytest

from awnn.config import TrainConfig, column_list, column_text
from awnn.data import DataError, load_task, task_kind
from awnn.data.table import MAX_CATEGORIES, MIN_PER_CLASS, read_table, standardise, table_files
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
    assert table_files(str(folder)) == (str(folder / "table.csv"),)


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
                                         ("données.csv", "donn_es"), ("---.csv", ""), ("x" * 40 + ".csv", "x" * 24),
                                         ("Wine Quality.csv.gz", "wine_quality"), ("scores.tsv", "scores"), ("a.b.data", "a_b")])
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


def test_standardise_takes_the_stats_of_the_cells_there_and_fills_a_missing_cell_with_the_mean():
    nan = np.nan
    x = np.array([[1.0, nan, nan], [nan, 2.0, nan], [3.0, 4.0, nan], [nan, 100.0, 7.0]], dtype=np.float32)
    out = standardise(x, np.array([0, 1, 2]))
    np.testing.assert_allclose(out[:, 0], [-1.0, 0.0, 1.0, 0.0])  # mean 2, std 1 over the two cells; the gaps the mean
    np.testing.assert_allclose(out[:, 1], [0.0, -1.0, 1.0, 97.0])  # row 0's gap: the mean of rows 1-2 (3), std 1
    np.testing.assert_allclose(out[:, 2], [0.0, 0.0, 0.0, 7.0])  # no cell in the rows: neither centred nor scaled
    assert not np.isnan(out).any()


def _good():
    return [["1.0", "2.0", "a" if i % 2 else "b"] for i in range(2 * MIN_PER_CLASS)]


BAD = {
    # name: (file text, what the one line must say)
    "empty": ("", ["empty", "header row"]),
    "blank lines only": ("\n\n  \n", ["empty"]),
    "header only": ("x,y,label\n", ["a header row and no example"]),
    "no header": ("1,2,0\n" * 30, ["line 1", "every cell is a number", "header row"]),
    "one column": ("label\n" + "a\n" * 30, ["line 1", "1 column", "at least 2"]),
    "Excel's separator line for bars": ("sep=|\nx|y|label\n1|2|a\n", ["line 1: 'sep=|', Excel's line naming the separator '|'",
                                                                    "separated by commas or semicolons or tabs"]),
    "Excel's separator line alone": ("sep=,\n", ["empty", "header row"]),
    "Excel's separator line for semicolons alone": ("sep=;\n", ["empty", "header row"]),
    "bars": ("x|y|label\n1|2|a\n", ["line 1", "1 column", "separated by bars", "with commas"]),
    "semicolons and thousands separated by points": ("x;y;label\n1,5;2;a\n1.234,5;2;b\n", [
        "line 3: '1.234,5', a number written with thousands separators; expected plain numbers (1234,5)"]),
    "semicolons and numbers written two ways": ("x;y;label\n1,5;2;a\n2;2.5;b\n", [
        "separated by semicolons, with numbers written with a decimal comma (line 2: '1,5') and with a decimal point (line 3: '2.5')",
        "expected one way"]),
    "a pandas index": (",x,label\n" + "".join(f"{i},{i % 3},{'ab'[i % 2]}\n" for i in range(30)),
                       ["line 1, column 1: no column name", "pandas' to_csv", "index=False"]),
    "an unnamed column": ("x,,label\n1,2,a\n", ["line 1, column 2: no column name"]),
    "ragged row": ("x,y,label\n1,2,a\n1,2\n", ["line 3", "2 columns", "expected 3"]),
    "a name twice": ("x,y,x,label\n1,2,3,a\n", ["line 1, column 3: 'x' again (column 1 has that name)", "each column named once"]),
    "no header (UCI's adult.data)": ("39, State-gov, 77516, Bachelors, <=50K\n" + "".join(
        f"{20 + i}, {['Private', 'State-gov'][i % 2]}, {1000 * i + 7}, {['Bachelors', 'HS-grad'][i % 3 == 0]}, {['<=50K', '>50K'][i % 2]}\n"
        for i in range(30)), ["line 1: reads as an example, not a header", "'<=50K' is a class label", "4 of its 4 feature cells fit",
                               "expected a header row of column names first"]),
    "text among numbers": ("x,y,label\n1,2,a\n1,two,b\n", ["line 3", "column 2 ('y')", "'two'", "finite number", "or a missing cell written as one of '', 'NA'", "mixes numbers and text"]),
    "a number among text, after a 'nan'": ("x,c,label\n1,red,a\n1,nan,b\n1,blue,a\n1,3,b\n", ["line 5", "column 2 ('c')", "'3', a number in a text column"]),
    "a number among text": ("x,c,label\n1,red,a\n1,blue,b\n1,3,a\n", ["line 4", "column 2 ('c')", "'3', a number in a text column"]),
    "too many categories": ("id,x,label\n" + "".join(f"user{i},1,{'ab'[i % 2]}\n" for i in range(MAX_CATEGORIES + 1)),
                            ["column 1 ('id')", f"{MAX_CATEGORIES + 1} distinct text values", f"at most {MAX_CATEGORIES}", "drop the column"]),
    # numbers as a spreadsheet formats them: refused with what to write, not read as categories or "free text: drop it"
    "thousands separators": ("income,x,label\n" + "".join(f'"{1000 * i + 999:,}",1,{"ab"[i % 2]}\n' if i else "999,1,a\n" for i in range(60)),
                             ["line 3, column 1 ('income'): '1,999', a number written with thousands separators", "expected plain numbers"]),
    "a currency sign": ("price,x,label\n" + "".join(f"${i}.50,1,{'ab'[i % 2]}\n" for i in range(30)),
                        ["line 2, column 1 ('price'): '$0.50', a number written with a currency sign", "save the column without"]),
    "a percent sign": ("x,rate,label\n" + "".join(f"1,{i % 5}%,{'ab'[i % 2]}\n" for i in range(30)),
                       ["line 2, column 2 ('rate'): '0%', a number written with a percent sign", "a percentage as 12 or 0.12"]),
    "dates": ("day,x,label\n" + "".join(f"2020-{1 + i % 12:02d}-{1 + i // 12:02d},1,{'ab'[i % 2]}\n" for i in range(60)),
              ["column 1 ('day'): 60 distinct text values", "these are dates", "write them as numbers"]),
    "a trailing unnamed column with cells": ("x,y,label,\n1,2,a,z\n", ["line 1, column 4: no column name"]),
    "a column of missing cells": ("x,y,label\n1,,a\n2,NA,b\n3,?,a\n", ["column 2 ('y'): every cell is empty or missing", "drop the column"]),
    "inf": ("x,y,label\n-inf,1,a\n", ["line 2", "column 1 ('x')", "'-inf'"]),
    "beyond float32": ("x,y,label\n1,1e39,a\n", ["line 2", "column 2 ('y')", "float32"]),
    "empty label": ("x,y,label\n1,2,a\n1,2, \n", ["line 3", "column 3 ('label')", "empty class label"]),
    "empty labels": ("x,y,label\n1,2,a\n1,2, \n3,4,\n5,6,b\n1,1,\n", ["line 3, column 3 ('label'): an empty class label (and 2 more rows "
                                                                    "without one: drop them"]),
    "the label not last (Titanic's Survived)": ("Survived,Fare,Embarked\n" + "".join(f"{i % 2},{7.25 + i % 9},{'SCQ'[i % 3]}\n" for i in range(30))
                                                + "1,80.0,\n", ["line 32, column 3 ('Embarked'): an empty class label", "the last column is the class label", "name it with --label"]),
    "one number written two ways": ("x,label\n" + "".join(f"{i % 5},{['0', '1'][i % 2]}\n" for i in range(30))
                                    + "".join(f"{i % 5},1.0\n" for i in range(10)),
                                    ["column 2 ('label'): classes '1' (line 3 first) and '1.0' (line 32 first) are one number "
                                     "written two ways", "expected each class written one way"]),
    "one class": ("x,y,label\n" + "1,2,a\n" * 30, ["one class ('a')", "at least 2 classes"]),
    "a continuous target": ("x,price\n" + "".join(f"{i % 7},{1.5 * i + 0.25}\n" for i in range(200)),
                            ["column 2 ('price')", "200 distinct labels in 200 rows", "name it with --label", "regression", "not supported"]),
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
    path.write_bytes(b"x,y,label\n1,2,a\n1,3,caf\xe9\n")
    with pytest.raises(DataError) as e:
        read_table(str(path))
    assert str(e.value) == (f"{path}, line 3: not UTF-8 text (at byte offset 23: b'\\xe9', as Latin-1 or Windows-1252 write an "
                            "accented letter; Excel's plain 'CSV' saves so on Windows); expected a CSV file in UTF-8 or UTF-16: save it "
                            "as 'CSV UTF-8'")


def _zip(members: dict) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def _csv_text(rows, sep=",", newline="\n") -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=sep, lineterminator=newline).writerows([HEADER, *rows])
    return out.getvalue()


# how tools other than a CSV writer in UTF-8 hand over a table: the file's bytes from the CSV text, and how the summary says it was read
WRITTEN_AS = {
    "Excel's Unicode Text": (lambda rows: b"\xff\xfe" + _csv_text(rows, "\t", "\r\n").encode("utf-16-le"), "UTF-16 text, separated by tabs"),
    "PowerShell 5's Out-File": (lambda rows: _csv_text(rows, ",", "\r\n").encode("utf-16"), "UTF-16 text"),
    "UTF-16, big-endian": (lambda rows: b"\xfe\xff" + _csv_text(rows).encode("utf-16-be"), "UTF-16 text"),
    "gzip": (lambda rows: gzip.compress(_csv_text(rows).encode()), "gzip-compressed"),
    "bzip2": (lambda rows: bz2.compress(_csv_text(rows).encode()), "bzip2-compressed"),
    "xz": (lambda rows: lzma.compress(_csv_text(rows).encode()), "xz-compressed"),
    "gzip of UTF-16 with semicolons": (lambda rows: gzip.compress(_csv_text(rows, ";").encode("utf-16")),
                                       "gzip-compressed, UTF-16 text, separated by semicolons"),
    "zip of one CSV (macOS)": (lambda rows: _zip({"data/table.csv": _csv_text(rows), "__MACOSX/data/._table.csv": "x"}), "holding data/table.csv"),
}


@pytest.mark.parametrize("tool", list(WRITTEN_AS))
def test_a_table_as_other_tools_write_it_reads_as_its_utf8_csv_twin(tmp_path, tool):
    """Excel's "Unicode Text" is UTF-16 separated by tabs, Windows PowerShell 5 writes UTF-16 (`Out-File`, `>`), and
    datasets ship compressed (pandas reads .csv.gz, .bz2, .xz and a zip of one file).  Each was refused or misread
    (a gzip file as "not UTF-8 text, as Latin-1 writes an accented letter"); each now reads as the plain file with the
    same cells, and the summary says how."""
    rows = _blobs()
    plain = read_table(str(_write(tmp_path / "plain.csv", HEADER, rows)))
    write, said = WRITTEN_AS[tool]
    path = tmp_path / "other.data"
    path.write_bytes(write(rows))
    t = read_table(str(path))
    assert np.array_equal(t.x, plain.x) and np.array_equal(t.y, plain.y) and t.features == plain.features
    assert t.summary == f"{plain.summary}; other.data {said}"
    assert t.digest != plain.digest  # (the file's own bytes: another file is another task)


def _parquet() -> bytes:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table({"x": [1.0, 2.0], "label": ["a", "b"]}), out)
    return out.getvalue()


def _sqlite(tmp_path) -> bytes:
    db = tmp_path / "t.db"
    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("create table t (x real, label text)")
        c.execute("insert into t values (1.0, 'a')")
        c.commit()
    return db.read_bytes()


TEXT = "x,y,label\n" + "".join(f"{i % 7},{i % 5},{'ab'[i % 2]}\n" for i in range(60))
# files that hold no CSV text: their bytes, and what the one-line error says
NO_CSV_TEXT = {
    "an .xlsx workbook": (lambda p: _zip({"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<workbook/>"}),
                          "an Excel workbook (.xlsx), not CSV text; expected a CSV file: save the sheet as 'CSV UTF-8'"),
    "an .ods spreadsheet": (lambda p: _zip({"mimetype": "application/vnd.oasis.opendocument.spreadsheet", "content.xml": "<x/>"}),
                            "an OpenDocument spreadsheet (.ods), not CSV text"),
    "an .xls workbook": (lambda p: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(range(256)) * 8, "an Excel 97-2003 workbook (.xls), not CSV text"),
    "a Parquet file": (lambda p: _parquet(), "a Parquet file, not CSV text; expected a CSV file: write it as CSV (pandas: pd.read_parquet"),
    "a SQLite database": (_sqlite, "a SQLite database, not CSV text; expected a CSV file: export the table as CSV"),
    "a gzipped workbook": (lambda p: gzip.compress(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(64)),
                           "an Excel 97-2003 workbook (.xls) inside the gzip file, not CSV text"),
    "a zip of two CSV files": (lambda p: _zip({"a.csv": TEXT, "b.csv": TEXT}),
                               "a zip archive of 2 CSV files (a.csv, b.csv); expected one CSV file, or an archive of exactly one"),
    "a zip of no CSV file": (lambda p: _zip({"notes.md": "x"}), "a zip archive of no CSV files (notes.md)"),
    "a zip cut short": (lambda p: _zip({"a.csv": TEXT})[:60], "a zip archive that cannot be read (BadZipFile"),
    "a gzip file cut short": (lambda p: gzip.compress(TEXT.encode())[:-10], "gzip-compressed, and it cannot be unpacked (EOFError"),
    "UTF-16 cut short": (lambda p: TEXT.encode("utf-16")[:-1], "line 61: UTF-16-LE text with a byte order mark, and at byte offset 740: "
                                                                "a last byte without its pair: the file is cut short"),
    "UTF-16 without its byte order mark": (lambda p: TEXT.encode("utf-16-le"),
                                           "line 1: a NUL character, which no CSV holds (every second byte is one: UTF-16 text without a "
                                           "byte order mark)"),
    "a NUL byte": (lambda p: TEXT.encode()[:30] + b"\x00" + TEXT.encode()[30:], "line 5: a NUL character, which no CSV holds (a binary "
                                                                                  "file, or a damaged one)"),
}


@pytest.mark.parametrize("kind", list(NO_CSV_TEXT))
def test_a_file_that_holds_no_csv_text_is_named_for_what_it_is(tmp_path, kind):
    """A workbook, a Parquet file or a damaged archive was "not UTF-8 text, as Latin-1 writes an accented letter" (or,
    UTF-16 without its mark, "1 columns"): each is now one line saying what the file is and how to get a CSV from it."""
    make, says = NO_CSV_TEXT[kind]
    path = tmp_path / "table.csv"
    path.write_bytes(make(tmp_path))
    with pytest.raises(DataError) as e:
        read_table(str(path))
    msg = str(e.value)
    assert msg.startswith(f"{path}") and "\n" not in msg and says in msg, msg


def test_a_compressed_file_is_found_by_its_name_and_suggested_in_its_folder(tmp_path):
    """`--data-root data.csv.gz` that is not there names that file, not the table.csv of a folder of that name; a
    folder without table.csv suggests the compressed file it holds, in a flag that reads it."""
    missing = tmp_path / "data.csv.gz"
    with pytest.raises(DataError, match=re.escape(f"expected a CSV file at {missing} ")):
        read_table(str(missing))
    (tmp_path / "wine.csv.gz").write_bytes(gzip.compress(TEXT.encode()))
    with pytest.raises(DataError) as e:
        read_table(str(tmp_path))
    flag = str(e.value).split("--data-root ", 1)[1].split(" reads it")[0]
    assert read_table(shlex.split(flag)[0]).summary.endswith("wine.csv.gz gzip-compressed")


@pytest.mark.parametrize("layout", ["semicolons", "semicolons, Excel's line", "tabs", "tabs, Excel's line", "semicolons, no decimals"])
def test_a_file_separated_by_semicolons_or_tabs_reads_as_its_comma_twin(tmp_path, layout):
    """A spreadsheet under German, French, ... settings saves its CSV separated by semicolons and writes 1,5 for 1.5
    (Excel adds `sep=;` on request); R and pandas write tabs.  Each was refused ("save it as CSV with commas", which such
    a spreadsheet cannot do without changing the system's settings); now read as the comma file with the same cells,
    which the summary says."""
    rows = _blobs()
    if layout.endswith("no decimals"):
        rows = [[str(round(float(c))) for c in r[:4]] + [r[4]] for r in rows]
    plain = read_table(str(_write(tmp_path / "plain.csv", HEADER, rows)))
    sep = ";" if layout.startswith("semicolons") else "\t"
    decimal = sep == ";" and not layout.endswith("no decimals")
    path = tmp_path / "other.csv"
    with open(path, "w", newline="") as f:
        if "Excel" in layout:
            f.write(f"sep={sep}\n")
        w = csv.writer(f, delimiter=sep)
        w.writerow(HEADER)
        w.writerows([[c.replace(".", ",") if decimal else c for c in r[:4]] + [r[4]] for r in rows])
    if decimal:
        assert "," in path.read_text()
    t = read_table(str(path))
    assert np.array_equal(t.x, plain.x) and np.array_equal(t.y, plain.y) and t.features == plain.features
    said = f"other.csv separated by {'semicolons' if sep == ';' else 'tabs'}" + (", decimal commas read as points" if decimal else "")
    assert t.summary == f"{plain.summary}; {said}"


def test_the_separator_is_the_one_that_splits_every_line_alike(tmp_path):
    """A semicolon file whose header names 'Preis, EUR' splits at commas into two cells a line as well (each row's
    decimal comma): the separator that gives every line the same, larger number of cells wins.  A comma file whose
    text cells hold semicolons stays a comma file; a ragged semicolon file is said by its line."""
    rows = [[f"{i % 7},{i % 3}", str(i % 5), "ab"[i % 2]] for i in range(40)]
    path = tmp_path / "preise.csv"
    path.write_text("Preis, EUR;Menge;Klasse\n" + "".join(";".join(r) + "\n" for r in rows))
    t = read_table(str(path))
    assert t.features == ["Preis, EUR", "Menge"] and t.summary.endswith("preise.csv separated by semicolons, decimal commas read as points")
    assert t.x[1, 0] == pytest.approx(1.1) and len(t.y) == 40
    tags = _write(tmp_path / "tags.csv", ["x", "tags", "label"], [[str(i % 4), "a;b" if i % 3 else "c;d", "ab"[i % 2]] for i in range(40)])
    assert read_table(str(tags)).categories == {"tags": ["a;b", "c;d"]}
    path.write_text("Preis;Menge;Klasse\n1,5;2;a\n2,5;3\n")
    with pytest.raises(DataError, match="line 3: 2 columns; expected 3, as the header has"):
        read_table(str(path))


@pytest.mark.parametrize("sep", ["sep=,", '"sep=,"', "sep=,\r"])
def test_excels_separator_line_is_read_where_it_names_commas(tmp_path, sep):
    rows = _blobs()
    plain = read_table(str(_write(tmp_path / "plain.csv", HEADER, rows)))
    path = tmp_path / "excel.csv"
    path.write_text(sep + "\n" + (tmp_path / "plain.csv").read_text())
    t = read_table(str(path))
    assert np.array_equal(t.x, plain.x) and np.array_equal(t.y, plain.y) and t.summary == plain.summary


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
    rows = _blobs(n_per_class=40)
    pair = _pair(tmp_path / "pair", rows[:90], rows[90:])
    check_fusable(TrainConfig(task="table", model="fixed", data_root=str(pair)))
    result = train(TrainConfig(task="table", model="fixed", epochs=2, data_root=str(pair), batch_size=16))
    assert result.status == "ok" and 0.0 <= result.test_acc <= 1.0  # the outer split (the default): scored on test.csv's rows


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
    # the same rows as a train.csv/test.csv pair: other data (another test part), another comparison
    pair = _pair(tmp_path / "pair", rows[:40], rows[40:])
    split = cmp(pair)
    assert split.key not in (first.key, cmp(a).key) and split._search_options()[Param.DATA_DIGEST] == read_table(str(pair)).digest
    assert split.data_summary.startswith("60 rows (40 in train.csv, 20 in test.csv: the test part as given)")


def _pair(folder, train_rows, test_rows, header=HEADER, test_header=None):
    folder.mkdir()
    _write(folder / "train.csv", header, train_rows)
    _write(folder / "test.csv", test_header or header, test_rows)
    return folder


def test_a_train_test_pair_keeps_its_test_part_and_splits_the_training_file_70_10(tmp_path):
    """A folder with train.csv and test.csv (as many benchmarks ship): test.csv is the outer test part as given, train.csv
    the outer training and validation parts (87.5/12.5: 70:10, as the 70/10/20 split's) and the inner 90/10."""
    rows = _blobs(n_per_class=40)
    pair = _pair(tmp_path / "Blobs v2", rows[:90], rows[90:])
    assert table_files(str(pair)) == (str(pair / "train.csv"), str(pair / "test.csv"))
    t = read_table(str(pair))
    one = read_table(str(_write(tmp_path / "all.csv", HEADER, rows)))  # the same rows in one file
    assert np.array_equal(t.x, one.x) and np.array_equal(t.y, one.y) and t.classes == one.classes
    assert (t.n_test, t.name, t.path) == (30, "blobs_v2", str(pair))
    counts = ", ".join(f"{c} ({int((t.y == k).sum())})" for k, c in enumerate(t.classes))
    assert t.summary == f"120 rows (90 in train.csv, 30 in test.csv: the test part as given); 4 features from 4 columns (4 numeric); 3 classes: {counts}"
    task = load_task("table", str(pair), data_seed=3)
    assert task.outer.test.tolist() == list(range(90, 120))
    assert sorted([*task.outer.train, *task.outer.val]) == list(range(90)) and len(task.outer.val) == round(0.125 * 90)
    assert sorted([*task.inner.train, *task.inner.val]) == list(range(90)) and len(task.inner.val) == 9
    y = task.label_array()
    for part in (task.outer.train, task.outer.val, task.inner.train, task.inner.val):
        assert set(y[part]) == {0, 1, 2}  # stratified within train.csv
    x = task.x.numpy()
    np.testing.assert_allclose(x[task.outer.train].mean(0), 0.0, atol=1e-5)  # standardised on the outer training part
    assert not np.array_equal(load_task("table", str(pair), data_seed=4).outer.train, task.outer.train)
    # train.csv named alone is one file, split 70/10/20
    alone = load_task("table", str(pair / "train.csv"))
    assert len(alone.y) == 90 and len(alone.outer.test) == 18


def test_a_pairs_digest_covers_both_files_and_not_the_folder(tmp_path):
    rows = _blobs(n_per_class=40)
    a = read_table(str(_pair(tmp_path / "a", rows[:90], rows[90:])))
    assert read_table(str(_pair(tmp_path / "b", rows[:90], rows[90:]))).digest == a.digest
    rows[100][0] = repr(float(rows[100][0]) + 1e-3)  # a test row
    edited = _pair(tmp_path / "c", rows[:90], rows[90:])
    assert read_table(str(edited)).digest != a.digest
    task = load_task("table", str(tmp_path / "a"))
    with pytest.raises(DataError, match="SHA-256"):  # a node whose test.csv differs: the trial refuses it
        check_data_copy(load_task("table", str(edited)), {"data_root": str(edited), "data_digest": task.data_digest})


def test_a_category_only_the_test_file_holds_is_a_feature_zero_in_training(tmp_path):
    train = [[f"{i % 5}", ["red", "blue"][i % 2], "yes" if i % 3 else "no"] for i in range(60)]
    test = [["1", "green", "yes"], ["2", "red", "no"], ["3", "blue", "yes"]]
    t = read_table(str(_pair(tmp_path / "p", train, test, header=["n", "colour", "bought"])))
    assert t.features == ["n", "colour=blue", "colour=green", "colour=red"]
    assert t.x[:60, 2].sum() == 0 and t.x[60:, 2].tolist() == [1.0, 0.0, 0.0]


def _pair_rows():
    rows = _blobs(n_per_class=40)
    return rows[:90], rows[90:]


BAD_PAIRS = {
    # name: (train rows, test rows, test header, which file the line starts with, what it must say)
    "a test file without labels (a competition's)": (
        lambda tr, te: (tr, [r[:-1] for r in te], HEADER[:-1]), "test.csv", ["line 1", "no class column 'class'", "cannot be scored"]),
    "a renamed column": (lambda tr, te: (tr, te, ["f1", "f2", "F3", "f4", "class"]), "test.csv",
                         ["line 1, column 3: 'F3'; expected 'f3'", "the same columns in the same order"]),
    "another column count": (lambda tr, te: (tr, [r + ["0"] for r in te], HEADER + ["extra"]), "test.csv", ["line 1", "6 columns; expected 5"]),
    "a class train.csv lacks": (lambda tr, te: (tr, te[:5] + [te[5][:-1] + ["d"]] + te[6:], HEADER), "test.csv",
                                ["line 7, column 5 ('class'): class 'd' is not among", "train.csv's classes ('a', 'b', 'c')"]),
    "a class written otherwise (adult.test's '>50K.')": (
        lambda tr, te: (tr, te[:1] + [te[1][:-1] + [" B."]] + te[2:], HEADER), "test.csv",
        ["line 3, column 5 ('class'): class 'B.' is not among", "differs from 'b' only in case, spaces or punctuation"]),
    "a class as another number (pandas' '1.0' for '1')": (
        lambda tr, te: ([[*r[:-1], {"a": "1", "b": "2", "c": "3"}[r[-1]]] for r in tr],
                        [[*r[:-1], {"a": "1.0", "b": "2", "c": "3"}[r[-1]]] for r in te], HEADER), "test.csv",
        ["column 5 ('class'): class '1.0' is not among", "it is the number '1' written otherwise"]),
    "a bad cell in test.csv": (lambda tr, te: (tr, te[:2] + [["twelve"] + te[2][1:]] + te[3:], HEADER), "test.csv",
                               ["line 4, column 1 ('f1'): 'twelve'; expected a finite number"]),
    "too few of a class in train.csv": (lambda tr, te: ([r for r in tr if r[-1] != "c"][:60] + [r for r in tr if r[-1] == "c"][:4],
                                                         te + [r for r in tr if r[-1] == "c"][4:], HEADER), "train.csv",
                                        ["too few rows of class 'c': 4", "training/validation and 90/10 (of train.csv)"]),
}


@pytest.mark.parametrize("name", list(BAD_PAIRS))
def test_every_bad_pair_is_one_line_naming_the_file_and_where(tmp_path, name):
    make, file, says = BAD_PAIRS[name]
    train, test, test_header = make(*_pair_rows())
    pair = _pair(tmp_path / "p", train, test, test_header=test_header)
    with pytest.raises(DataError) as e:
        load_task("table", str(pair))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(pair / file)), msg
    for part in says:
        assert part in msg, msg


@pytest.mark.parametrize("folder", ["my data", "Bob's files", "a;b $x"])
@pytest.mark.parametrize("present", [["wine.csv"], ["table.csv", "train.csv", "test.csv"]])
def test_the_data_root_an_error_suggests_reads_the_data_as_the_shell_hands_it_back(tmp_path, folder, present):
    """A folder name with a space, a quote or shell syntax: the `--data-root` the line suggests is quoted for the shell
    (until now 'my data/wine.csv' was pasted as two words), and pasted back it reads the file."""
    import shlex

    root = tmp_path / folder
    root.mkdir()
    for f in present:
        _write(root / f, HEADER, _blobs())
    with pytest.raises(DataError) as e:
        read_table(str(root))
    words = shlex.split(str(e.value).split("--data-root ", 1)[1])
    assert words[0] == str(root / present[0]) and words[1] == "reads", str(e.value)
    assert read_table(words[0]).path == str(root / present[0])


@pytest.mark.parametrize("present, says", [
    (["train.csv"], "expected test.csv beside train.csv in {d} (missing); a folder holds table.csv (split 70/10/20 here), or train.csv and test.csv"),
    (["test.csv"], "expected train.csv beside test.csv in {d} (missing)"),
    (["table.csv", "train.csv"], "{d} holds both table.csv and train.csv; expected one layout: --data-root {d}/table.csv reads table.csv alone"),
])
def test_half_a_pair_or_both_layouts_say_what_a_folder_holds(tmp_path, present, says):
    for f in present:
        _write(tmp_path / f, HEADER, _blobs())
    with pytest.raises(DataError) as e:
        read_table(str(tmp_path))
    assert says.format(d=tmp_path) in str(e.value), str(e.value)


@pytest.mark.parametrize("ids, refused", [
    ("1..n in row order", True), ("0..n-1 in row order, a text label", True), ("shuffled", False),
    ("a step of 2", False), ("repeats", False), ("in order, fewer than 20 rows of test.csv", False)])
def test_a_column_that_numbers_the_rows_is_refused_as_an_id(tmp_path, ids, refused):
    """A `PassengerId` (each row's position in the file) is no feature, and where the rows are in class order it gives the
    class away; the same integers in another order, or another sequence, are a feature like any."""
    n = 40
    values = {"1..n in row order": list(range(1, n + 1)), "0..n-1 in row order, a text label": list(range(n)),
              "shuffled": list(np.random.default_rng(0).permutation(n) + 1), "a step of 2": list(range(0, 2 * n, 2)),
              "repeats": [i // 2 for i in range(n)], "in order, fewer than 20 rows of test.csv": [7] * n}[ids]
    rows = [[str(v), f"{(i * 7919) % 13 / 3:.3f}", "ab"[i >= n // 2]] for i, v in enumerate(values)]
    if ids.endswith("test.csv"):
        path = _pair(tmp_path / "p", rows, [[str(100 + i), "0.5", "ab"[i % 2]] for i in range(19)], header=["PassengerId", "x", "y"])
    else:
        path = _write(tmp_path / "t.csv", ["PassengerId", "x", "y"], rows)
    if not refused:
        assert read_table(str(path)).features == ["PassengerId", "x"]
        return
    with pytest.raises(DataError) as e:
        read_table(str(path))
    first = values[0]
    assert str(e.value).startswith(f"{path}, column 1 ('PassengerId'): {first}, {first + 1}, ..., {first + n - 1}, the row's position")
    assert "an id" in str(e.value) and "drop the column" in str(e.value)


def test_ids_that_number_test_csvs_rows_are_refused_naming_test_csv(tmp_path):
    train = [[str(v), f"{i % 5}", "ab"[i % 2]] for i, v in enumerate(np.random.default_rng(1).permutation(60) + 1)]
    test = [[str(61 + i), f"{i % 5}", "ab"[i % 2]] for i in range(25)]  # Kaggle's test.csv goes on numbering in order
    pair = _pair(tmp_path / "p", train, test, header=["PassengerId", "x", "y"])
    with pytest.raises(DataError, match=r"^" + str(pair / "test.csv").replace("\\", "\\\\") + r", column 1 \('PassengerId'\): 61, 62, \.\.\., 85, "):
        read_table(str(pair))


@pytest.mark.parametrize("header", [["age", "workclass", "income"], ["0", "1", "target"], ["39", "State-gov", "income"],
                                    ["age", "Private", "<=50K"]])
def test_a_header_is_read_as_names_unless_it_reads_as_an_example(tmp_path, header):
    """Only a first row whose last cell is a class below and whose feature cells mostly fit their columns is taken for an
    example (a file without a header); pandas' default names 0, 1, ... and a label column named otherwise are names."""
    rows = [[f"{20 + (7 * i) % 30}", ["Private", "State-gov"][i % 2], ["<=50K", ">50K"][i % 2]] for i in range(30)]
    path = _write(tmp_path / "t.csv", header, rows)
    if header[-1] == "<=50K" and header[1] == "Private":  # 1 of 2 feature cells fits: half, so an example
        with pytest.raises(DataError, match="reads as an example, not a header: its last cell '<=50K'.* 1 of its 2 feature cells"):
            read_table(str(path))
        return
    t = read_table(str(path))
    assert t.features[0] == header[0] and len(t.y) == 30


def test_missing_cells_in_a_numeric_column_are_the_training_mean_with_an_indicator_feature(tmp_path):
    """Real tables have gaps (Titanic's Age: 177 of 891), written '' (pandas), 'NA' (R), '?' (UCI) or 'nan' (numpy):
    a numeric column's gap is NaN in the table, the outer training part's mean once standardised, and a feature
    `name (missing)` says which rows were filled; a text column's empty cell is the category '(missing)'."""
    rows = []
    for i in range(40):
        age = ["", "NA", "?", "nan", "N/A"][i // 8] if i % 8 == 0 else f"{20 + (i * 7) % 31}"
        rows.append([age, ["S", "C", "", "?"][i % 4], f"{(i * 13) % 17 / 4:.2f}", "ab"[i % 2]])
    path = _write(tmp_path / "t.csv", ["age", "port", "fare", "survived"], rows)
    t = read_table(str(path))
    assert t.features == ["age", "age (missing)", "port=(missing)", "port=?", "port=C", "port=S", "fare"]
    assert t.missing == {"age": 5}
    gaps = np.array([i % 8 == 0 for i in range(40)])
    assert np.isnan(t.x[:, 0]).tolist() == gaps.tolist() and t.x[:, 1].tolist() == gaps.astype(float).tolist()
    assert t.x[2, 2] == 1.0 and t.x[3, 3] == 1.0  # '' is '(missing)', '?' a category as written
    assert t.summary == ("40 rows; 7 features from 3 columns (2 numeric, 1 text one-hot into 4); 2 classes: a (20), b (20); "
                         "missing cells in 1 numeric column (age 5): the training mean, and an indicator feature each")
    task = load_task("table", str(path))
    x, train = task.x.numpy(), task.outer.train
    seen = train[~gaps[train]]
    np.testing.assert_allclose(x[seen, 0].mean(), 0.0, atol=1e-5)  # the stats of the cells the training part has
    np.testing.assert_allclose(x[seen, 0].std(), 1.0, atol=1e-4)
    np.testing.assert_allclose(x[gaps, 0], 0.0)  # filled with that mean
    assert not np.isnan(x).any()


def test_a_gap_only_test_csv_has_is_a_feature_too(tmp_path):
    rows = _blobs(n_per_class=40)
    test = [r[:] for r in rows[90:]]
    test[4][1] = ""
    t = read_table(str(_pair(tmp_path / "p", rows[:90], test)))
    assert t.features == ["f1", "f2", "f2 (missing)", "f3", "f4"] and t.missing == {"f2": 1}
    assert t.x[:90, 2].sum() == 0 and t.x[94, 2] == 1.0


def test_test_csv_rows_that_repeat_a_train_csv_row_are_counted_in_the_summary(tmp_path):
    """A pair whose test.csv repeats training rows scores them as if unseen: the summary says how many (not refused:
    tables of a few discrete features repeat rows honestly)."""
    rows = _blobs(n_per_class=40)
    clean = read_table(str(_pair(tmp_path / "a", rows[:90], rows[90:])))
    assert clean.repeats == 0 and "repeat" not in clean.summary
    leaky = read_table(str(_pair(tmp_path / "b", rows[:90], rows[90:] + [r[:] for r in rows[5:8]] + [[" " + rows[9][0]] + rows[9][1:]])))
    assert leaky.repeats == 4 and leaky.summary.endswith("; 4 of test.csv's rows repeat a train.csv row cell for cell: not unseen examples")


def test_pandas_default_column_names_are_names_even_where_the_last_is_a_class(tmp_path):
    """`pd.DataFrame(np.c_[X, y]).to_csv(index=False)` names the columns 0, 1, ..., k: a header of numbers, and with 2
    features and classes 0, 1, 2 the label column's name `2` is a class, yet the row is no example."""
    rows = [[f"{(i * 7) % 11 / 3:.3f}", f"{(i * 5) % 13 / 7:.3f}", str(i % 3)] for i in range(60)]
    t = read_table(str(_write(tmp_path / "t.csv", ["0", "1", "2"], rows)))
    assert t.features == ["0", "1"] and t.classes == ["0", "1", "2"] and len(t.y) == 60
    assert read_table(str(_write(tmp_path / "r.csv", ["1", "2", "3"], [r[:2] + ["abc"[int(r[2])]] for r in rows]))).features == ["1", "2"]
    with pytest.raises(DataError, match="every cell is a number"):  # the same rows with a first example instead of the names
        read_table(str(_write(tmp_path / "u.csv", ["0.5", "1.25", "2"], rows)))
    with pytest.raises(DataError, match="reads as an example"):
        read_table(str(_write(tmp_path / "v.csv", ["0.5", "1.25", "c"], [r[:2] + ["abc"[int(r[2])]] for r in rows])))


def _label_first(rows):
    """The rows with their class label moved from the last column to the first (Titanic's `Survived` is its 2nd)."""
    return [[r[-1], *r[:-1]] for r in rows]


LABEL_FIRST = ["class", "f1", "f2", "f3", "f4"]


def test_label_names_the_class_column_anywhere_and_reads_the_table_the_last_column_would(tmp_path):
    """--label NAME: the class label is the named column, the others are the features in their order; the same data with
    the label last reads alike.  Its digest names the column (the same bytes with another label are another task); naming
    the last column is the default, digest included."""
    rows = _blobs()
    last = read_table(str(_write(tmp_path / "last.csv", HEADER, rows)))
    path = _write(tmp_path / "first.csv", LABEL_FIRST, _label_first(rows))
    t = read_table(str(path), "class")
    assert np.array_equal(t.x, last.x) and np.array_equal(t.y, last.y) and t.classes == last.classes == ["a", "b", "c"]
    assert t.features == ["f1", "f2", "f3", "f4"] and t.label == "class"
    assert "3 classes in column 'class': a (20), b (20), c (20)" in t.summary
    assert t.digest != hashlib.sha256(path.read_bytes()).hexdigest()[:16]  # (the file's bytes and the label's name)
    # in the middle: the features keep their order around it
    mid = _write(tmp_path / "mid.csv", ["f1", "f2", "class", "f3", "f4"], [[*r[:2], r[-1], *r[2:4]] for r in rows])
    m = read_table(str(mid), "class")
    assert np.array_equal(m.x, last.x) and np.array_equal(m.y, last.y) and m.features == ["f1", "f2", "f3", "f4"]
    # the last column named: the default, the same digest and summary
    named = read_table(str(tmp_path / "last.csv"), "class")
    assert (named.digest, named.summary, named.label) == (last.digest, last.summary, "")
    # the task, through a trial's config (TrainConfig.label), and the config's params show it for task table only
    task = load_task("table", str(path), config=TrainConfig(task="table", data_root=str(path), label="class"))
    assert (task.in_features, task.num_classes, task.data_digest) == (4, 3, t.digest)
    assert TrainConfig(task="table", label="class").applicable("tabular")["label"] == "class"
    assert "label" not in TrainConfig(task="spiralhard").applicable("tabular")


def test_label_with_another_column_is_another_digest_and_a_trial_without_it_is_refused(tmp_path):
    """The same file read with another class column is another task: its digest differs, so a node that read it
    without the driver's --label fails the trial's data check instead of training on the wrong class."""
    rows = [[*r[:-1], r[-1], "x" if i % 2 else "y"] for i, r in enumerate(_blobs())]
    path = _write(tmp_path / "two.csv", [*HEADER, "other"], rows)
    by_class, by_other = read_table(str(path), "class"), read_table(str(path))
    assert by_class.digest != by_other.digest and by_other.classes == ["x", "y"] and by_class.classes == ["a", "b", "c"]
    task = load_task("table", str(path))  # no label: the last column, `other`
    with pytest.raises(DataError, match="is not the comparison's"):
        check_data_copy(task, {"data_root": str(path), "data_digest": by_class.digest})


@pytest.mark.parametrize("label, says", [
    ("Class", "no column named 'Class' (--label) (did you mean 'class'?)"),
    ("clas", "no column named 'clas' (--label) (did you mean 'class'?)"),
    ("target", "no column named 'target' (--label); expected the name of the class label's column, as the header writes it: "
               "'class', 'f1', 'f2', 'f3', 'f4'"),
])
def test_a_label_the_header_lacks_is_one_line_naming_the_columns(tmp_path, label, says):
    path = _write(tmp_path / "first.csv", LABEL_FIRST, _label_first(_blobs()))
    with pytest.raises(DataError) as e:
        read_table(str(path), label)
    assert str(e.value).startswith(f"{path}, line 1: ") and says in str(e.value) and "\n" not in str(e.value)


def test_errors_about_a_named_label_name_its_column_in_the_file(tmp_path):
    rows = _label_first(_blobs())
    rows[5][0] = ""
    path = _write(tmp_path / "first.csv", LABEL_FIRST, rows)
    with pytest.raises(DataError) as e:
        read_table(str(path), "class")
    assert str(e.value) == f"{path}, line 7, column 1 ('class'): an empty class label (the class label's column, --label class)"
    rows = _label_first(_blobs())
    rows[3][2] = "oops"  # f2, the file's 3rd column
    path = _write(tmp_path / "first.csv", LABEL_FIRST, rows)
    with pytest.raises(DataError, match=r"line 5, column 3 \('f2'\): 'oops'; expected a finite number"):
        read_table(str(path), "class")
    one = _write(tmp_path / "one.csv", LABEL_FIRST, [["a", *r[1:]] for r in _label_first(_blobs())])
    with pytest.raises(DataError, match=r"one class \('a'\) in column 1 \('class'\); expected at least 2 classes \(the class label's column, --label class\)"):
        read_table(str(one), "class")


def test_a_pair_with_a_named_label_and_a_test_file_without_it(tmp_path):
    rows = _label_first(_blobs(n_per_class=40))
    pair = _pair(tmp_path / "pair", rows[:90], rows[90:], header=LABEL_FIRST)
    t = read_table(str(pair), "class")
    assert (len(t.y), t.n_test, t.label, t.features) == (120, 30, "class", ["f1", "f2", "f3", "f4"])
    assert t.digest != files_digest_of(pair)  # (the pair's bytes and the label's name)
    (pair / "test.csv").unlink()
    _write(pair / "test.csv", LABEL_FIRST[1:], [r[1:] for r in rows[90:]])  # a competition's: the labels kept back
    with pytest.raises(DataError) as e:
        read_table(str(pair), "class")
    assert str(e.value) == (f"{pair / 'test.csv'}, line 1: no class column 'class' (the header is {pair / 'train.csv'}'s without its "
                            "class column (column 1)); expected the test examples with their labels: a model cannot be scored without them")


def files_digest_of(folder):
    from awnn.data.digest import files_digest

    return files_digest(str(folder), ["train.csv", "test.csv"])


def test_label_is_a_key_of_task_table_only(tmp_path):
    from awnn.config import ConfigError

    for key in ("label", "drop_columns"):
        with pytest.raises(ConfigError, match=f"key '{key}': expected '' \\(a CSV file's columns are named only for task table"):
            TrainConfig.from_dict({"task": "spiralhard", key: "class"})
    with pytest.raises(ConfigError, match="key 'drop_columns': expected column names separated by commas \\(a name with a comma in double quotes.*"
                       "this one has an empty column name \\(item 2 of 3"):
        TrainConfig.from_dict({"task": "table", "drop_columns": "a,,b"})
    with pytest.raises(ConfigError, match="key 'label': expected a column name as the CSV header writes it"):
        TrainConfig.from_dict({"task": "table", "label": " class"})
    assert TrainConfig.from_dict({"task": "table", "label": "class"}).label == "class"


def test_another_label_is_another_comparison_and_naming_the_last_is_the_default(tmp_path):
    """The --resume key follows the label: the same file with another class column never resumes the other's trials."""
    from search.sweep import Comparison
    from search.tune import RunSettings
    from tracking.contract import Param

    rows = [[*r[:-1], r[-1], "x" if i % 2 else "y"] for i, r in enumerate(_blobs())]
    path = _write(tmp_path / "two.csv", [*HEADER, "other"], rows)

    def cmp(label):
        return Comparison("table", ["fixed", "awnn"], "smoke", RunSettings(storage=str(tmp_path / "results")),
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", data_root=str(path), table_options={"label": label})

    default, last, named = cmp(None), cmp("other"), cmp("class")
    assert default.key == last.key != named.key
    assert named._search_options()[Param.DATA_DIGEST] == read_table(str(path), "class").digest
    assert named.data_summary.endswith("3 classes in column 'class': a (20), b (20), c (20)")


def test_trailing_empty_columns_are_left_out_and_classes_written_alike_are_named(tmp_path):
    """A comma ending every line (spreadsheets' export) makes columns with no name and no cell: they hold nothing and are
    left out, said in the summary; classes that differ only in case, spaces or punctuation ('Yes', 'yes') are kept
    apart (EMNIST's 'a' and 'A' are two) but named in the summary."""
    rows = _blobs()
    plain = read_table(str(_write(tmp_path / "plain.csv", HEADER, rows)))
    path = tmp_path / "export.csv"
    path.write_text(",".join(HEADER) + ",,\n" + "".join(",".join(r) + ",,\n" for r in rows))
    t = read_table(str(path))
    assert np.array_equal(t.x, plain.x) and np.array_equal(t.y, plain.y) and t.features == plain.features
    assert t.summary == plain.summary + "; 2 trailing columns with no name and no cell left out"
    pair = _pair(tmp_path / "pair", rows[:40], rows[40:])
    (pair / "train.csv").write_text(",".join(HEADER) + ",\n" + "".join(",".join(r) + ",\n" for r in rows[:40]))
    assert read_table(str(pair)).n_test == 20  # (test.csv without the trailing comma: the same header)
    mixed = [[*r[:-1], {"a": "Yes", "b": "yes"}.get(r[-1], r[-1])] for r in rows]
    t = read_table(str(_write(tmp_path / "case.csv", HEADER, mixed)))
    assert t.classes == ["Yes", "c", "yes"] and t.alike == [["Yes", "yes"]]
    assert t.summary.endswith("; classes 'Yes' and 'yes' differ only in case, spaces or punctuation: one class written two ways?")
    assert not plain.alike


def _titanic(n=120, seed=0):
    """Rows shaped as Kaggle's Titanic train.csv: an id, the class label second, a name and a ticket (free text), a cabin
    (sparse free text), numbers with gaps and categories."""
    rng = np.random.default_rng(seed)
    header = ["PassengerId", "Survived", "Pclass", "Name", "Sex", "Age", "Ticket", "Fare", "Cabin", "Embarked"]
    rows = []
    for i in range(n):
        s = int(rng.integers(0, 2))
        rows.append([str(i + 1), str(s), str(int(rng.integers(1, 4))), f"Passenger, Mr. No{i}", ["male", "female"][(s + i) % 2],
                     "" if i % 7 == 0 else f"{rng.uniform(1, 70):.0f}", f"A/{1000 + i}", f"{rng.uniform(5, 200):.2f}",
                     "" if i % 2 else f"C{i}", "SCQ"[i % 3]])
    return header, rows


def test_every_column_that_is_no_feature_is_named_at_once_and_drop_columns_leaves_them_out(tmp_path):
    """A Titanic file has four columns that are no features (an id, a name, a ticket, a cabin): one line names them all,
    with why, and the --drop-columns that leaves them out; with it the file reads, the summary says what was left out,
    and the digest names the columns (in any order given), so another choice is another comparison."""
    header, rows = _titanic()
    path = _write(tmp_path / "titanic.csv", header, rows)
    with pytest.raises(DataError) as e:
        read_table(str(path), "Survived")
    assert str(e.value) == (f"{path}: 4 columns are no features: 'PassengerId' (an id numbering the rows 1, 2, ..., 120); 'Name' "
                            "(120 distinct text values); 'Ticket' (120 distinct text values); 'Cabin' (61 distinct text values); drop them "
                            "from the file, or pass --drop-columns PassengerId,Name,Ticket,Cabin")
    t = read_table(str(path), "Survived", "PassengerId,Name,Ticket,Cabin")
    assert t.dropped == ["PassengerId", "Name", "Ticket", "Cabin"] and t.label == "Survived"
    assert t.features == ["Pclass", "Sex=female", "Sex=male", "Age", "Age (missing)", "Fare", "Embarked=C", "Embarked=Q", "Embarked=S"]
    assert "; 4 columns left out (--drop-columns): PassengerId, Name, Ticket, Cabin" in t.summary
    again = read_table(str(path), "Survived", " Cabin, Ticket,Name ,PassengerId")
    assert again.digest == t.digest and np.array_equal(again.x, t.x, equal_nan=True)
    # one left: its own line, and the flag with what was already given
    with pytest.raises(DataError) as e:
        read_table(str(path), "Survived", "Name,Ticket,Cabin")
    assert str(e.value).startswith(f"{path}, column 1 ('PassengerId'): 1, 2, ..., 120, the row's position in the file")
    assert str(e.value).endswith("drop the column, or pass --drop-columns Name,Ticket,Cabin,PassengerId")
    # a column that is a feature may be left out too: another task, another digest
    fewer = read_table(str(path), "Survived", "PassengerId,Name,Ticket,Cabin,Fare")
    assert "Fare" not in fewer.features and fewer.digest != t.digest
    # through a trial's config
    task = load_task("table", str(path), config=TrainConfig(task="table", data_root=str(path), label="Survived",
                                                             drop_columns="PassengerId,Name,Ticket,Cabin"))
    assert (task.in_features, task.num_classes, task.data_digest) == (9, 2, t.digest)


# header names the flag must carry: a comma, double quotes, a single quote, spaces, shell syntax, a leading quote, unicode
AWKWARD_NAMES = ["Name, full", 'Ticket "no"', "Cabin's deck", "Row id", "$HOME; echo x", '"quoted"', "Straße, Nr."]


@pytest.mark.parametrize("name", AWKWARD_NAMES)
def test_the_flag_a_no_feature_column_is_named_with_reads_the_file_as_the_shell_hands_it_back(tmp_path, name):
    """Every column name a CSV header can hold: the flag the error gives, split as a shell splits it, leaves those
    columns out (until now a name with a comma got a bare `--drop-columns`, and a name with a space a flag the shell
    split in two); the CLI, a trial's config and read_table agree on it, and the digest does not depend on the order."""
    import shlex

    from search.commands import column_option

    header, rows = _titanic()
    header = [name if c == "Name" else c for c in header]
    path = _write(tmp_path / "titanic.csv", header, rows)
    with pytest.raises(DataError) as e:
        read_table(str(path), "Survived")
    flag = str(e.value).rsplit(", or pass ", 1)[1]
    argv = shlex.split(flag)
    assert argv[0] == "--drop-columns" and len(argv) == 2, flag
    assert column_option("--drop-columns", argv[1]) == ["PassengerId", name, "Ticket", "Cabin"]
    t = read_table(str(path), "Survived", argv[1])
    assert t.dropped == ["PassengerId", name, "Ticket", "Cabin"]
    assert t.features[0] == "Pclass" and not any(f.startswith(name) for f in t.features)
    shown = repr(name) if "," in name else name  # (the summary's list: a name with a comma quoted)
    assert f"4 columns left out (--drop-columns): PassengerId, {shown}, Ticket, Cabin" in t.summary
    config = TrainConfig(task="table", data_root=str(path), label="Survived", drop_columns=argv[1])
    assert load_task("table", str(path), config=config).data_digest == t.digest
    shuffled = column_text(["Cabin", name, "Ticket", "PassengerId"])
    assert read_table(str(path), "Survived", shuffled).digest == t.digest


@pytest.mark.parametrize("drop, says", [
    ("Nme", "line 1: no column named 'Nme' (--drop-columns) (did you mean 'Name'?); expected the name of a column to leave out"),
    ("Name,Survived", "--drop-columns Survived: "),
    ("Pclass,Name,Sex,Age,Ticket,Fare,Cabin,Embarked,PassengerId", "leaves"),
    ("Name,,Ticket", "--drop-columns 'Name,,Ticket': an empty column name"),
    # written wrong (refused by the command line and a trial's config too, before any file is read)
    ('PassengerId,"Name, full', "a double quote that does not enclose a whole name"),
    ('"Name" full,PassengerId', "a double quote that does not enclose a whole name"),
    ("PassengerId,\nName", "more than one line"),
])
def test_bad_drop_columns_are_one_line(tmp_path, drop, says):
    from awnn.config import ConfigError
    from search.commands import column_option
    from search.errors import OptionError

    header, rows = _titanic()
    path = _write(tmp_path / "titanic.csv", header, rows)
    with pytest.raises(DataError) as e:
        read_table(str(path), "Survived", drop)
    msg = str(e.value)
    assert says in msg and ("\n" not in msg or "\n" in drop), msg
    if '"' in drop or "\n" in drop:
        assert "expected column names separated by commas (a name with a comma in double quotes" in msg
        with pytest.raises(OptionError, match=f"--drop-columns: {says}"):
            column_option("--drop-columns", drop)
        with pytest.raises(ConfigError, match="key 'drop_columns'"):
            TrainConfig(task="table", data_root=str(path), drop_columns=drop).validate()
    if "Survived" in drop:
        assert msg == (f"--drop-columns Survived: {path}'s column 2 ('Survived') is the class label's column; expected feature "
                       "columns to leave out")
    if says == "leaves":
        assert msg == f"--drop-columns {drop}: leaves {path} no feature column; expected at least one to keep"


def test_drop_columns_in_a_pair_leaves_them_out_of_both_files_and_keys_the_comparison(tmp_path):
    from search.sweep import Comparison
    from search.tune import RunSettings
    from tracking.contract import Param

    header, rows = _titanic(n=160)
    pair = tmp_path / "pair"
    pair.mkdir()
    _write(pair / "train.csv", header, rows[:120])
    _write(pair / "test.csv", header, rows[120:])
    t = read_table(str(pair), "Survived", "PassengerId,Name,Ticket,Cabin")
    assert (t.n_test, len(t.y), t.features[0]) == (40, 160, "Pclass")

    def cmp(**options):
        return Comparison("table", ["fixed", "awnn"], "smoke", RunSettings(storage=str(tmp_path / "results")),
                          tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", data_root=str(pair), table_options=options)

    a = cmp(label="Survived", drop_columns="PassengerId,Name,Ticket,Cabin")
    b = cmp(label="Survived", drop_columns="PassengerId,Name,Ticket,Cabin,Fare")
    assert a.key != b.key and a._search_options()[Param.DATA_DIGEST] == t.digest
    assert a.table_options == {"label": "Survived", "drop_columns": "PassengerId,Name,Ticket,Cabin"}
    assert cmp(label="Survived", drop_columns="Cabin,Ticket,Name,PassengerId").key == a.key


def test_a_resume_that_forgot_the_table_flags_names_the_unfinished_comparison_they_would_continue(tmp_path):
    """`--resume` finds no comparison with its arguments, but one on this file is unfinished under other --label /
    --drop-columns (otherwise the same command): the line that says a new one starts names it and its flags."""
    from mlflow.tracking import MlflowClient

    from search.sweep import Comparison
    from search.tune import RunSettings
    from tracking.contract import Param, Tag, experiment_name
    from tracking.store import init_tracking

    header, rows = _titanic()
    path = _write(tmp_path / "titanic.csv", header, rows)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)

    def cmp(strategies=("fixed", "awnn"), **options):
        return Comparison("table", list(strategies), "smoke", RunSettings(storage=str(tmp_path / "results")), tracking_uri=uri,
                          data_root=str(path), table_options=options)

    first = cmp(label="Survived", drop_columns="PassengerId,Name,Ticket,Cabin")
    client = MlflowClient(uri)
    exp = client.create_experiment(experiment_name("table"))
    run = client.create_run(exp, tags={Tag.KIND: "comparison", Tag.STATE: "interrupted", Tag.COMPARISON_KEY: first.key,
                                       Tag.COMPARISON: "table-titanic-1"})
    for k, v in {Param.DATA_ROOT: first.data_root, Param.LABEL: "Survived", Param.DROP_COLUMNS: "PassengerId,Name,Ticket,Cabin"}.items():
        client.log_param(run.info.run_id, k, v)
    other = cmp(label="Survived", drop_columns="PassengerId,Name,Ticket,Cabin,Fare")  # another choice of columns
    assert other._read_otherwise(client, exp) == (
        " (comparison table-titanic-1, unfinished, is this command on this file with --label Survived --drop-columns "
        "PassengerId,Name,Ticket,Cabin: run it so with --resume to continue that one instead)")
    assert first._read_otherwise(client, exp) == ""  # (its own flags: found by its key, not here)
    assert cmp(strategies=("fixed",), label="Survived", drop_columns="Name,Ticket,Cabin,PassengerId,Fare")._read_otherwise(client, exp) == ""
    client.set_tag(run.info.run_id, Tag.STATE, "finished")
    assert other._read_otherwise(client, exp) == ""


def test_a_class_written_as_a_missing_cell_is_named_in_the_summary(tmp_path):
    """UCI writes an unknown value '?': in the label column that is rows without a label, trained on as a class of their
    own unless dropped; kept (a class may be called 'None'), and said."""
    rows = [[*r[:-1], {"c": "?"}.get(r[-1], r[-1])] for r in _blobs()]
    t = read_table(str(_write(tmp_path / "q.csv", HEADER, rows)))
    assert t.classes == ["?", "a", "b"]
    assert "; class '?' is written as missing cells are: rows without a label? (kept as a class)" in t.summary
