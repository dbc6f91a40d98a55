"""tracking/_mlflow_speedups.py: a new SQLite store copied from a template MLflow made once is the store MLflow makes
itself; every case where it cannot apply falls back to MLflow's own path.  Real MLflow, real SQLite files."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tracking import _mlflow_speedups as speedups
from tracking.checks import place_store, prepare_store

ROOT = Path(__file__).resolve().parents[2]
TIMES = {"creation_time", "last_update_time"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(speedups.CACHE_ENV, str(folder))
    monkeypatch.delenv(speedups.SWITCH, raising=False)
    return folder


def _new_store(path: Path) -> None:
    uri = f"sqlite:///{path}"
    place_store(uri, prepare_store(uri))


_CONSTRAINT = ("CONSTRAINT ", "CHECK ", "CHECK(", "FOREIGN KEY", "PRIMARY KEY", "UNIQUE ")


def _table_sql(sql: str | None):
    """A CREATE statement with its table constraints as a set: MLflow itself writes them in an order that varies from
    one process to the next (two stores it made in two processes differ so), their columns in their order."""
    if not sql:
        return sql
    lines = [line.strip().rstrip(",").strip() for line in sql.splitlines()]
    return (tuple(line for line in lines if not line.startswith(_CONSTRAINT)),
            frozenset(line for line in lines if line.startswith(_CONSTRAINT)))


def _dump(path: Path) -> dict:
    """The store's schema and every row (experiments' times left out: they are the moment it was opened)."""
    con = sqlite3.connect(path)
    try:
        schema = sorted(((t, n, tn, _table_sql(sql)) for t, n, tn, sql in
                         con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")), key=repr)
        rows = {}
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"):
            cur = con.execute(f'SELECT * FROM "{table}"')
            cols = [d[0] for d in cur.description]
            rows[table] = sorted(tuple(v for c, v in zip(cols, r) if not (table == "experiments" and c in TIMES)) for r in cur)
        return {"schema": schema, "rows": rows}
    finally:
        con.close()


def _count_initializations(monkeypatch) -> list:
    """Calls of MLflow's real `_initialize_tables` (each still runs)."""
    from mlflow.store.db import utils

    calls: list = []
    real = utils._initialize_tables

    def counted(engine):
        calls.append(str(engine.url))
        return real(engine)

    monkeypatch.setattr(utils, "_initialize_tables", counted)
    return calls


def test_the_installed_mlflow_is_a_tested_one():
    """An upgrade of MLflow fails here until the template is checked against it (and TESTED_MLFLOW names it)."""
    import mlflow

    assert mlflow.__version__.startswith(speedups.TESTED_MLFLOW), mlflow.__version__
    assert speedups._initializer() is not None  # the private target is where it was


