"""The session's new store that tests copy (tests/stores.py) is the store the product makes, and only a command's
own plain SQLite file gets a copy."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import stores


def _schema(db: Path) -> tuple[list, list]:
    con = sqlite3.connect(db)
    try:
        tables = sorted(con.execute("select type, name, sql from sqlite_master where name not like 'sqlite_%'"))
        revision = con.execute("select version_num from alembic_version").fetchall()
    finally:
        con.close()
    return tables, revision


def test_the_copied_store_is_the_one_the_product_makes(tmp_path, _mlflow_store_template):
    if _mlflow_store_template is None:
        pytest.skip(f"{stores.SWITCH}=0: no template this session")
    made = stores.build_template(tmp_path)  # the product's init_tracking on a new file, now
    assert _schema(Path(made["db"])) == _schema(_mlflow_store_template)
    copy = tmp_path / "sub" / "mlflow.db"
    copy.parent.mkdir()
    assert stores.seed(copy) and copy.read_bytes() == _mlflow_store_template.read_bytes()
    assert not stores.seed(copy)  # a store already there is left as it is
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{copy}")
    exp = client.create_experiment("x")
    run = client.create_run(exp)
    client.log_metric(run.info.run_id, "m", 1.5)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 1.5}


@pytest.mark.parametrize("args,env,expected", [
    (["compare"], None, "mlflow.db"),
    (["compare", "--tracking-uri", "sqlite:///a/b.db"], None, "a/b.db"),
    (["compare", "--tracking-uri=sqlite:///c.db"], None, "c.db"),
    (["compare"], {"MLFLOW_TRACKING_URI": "sqlite:///e.db"}, "e.db"),
    (["compare", "--tracking-uri", "sqlite:////abs/s.db"], None, "/abs/s.db"),
    (["compare", "--tracking-uri", "http://127.0.0.1:5000"], None, None),
    (["compare", "--tracking-uri", "sqlite:///q.db?timeout=30"], None, None),
    (["compare", "--tracking-uri", "sqlite:///:memory:"], None, None),
    (["compare", "--tracking-uri", "postgresql://u@h/db"], None, None),
])
def test_the_store_a_command_will_use_is_read_from_its_arguments(tmp_path, args, env, expected):
    got = stores.store_path(args, tmp_path, env)
    assert got == (None if expected is None else tmp_path / expected)
