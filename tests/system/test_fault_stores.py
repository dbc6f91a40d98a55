"""Broken and shared tracking stores: a corrupt SQLite file (garbage bytes,
or a real store cut in half) is one line and exit 2 for every command that
opens it, before Ray starts; a read-only command never writes to a store;
drivers that open a new SQLite store at the same moment all succeed; a
driver killed while it makes a new store's schema leaves no store behind
(the schema is made in a file of its own, put in place whole)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, run_awnn
from machine import limit


def _one_line(p) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr[-3000:])
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.fixture(scope="module")
def half_store(tmp_path_factory):
    """A real MLflow SQLite store with a run in it, cut in half."""
    from mlflow.tracking import MlflowClient

    d = tmp_path_factory.mktemp("half")
    path = d / "whole.db"
    c = MlflowClient(f"sqlite:///{path}")
    exp = c.create_experiment("awnn-doublemoon")
    run = c.create_run(exp)
    for i in range(200):
        c.log_param(run.info.run_id, f"p{i}", "x" * 200)
    data = path.read_bytes()
    half = d / "half.db"
    half.write_bytes(data[: len(data) // 2])
    return half


@pytest.mark.fault
@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("kind", ["garbage", "cut-in-half"])
def test_fault_stores_corrupt_sqlite_is_one_line_for_every_command(tmp_path, half_store, command, kind):
    store = tmp_path / "mlflow.db"
    if kind == "garbage":
        store.write_bytes(os.urandom(4096))
    else:
        store.write_bytes(half_store.read_bytes())
    before = store.read_bytes()
    uri = f"sqlite:///{store}"
    args = {"compare": ["compare", "--task", "doublemoon", "--budget", "smoke", "--tracking-uri", uri],
            "report": ["report", "--tracking-uri", uri, "--out", str(tmp_path / "rep")]}[command]
    t0 = time.monotonic()
    p = run_awnn(args, cwd=tmp_path, timeout=120)
    line = _one_line(p)
    assert f"--tracking-uri {uri}: {store} is not an MLflow SQLite store: " in line, line
    assert ("file is not a database" in line) if kind == "garbage" else ("malformed" in line or "not a database" in line), line
    assert time.monotonic() - t0 < limit(60)  # before Ray starts
    assert store.read_bytes() == before  # untouched
    assert not (tmp_path / "awnn-results").exists() and not (tmp_path / "rep").exists()


@pytest.mark.fault
@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_store_of_another_mlflow_version_is_one_line_for_every_command(tmp_path, command):
    """A store whose schema is at a revision this MLflow does not have (another MLflow version's, e.g. a team's shared
    store): MLflow's traceback before, for every command, saying "run 'mlflow db upgrade'" even of a newer store."""
    import sqlite3

    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlflow.db"
    MlflowClient(f"sqlite:///{store}").create_experiment("awnn-doublemoon")
    con = sqlite3.connect(store)
    con.execute("UPDATE alembic_version SET version_num = 'f00dfeed1234'")  # a revision of a newer MLflow
    con.commit()
    con.close()
    uri = f"sqlite:///{store}"
    args = {"compare": ["compare", "--task", "doublemoon", "--budget", "smoke", "--tracking-uri", uri],
            "report": ["report", "--tracking-uri", uri, "--out", str(tmp_path / "rep")]}[command]
    before = store.read_bytes()
    t0 = time.monotonic()
    p = run_awnn(args, cwd=tmp_path, timeout=120)
    line = _one_line(p)
    assert f"--tracking-uri {uri}: MLflow " in line and f" cannot open {store}: " in line, line
    assert "f00dfeed1234" in line and "another MLflow version" in line and "Traceback" not in p.stderr, line
    assert time.monotonic() - t0 < limit(60)  # before Ray starts
    assert store.read_bytes() == before
    assert not (tmp_path / "awnn-results").exists() and not (tmp_path / "rep").exists()