def test_a_store_from_the_template_is_the_store_mlflow_makes(cache, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (the Default experiment's artifact location comes from the working folder)
    monkeypatch.setenv(speedups.SWITCH, "0")
    _new_store(tmp_path / "mlflows.db")
    assert not cache.exists()  # switched off: no template
    monkeypatch.setenv(speedups.SWITCH, "1")
    _new_store(tmp_path / "copied.db")
    assert speedups.template_path().exists()
    ours, theirs = _dump(tmp_path / "copied.db"), _dump(tmp_path / "mlflows.db")
    assert ours["schema"] == theirs["schema"] and len(ours["schema"]) > 20
    assert ours["rows"] == theirs["rows"]
    assert ours["rows"]["alembic_version"] and len(ours["rows"]["experiments"]) == 1  # the revision; the Default experiment
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{tmp_path / 'copied.db'}")
    assert c.get_experiment("0").artifact_location == MlflowClient(f"sqlite:///{tmp_path / 'mlflows.db'}").get_experiment("0").artifact_location
    run = c.create_run(c.create_experiment("awnn-doublemoon"))
    c.log_metric(run.info.run_id, "val_acc", 0.5)
    assert c.get_run(run.info.run_id).data.metrics == {"val_acc": 0.5}


def test_mlflow_runs_its_migrations_once_for_the_template_and_not_for_the_stores_after_it(cache, tmp_path, monkeypatch):
    calls = _count_initializations(monkeypatch)
    for name in ("a.db", "b.db", "c.db"):
        _new_store(tmp_path / name)
    assert len(calls) == 1 and speedups.template_path().name in calls[0]
    assert sorted(f.name for f in speedups.template_path().parent.iterdir()) == [speedups.template_path().name]  # nothing left aside


def test_a_damaged_template_is_dropped_and_the_store_made_by_mlflow(cache, tmp_path, monkeypatch):
    _new_store(tmp_path / "first.db")
    template = speedups.template_path()
    template.write_bytes(b"not a database" * 100)
    calls = _count_initializations(monkeypatch)
    _new_store(tmp_path / "second.db")
    assert len(calls) == 1 and "second.db" in calls[0]  # MLflow made it itself
    assert not template.exists()  # remade by the next new store
    assert _dump(tmp_path / "second.db")["schema"] == _dump(tmp_path / "first.db")["schema"]
    _new_store(tmp_path / "third.db")
    assert template.exists() and len(calls) == 2


@pytest.mark.parametrize("where", ["a-file", "no-home"])
def test_a_cache_that_cannot_be_written_leaves_the_store_to_mlflow_without_an_error(tmp_path, monkeypatch, where, capfd):
    monkeypatch.delenv(speedups.SWITCH, raising=False)
    if where == "a-file":
        (tmp_path / "a-file").write_text("")
        monkeypatch.setenv(speedups.CACHE_ENV, str(tmp_path / "a-file"))  # (its folder cannot be made)
    else:
        monkeypatch.delenv(speedups.CACHE_ENV, raising=False)
        monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home directory"))))
    calls = _count_initializations(monkeypatch)
    _new_store(tmp_path / "s.db")
    assert len(calls) == 1 and "s.db" in calls[0]
    assert _dump(tmp_path / "s.db")["rows"]["experiments"]
    assert capfd.readouterr().err == ""


def test_an_untested_mlflow_version_makes_its_stores_itself_and_says_so_once(cache, tmp_path, monkeypatch, capfd):
    import mlflow

    monkeypatch.setattr(mlflow, "__version__", "9.0.0")
    monkeypatch.setattr(speedups, "_warned", [])
    assert not speedups.enabled()
    _new_store(tmp_path / "a.db")
    _new_store(tmp_path / "b.db")
    err = capfd.readouterr().err
    assert err.count("MLflow 9.0.0 is not one the store speed-up was tested with") == 1, err
    assert not cache.exists()


def test_drivers_making_new_stores_at_once_make_one_template_and_leave_nothing_aside(cache, tmp_path):
    """Three processes (MLflow's migrations cannot run in two threads of one process, with or without the template)
    started together, each making a store: every store whole, one template, nothing left aside."""
    code = ("import sys, time\nfrom tracking.checks import prepare_store, place_store\n"
            "while time.time() < float(sys.argv[2]): time.sleep(0.001)\n"
            "u = 'sqlite:///' + sys.argv[1]\nplace_store(u, prepare_store(u))\n")
    start = time.time() + 4  # (past the imports: the three make it at the same moment)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / f"s{i}.db"), str(start)], env=env,
                              stderr=subprocess.PIPE, text=True) for i in range(3)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errs
    assert sorted(f.name for f in cache.joinpath("awnn").iterdir()) == [speedups.template_path().name]
    for i in range(3):
        assert _dump(tmp_path / f"s{i}.db")["rows"]["experiments"]
    assert not [f.name for f in tmp_path.iterdir() if f.name.endswith(".new")]


def test_a_template_left_half_made_by_a_killed_process_is_removed(cache, tmp_path):
    """A process killed while it made the template (a real one, SIGKILLed) leaves its file aside; the next one removes it."""
    template = speedups.template_path()
    template.parent.mkdir(parents=True)
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        aside = template.parent / f".{template.name}.{p.pid}-1.new"
        aside.write_bytes(b"half")
    finally:
        p.kill()
        p.wait()
    live = template.parent / f".{template.name}.{os.getpid()}-{threading.get_ident() + 1}.new"  # (this process: still making it)
    live.write_bytes(b"half")
    _new_store(tmp_path / "s.db")
    assert not aside.exists() and live.exists() and template.exists()