@pytest.mark.fault
def test_fault_stores_report_never_writes_to_a_store(tmp_path):
    """`awnn report` (read-only) on an empty file used to write MLflow's schema into it."""
    store = tmp_path / "empty.db"
    store.write_bytes(b"")
    p = run_awnn(["report", "--tracking-uri", f"sqlite:///{store}", "--out", str(tmp_path / "rep")], cwd=tmp_path, timeout=120)
    line = _one_line(p)
    assert f"--tracking-uri sqlite:///{store}: an empty file, not an MLflow store" in line
    assert store.stat().st_size == 0
    other = tmp_path / "not-mlflow.db"
    import sqlite3

    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = other.read_bytes()
    p = run_awnn(["report", "--tracking-uri", f"sqlite:///{other}", "--out", str(tmp_path / "rep")], cwd=tmp_path, timeout=120)
    assert "is a SQLite database but not an MLflow SQLite store (no table alembic_version, experiments, runs)" in _one_line(p)
    assert other.read_bytes() == before


DRIVER_START = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from tracking.store import TrackingWriter, init_tracking
    uri, go, name = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    while time.time() < go:
        time.sleep(0.001)
    # exactly what a driver does with its store before the first trial (search/sweep.py, Comparison.run)
    init_tracking(uri)
    w = TrackingWriter(uri, "awnn-doublemoon")
    w.start_run("cmp", name=name, tags={{"awnn.kind": "comparison"}})
    w.end_run("cmp")
    assert not w.close(timeout=60)
    print("ok", name)
""")


@pytest.mark.fault
def test_fault_stores_drivers_starting_together_on_a_new_sqlite_file(tmp_path):
    """Three driver processes open a new SQLite store at the same instant.
    Without the lock, MLflow's migrations ran in each and all but one crashed
    (alembic 'expected to match one row', 'duplicate column name'): 2 crashes
    in 2 tries before the lock, so one try per CI run catches a regression."""
    store = tmp_path / "mlflow.db"
    script = tmp_path / "driver_start.py"
    script.write_text(DRIVER_START.format(root=str(ROOT)))
    go = time.time() + 8.0  # every process has imported MLflow by then
    procs = [subprocess.Popen([sys.executable, str(script), f"sqlite:///{store}", str(go), f"d{i}"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(3)]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{store}")
    exp = c.get_experiment_by_name("awnn-doublemoon")
    assert sorted(r.info.run_name for r in c.search_runs([exp.experiment_id])) == ["d0", "d1", "d2"]


MAKE_STORE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from tracking.checks import init_tracking
    init_tracking(sys.argv[1])
    print("made", flush=True)
""")


@pytest.mark.fault
def test_a_driver_killed_while_it_makes_a_new_store_leaves_none_and_the_next_makes_it_whole(tmp_path):
    """Made in place, a store killed 2.1 s into MLflow's ~100 migrations was left between two revisions, and every
    later command failed on it with a traceback (`duplicate column name: routing_strategy`).  Here the process is
    SIGKILLed while its store's schema is half made; nothing is at the store's path, and the next driver makes a whole
    store and removes the dead process's file."""
    import signal
    import sqlite3

    from tracking.checks import check_sqlite_store, init_tracking

    path = tmp_path / "mlflow.db"
    script = tmp_path / "make.py"
    script.write_text(MAKE_STORE.format(root=str(ROOT)))
    p = subprocess.Popen([sys.executable, str(script), f"sqlite:///{path}"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    tables = 0
    while time.monotonic() < deadline and p.poll() is None and tables < 20:  # some migrations done, most to come
        for f in [path, *tmp_path.glob(".mlflow.db.*.new")]:  # (wherever the schema is being made)
            try:
                if not f.exists():
                    continue
                con = sqlite3.connect(f"file:{f}?mode=ro", uri=True, timeout=0.1)
                tables = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                con.close()
            except sqlite3.Error:
                pass
        time.sleep(0.01)
    assert p.poll() is None, "the store was made before the kill: nothing was tested"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    assert tables >= 20
    assert not path.exists()  # (made in place: a store between two revisions)
    assert list(tmp_path.glob(".mlflow.db.*.new"))  # the dead process's file, until the next driver
    init_tracking(f"sqlite:///{path}")
    check_sqlite_store(path, "test")
    assert not list(tmp_path.glob(".mlflow.db.*")), sorted(f.name for f in tmp_path.iterdir())
    from mlflow.tracking import MlflowClient

    c = MlflowClient(f"sqlite:///{path}")
    c.create_run(c.create_experiment("awnn-doublemoon"))  # a usable store


def test_a_store_made_in_the_background_is_placed_or_removed_and_never_replaces_one_already_there(tmp_path):
    from mlflow.tracking import MlflowClient

    from tracking.checks import init_tracking_in_background, place_store, prepare_store

    gone = tmp_path / "gone.db"
    init_tracking_in_background(f"sqlite:///{gone}")(place=False)  # (the driver stopped before writing anything)
    assert sorted(f.name for f in tmp_path.iterdir() if f.name != "mlruns") == []
    made = tmp_path / "made.db"
    init_tracking_in_background(f"sqlite:///{made}")()
    assert made.exists() and MlflowClient(f"sqlite:///{made}").get_experiment("0").name == "Default"
    theirs = tmp_path / "theirs.db"
    ours = prepare_store(f"sqlite:///{theirs}")
    assert ours is not None and not theirs.exists()
    MlflowClient(f"sqlite:///{theirs}").create_experiment("theirs")  # another driver's store, placed first
    place_store(f"sqlite:///{theirs}", ours)
    assert MlflowClient(f"sqlite:///{theirs}").get_experiment_by_name("theirs") is not None
    assert sorted(f.name for f in tmp_path.iterdir() if f.name != "mlruns") == ["made.db", "theirs.db"]
    (tmp_path / "a-file").write_text("")
    with pytest.raises(Exception):  # the thread's error (no folder can be made there), raised by finish
        init_tracking_in_background(f"sqlite:///{tmp_path / 'a-file' / 'x.db'}")()


def test_a_new_store_named_with_a_query_or_in_memory_makes_no_file_of_another_name(tmp_path, monkeypatch):
    """`?timeout=30` belongs to SQLite's driver, not to the file's name; `:memory:` has no file."""
    from tracking.checks import init_tracking

    monkeypatch.chdir(tmp_path)
    init_tracking(f"sqlite:///{tmp_path / 'q.db'}?timeout=30")
    init_tracking("sqlite:///:memory:")
    assert sorted(f.name for f in tmp_path.iterdir() if f.name != "mlruns") == ["q.db"]


CHECK_DURING_CREATION = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from search.errors import OptionError
    from search.sweep import _check_optuna_storage
    from tracking.checks import TrackingUnavailable, check_tracking
    url, kind = sys.argv[1], sys.argv[2]
    print("ready", flush=True)
    try:
        if kind == "mlflow-read":
            check_tracking(url, write=False)
        elif kind == "mlflow-write":
            check_tracking(url, write=True)
        else:
            _check_optuna_storage(url)
    except (TrackingUnavailable, OptionError) as e:
        print("error:", e, flush=True)
        sys.exit(2)
    print("ok", flush=True)
""")


@pytest.mark.fault
@pytest.mark.parametrize("kind", ["mlflow-read", "mlflow-write", "optuna"])
def test_fault_stores_a_store_checked_while_another_process_creates_it_waits_for_it(tmp_path, kind):
    """`awnn report` (or a second driver) checking a new SQLite store while a
    driver creates its schema saw it half made (an empty file; tables without
    alembic_version, or Optuna's `studies` without `trials`) and said it was
    not a store (the probe: 3 false errors in 1455 checks during one creation).
    The check now waits for the lock the creator holds.  Here the test is the
    creator: it holds the lock with a half-made file in place, lets the checker
    start, then completes the store and lets go: the checker must say ok (on
    the old code it said 'not an MLflow SQLite store (no table alembic_version)')."""
    import sqlite3

    from tracking.checks import folder_lock

    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    script = tmp_path / "check.py"
    script.write_text(CHECK_DURING_CREATION.format(root=str(ROOT)))
    with folder_lock(tmp_path):
        con = sqlite3.connect(path)  # what another process's reader sees part-way through the creation
        for table in (["studies"] if kind == "optuna" else ["experiments", "runs"]):
            con.execute(f"CREATE TABLE {table} (id INTEGER)")
        con.commit()
        con.close()
        checker = subprocess.Popen([sys.executable, str(script), url, kind], cwd=tmp_path, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        assert checker.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # the check runs now, unless it waits for the lock
        path.unlink()  # the creation completes (a whole store, as the creator would leave it)
        if kind == "optuna":
            import optuna

            optuna.storages.RDBStorage(url)
        else:
            from tracking.contract import client

            client(url).search_experiments(max_results=1)
    out = checker.communicate(timeout=120)[0]
    assert checker.returncode == 0 and out.strip() == "ok", out[-3000:]


@pytest.mark.fault
def test_fault_stores_spool_cut_short_by_a_kill_is_still_applied(tmp_path):
    """A driver killed while saving its unwritten MLflow operations leaves a
    last line cut short; --resume applies the complete lines and goes on."""
    import json

    from mlflow.tracking import MlflowClient

    from tracking.store import replay_spool

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spool = tmp_path / "pending-mlflow-x.jsonl"
    start = {"kind": "start", "key": "cmp", "data": {"name": "c", "parent": None, "tags": {"awnn.kind": "comparison"}, "params": {}, "time": 1}}
    metrics = {"kind": "metrics", "key": "cmp", "data": {"rows": [["wall_seconds", 3.0, 0, 2]]}}
    spool.write_text(json.dumps({"kind": "run_ids", "key": "", "data": {}}) + "\n" + json.dumps(start) + "\n" + json.dumps(metrics) + "\n"
                     + json.dumps({"kind": "end", "key": "cmp", "data": {"status": "FINISHED", "time": 3}})[:20])
    assert replay_spool(spool, uri, "awnn-doublemoon") == 2
    assert not spool.exists()
    c = MlflowClient(uri)
    (run,) = c.search_runs([c.get_experiment_by_name("awnn-doublemoon").experiment_id])
    assert run.data.metrics["wall_seconds"] == 3.0


def _stores(tmp_path):
    from servers import free_port

    port = free_port()  # nothing listens there
    psycopg3 = __import__("importlib.util").util.find_spec("psycopg") is not None
    return {
        "a folder path": (str(tmp_path / "mlruns"), "a path is MLflow's file store, which MLflow 3 refuses"),
        "a file: URI": (f"file://{tmp_path / 'mlruns'}", f"use a SQLite file (sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'})"),
        "a .db path": ("store.db", f"a SQLite file is sqlite:///{tmp_path / 'store.db'}"),
        "postgresql:// (psycopg 3)": (f"postgresql://u:secret@127.0.0.1:{port}/db",
                                     "cannot connect" if psycopg3 else "driver needs the Python module 'psycopg', which is not installed: pip install 'psycopg[binary]'"),
        "nothing listens": (f"postgresql+psycopg2://u:secret@127.0.0.1:{port}/db", "cannot connect (OperationalError: "),
        "an unknown scheme": ("bogus://x", "MLflow has no tracking store for bogus:"),
        "Databricks without credentials": ("databricks", "MLflow refused it: Reading Databricks credential configuration failed with "
                                                         "MLflow tracking URI 'databricks'. Set DATABRICKS_HOST and DATABRICKS_TOKEN"),
        "a Unity Catalog registry URI": ("databricks-uc", "a Unity Catalog model registry URI, not a tracking store; expected databricks"),
    }


@pytest.mark.fault
@pytest.mark.parametrize("command,case", [
    *[("compare", case) for case in ["a folder path", "a file: URI", "a .db path", "postgresql:// (psycopg 3)", "nothing listens", "an unknown scheme",
                                     "Databricks without credentials", "a Unity Catalog registry URI"]],
    ("report", "a folder path"), ("report", "nothing listens"), ("report", "Databricks without credentials"),  # the read-only command
])
def test_fault_stores_a_tracking_uri_mlflow_cannot_use_is_one_line(tmp_path, command, case):
    """Each was a traceback (MLflow's file-store refusal, ModuleNotFoundError
    psycopg, UnsupportedModelRegistryStoreURIException; `databricks` without
    credentials after Ray had started) or, for a database, a wait inside the
    first write; now one line naming it, credentials hidden."""
    uri, says = _stores(tmp_path)[case]
    args = {"compare": ["compare", "--task", "doublemoon", "--budget", "smoke", "--tracking-uri", uri],
            "report": ["report", "--tracking-uri", uri, "--out", str(tmp_path / "rep")]}[command]
    t0 = time.monotonic()
    no_profile = {"DATABRICKS_CONFIG_FILE": str(tmp_path / "no.databrickscfg")}  # (a machine's own ~/.databrickscfg left out)
    line = _one_line(run_awnn(args, cwd=tmp_path, timeout=120, env=no_profile))
    assert line.startswith(f"awnn {command}: error: --tracking-uri ") and says in line, line
    assert "secret" not in line
    assert time.monotonic() - t0 < limit(60)
    assert not (tmp_path / "awnn-results").exists() and not (tmp_path / "rep").exists() and not (tmp_path / "mlruns").exists()


@pytest.mark.fault
@pytest.mark.parametrize("command,source", [("compare", "env"), ("report", "env"), ("report", "default")])
def test_a_tracking_uri_line_names_where_the_uri_came_from(tmp_path, command, source):
    """A URI from MLFLOW_TRACKING_URI (or the default store) was blamed on
    --tracking-uri, an option the user never typed; a server URI's
    credentials were printed in clear."""
    from servers import free_port

    uri = {"compare": f"sqlite:///{tmp_path / 'nodir' / 'mlflow.db'}", "report": f"http://u:secret@127.0.0.1:{free_port()}"}[command]
    env = {"MLFLOW_TRACKING_URI": uri} if source == "env" else None
    args = {"compare": ["compare", "--task", "doublemoon", "--budget", "smoke"], "report": ["report", "--out", str(tmp_path / "rep")]}[command]
    line = _one_line(run_awnn(args, cwd=tmp_path, timeout=120, env=env))
    if source == "default":
        expected = f"the default tracking store (no --tracking-uri, no MLFLOW_TRACKING_URI) sqlite:///{tmp_path / 'mlflow.db'}: no such SQLite file"
    else:
        expected = "MLFLOW_TRACKING_URI " + {"compare": f"{uri}: folder {tmp_path / 'nodir'} does not exist",
                                            "report": f"{uri.replace('u:secret@', '***@')}: cannot reach the MLflow server"}[command]
    assert line.startswith(f"awnn {command}: error: {expected}"), line
    assert "secret" not in line and "--tracking-uri " not in line.replace("no --tracking-uri,", "")


@pytest.mark.fault
def test_fault_stores_an_optuna_database_nobody_serves_is_one_line(tmp_path):
    from servers import free_port

    url = f"postgresql+psycopg2://u:secret@127.0.0.1:{free_port()}/optuna"
    line = _one_line(run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "tpe",
                               "--optuna-storage", url], cwd=tmp_path, timeout=120))
    assert line.startswith(f"awnn compare: error: --optuna-storage {url.replace('u:secret', '***')}: cannot connect"), line


@pytest.mark.fault
def test_fault_stores_a_served_database_passes_the_check(tmp_path):
    """The check lets a real PostgreSQL through (and tells a wrong password apart)."""
    from servers import ServerUnavailable, postgres_server
    from tracking.checks import TrackingUnavailable, check_tracking

    try:
        with postgres_server(tmp_path) as pg:
            check_tracking(pg.uri)
            wrong = pg.uri.replace(f":{pg.password}@", ":wrong@")
            with pytest.raises(TrackingUnavailable, match="cannot connect .*password authentication failed"):
                check_tracking(wrong)
    except ServerUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.fault
@pytest.mark.parametrize("case", ["under a file", "nothing listens", "unknown scheme"])
def test_fault_stores_a_remote_storage_ray_cannot_write_is_one_line_before_any_run(tmp_path, case):
    """`--storage s3://...` with no network was pyarrow's OSError as a
    traceback from Ray's Tuner, after the comparison's MLflow run had started."""
    from servers import free_port

    (tmp_path / "a-file").write_text("x")
    storage, says = {
        "under a file": (f"file://{tmp_path / 'a-file' / 'results'}", "cannot write there (NotADirectoryError: "),
        "nothing listens": (f"s3://AKIA0:s3cret@bucket/x?endpoint_override=127.0.0.1:{free_port()}&scheme=http&region=us-east-1",
                            "cannot write there (OSError: "),
        "unknown scheme": ("nofs://x/y", "cannot write there (ArrowInvalid: Unrecognized filesystem type"),
    }[case]
    line = _one_line(run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--storage", storage],
                              cwd=tmp_path, timeout=150))
    assert line.startswith("awnn compare: error: --storage ") and says in line, line
    assert "s3cret" not in line
    assert not (tmp_path / "mlflow.db").exists(), "no MLflow run before the check"


def test_a_writable_file_uri_storage_passes_the_check_and_is_left_clean(tmp_path):
    from tracking.checks import check_remote_storage

    check_remote_storage(f"file://{tmp_path / 'results' / 'deeper'}", "--storage")
    assert (tmp_path / "results" / "deeper").is_dir() and not list((tmp_path / "results" / "deeper").iterdir())


def test_a_wait_for_the_store_lock_is_said_once_and_then_goes_on(tmp_path, capsys):
    """A holder that keeps the lock (a driver stopped mid-creation) is not a
    silent hang: the waiter says once whose lock it waits for, and takes it
    when the holder lets go."""
    import threading

    from tracking.checks import folder_lock

    got = threading.Event()

    def waiter():
        with folder_lock(tmp_path, say_after=0.2):
            got.set()

    with folder_lock(tmp_path):
        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(1.0)
        assert not got.is_set(), "the lock was taken twice"
    t.join(timeout=30)
    assert got.is_set()
    err = capsys.readouterr().err
    assert err.count("waiting for the lock on") == 1 and str(tmp_path) in err, err


KILLED_WRITER = """
import os, signal, sqlite3
con = sqlite3.connect({path!r}, isolation_level=None)
con.execute("PRAGMA journal_mode=DELETE")  # (Optuna's and MLflow's SQLite default)
con.execute("CREATE TABLE studies(x)")
con.execute("CREATE TABLE trials(x)")
con.executemany("INSERT INTO trials VALUES (?)", [(b"a" * 1000,)] * 2000)
con.execute("BEGIN IMMEDIATE")
con.execute("UPDATE trials SET x = ?", (b"b" * 1000,))
con.execute("PRAGMA cache_size=1")
os.kill(os.getpid(), signal.SIGKILL)  # mid-transaction: a hot journal beside the file
"""


def test_a_store_whose_writer_was_killed_mid_transaction_is_rolled_back_not_called_another_kind(tmp_path):
    """CI's `make test` at 7fff9df: a TPE driver SIGKILLed while Optuna wrote left a hot journal, and the resume
    refused its own storage ("optuna.db is not an Optuna SQLite storage: attempt to write a readonly database": the
    check's read-only connection cannot roll a hot journal back).  Now the check rolls it back (the last committed
    state, as any writer would) and passes; a file it may not write is one line saying so."""
    import sqlite3

    from tracking.checks import TrackingUnavailable, check_sqlite_store

    def killed_writer(path):
        p = subprocess.run([sys.executable, "-c", KILLED_WRITER.format(path=str(path))], timeout=60)
        assert p.returncode == -9
        assert path.with_name(path.name + "-journal").exists()  # a hot journal, else nothing was tested

    path = tmp_path / "optuna.db"
    killed_writer(path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # what the old check met
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("PRAGMA quick_check(1)").fetchone()
    check_sqlite_store(path, "--optuna-storage", tables={"studies", "trials"}, kind="an Optuna SQLite storage")
    assert not path.with_name(path.name + "-journal").exists()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert con.execute("SELECT count(*), min(x) FROM trials").fetchone() == (2000, b"a" * 1000)  # the committed state
    con.close()

    if os.geteuid() == 0:
        return  # (root writes any file: the read-only case cannot be made here)
    other = tmp_path / "ro" / "optuna.db"
    other.parent.mkdir()
    killed_writer(other)
    other.parent.chmod(0o555)
    try:
        with pytest.raises(TrackingUnavailable, match="write cut short .*needs write access to roll back"):
            check_sqlite_store(other, "--optuna-storage", tables={"studies", "trials"}, kind="an Optuna SQLite storage")
    finally:
        other.parent.chmod(0o755)


def test_a_store_that_refuses_the_writers_first_request_is_one_line(tmp_path, monkeypatch):
    """What MLflow raises at the driver's first request (here: a Databricks workspace's credentials it cannot read,
    past check_tracking, as a store whose permissions change between the check and the write would be) is one line
    naming the store and the experiment, with what MLflow said first, not MLflow's traceback."""
    from tracking.checks import TrackingUnavailable
    from tracking.store import TrackingWriter

    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(tmp_path / "no.databrickscfg"))
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(TrackingUnavailable) as e:
        TrackingWriter("databricks", "awnn-doublemoon")
    msg = str(e.value)
    assert msg == ("MLflow store databricks: the first request (experiment 'awnn-doublemoon') was refused: Reading Databricks "
                   "credential configuration failed with MLflow tracking URI 'databricks'."), msg
