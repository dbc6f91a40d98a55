"""Checks run before a sweep writes anything: the tracking store answers (a
server, or a SQLite file that is an MLflow store), folders are writable, one
driver at a time creates a new SQLite store's schema (`folder_lock`)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from awnn import aside

from . import _mlflow_speedups
from .contract import client, redact_uri

__all__ = ["TrackingUnavailable", "mlflow_said", "check_tracking", "check_database", "check_remote_storage", "check_writable", "check_sqlite_store", "check_mlflow_opens", "folder_lock", "init_tracking", "init_tracking_in_background", "prepare_store", "place_store"]


class TrackingUnavailable(RuntimeError):
    """The tracking server cannot be reached (one readable line)."""


def check_tracking(uri: str, timeout: float = 10.0, write: bool = True, source: str = "--tracking-uri") -> None:
    """Fail fast, with one line naming the store and what is wrong, when the
    tracking store cannot be used: a server that does not answer or refuses
    the credentials; a SQLite store in a missing or unwritable folder, a file
    that cannot be written, or one that is not an MLflow SQLite database.
    `write=False` (read-only commands such as `awnn report`) also requires the
    store to exist, and never writes to it.  Every line starts with where the
    URI came from (`source`, see tracking.contract.tracking_uri_source) and the
    URI, credentials masked."""
    what = f"{source} {redact_uri(uri)}"
    if uri.startswith(("http://", "https://")):
        _check_server(uri, what, timeout)
    elif uri.startswith("sqlite:///"):
        path = _sqlite_path(uri)
        if path is not None:  # (an in-memory database has no file to check)
            _check_sqlite(what, path, write, uri)
    elif uri.split(":", 1)[0] in REGISTRY_SCHEMES:  # (MLflow's client raised its own 10-line error from the first call)
        raise TrackingUnavailable(f"{what}: a Unity Catalog model registry URI, not a tracking store; expected databricks "
                                  "(a workspace's tracking; databricks://PROFILE for a profile of ~/.databrickscfg), http(s)://, "
                                  "sqlite:/// or a database URL")
    elif uri == "databricks" or uri.startswith("databricks://"):  # a workspace's store (databricks://PROFILE: ~/.databrickscfg)
        _check_databricks(uri, what, timeout)
    elif uri.startswith("file:") or "://" not in uri and ":" not in uri.split("/")[0]:
        _check_file_store(uri, what)
    elif uri.split(":", 1)[0].split("+")[0] in DATABASE_SCHEMES:
        check_database(uri, what, timeout)
    else:
        _check_scheme(uri, what)


# SQLAlchemy's database schemes MLflow's and Optuna's RDB stores take (sqlite is checked as a file)
DATABASE_SCHEMES = ("postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle")
# the pip package of a missing DB-API module
_DRIVER_PACKAGES = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient",
                    "pymysql": "PyMySQL", "pyodbc": "pyodbc", "oracledb": "oracledb", "mysql": "mysql-connector-python"}

_OTHER_DRIVER = {"postgresql": "postgresql+psycopg2:// with psycopg2-binary", "mysql": "mysql+pymysql:// with PyMySQL"}
# MLflow's registry-only URIs (Unity Catalog), which users mistake for a tracking store
REGISTRY_SCHEMES = ("databricks-uc", "uc")
# the schemes MLflow 3's own tracking stores take (plugins add theirs: entry points "mlflow.tracking_store")
MLFLOW_SCHEMES = ("http", "https", "sqlite", "file", "databricks", *DATABASE_SCHEMES)


def _check_scheme(uri: str, what: str) -> None:
    from importlib.metadata import entry_points

    scheme = uri.split(":", 1)[0].split("+")[0]
    plugins = {e.name for e in entry_points(group="mlflow.tracking_store")}
    if scheme not in MLFLOW_SCHEMES and scheme not in plugins:
        raise TrackingUnavailable(f"{what}: MLflow has no tracking store for {scheme}:; expected "
                                  f"http(s)://, sqlite:///, a database (postgresql+psycopg2://, mysql://, mssql://), databricks"
                                  + (f" or a plugin's ({', '.join(sorted(plugins))})" if plugins else ""))


def _check_databricks(uri: str, what: str, timeout: float) -> None:
    """A Databricks workspace's store answers one request with the credentials MLflow finds (DATABRICKS_HOST and
    DATABRICKS_TOKEN, a profile, ...), within `timeout` seconds; else one line with what MLflow said (without
    credentials its first request raised a 50-line traceback, after Ray had started)."""
    import logging

    from mlflow.exceptions import MlflowException

    quiet = logging.getLogger("mlflow.utils.databricks_utils")  # its warning says the error below once more, on a line before it
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        done, e = _bounded(lambda: client(uri).search_experiments(max_results=1), timeout)
    finally:
        quiet.setLevel(level)
    if not done:
        raise TrackingUnavailable(f"{what}: the Databricks workspace did not answer within {timeout:.0f} s")
    if isinstance(e, MlflowException):
        raise TrackingUnavailable(f"{what}: MLflow refused it: {mlflow_said(e)} Set DATABRICKS_HOST and DATABRICKS_TOKEN, or name "
                                  "a profile of ~/.databrickscfg (databricks://PROFILE)")
    if e is not None:
        raise TrackingUnavailable(f"{what}: cannot reach the Databricks workspace ({type(e).__name__}: {mlflow_said(e)})")


def mlflow_said(e: BaseException, limit: int = 400) -> str:
    """An MLflow error's message in one line: its first sentence, or its first `limit` characters (MLflow's messages
    run to ten lines of advice)."""
    said = " ".join(str(getattr(e, "message", None) or e).split())
    cut = said.find(". ", 0, limit)
    return said[:cut + 1] if cut > 0 else said[:limit] + ("..." if len(said) > limit else "")


def _check_file_store(uri: str, what: str) -> None:
    """A plain path or file: URI is MLflow's file store, which MLflow 3 refuses
    unless MLFLOW_ALLOW_FILE_STORE is set (a traceback deep in the first write)."""
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1"):
        return
    path = Path(uri[len("file://"):] if uri.startswith("file://") else uri[len("file:"):] if uri.startswith("file:") else uri)
    if path.suffix in (".db", ".sqlite", ".sqlite3") or (path.is_file() and not path.is_dir()):
        hint = f"a SQLite file is sqlite:///{path.expanduser().resolve()}"
    else:
        hint = f"use a SQLite file (sqlite:///{(path.expanduser().resolve() / 'mlflow.db')}) or an MLflow server"
    raise TrackingUnavailable(f"{what}: a path is MLflow's file store, which MLflow 3 refuses "
                              f"(maintenance mode; MLFLOW_ALLOW_FILE_STORE=true opts in); {hint}")


def check_database(url: str, what: str, timeout: float = 10.0) -> None:
    """An RDB URL (postgresql://, mysql://...) whose SQLAlchemy driver is
    installed and whose server answers within `timeout` seconds; else one line
    naming the package to install or what the server said.  (SQLAlchemy 2.1
    reads a bare postgresql:// as psycopg 3; the images install psycopg2:
    postgresql+psycopg2://.)"""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    from sqlalchemy.pool import NullPool

    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except (ArgumentError, NoSuchModuleError, ValueError) as e:
        raise TrackingUnavailable(f"{what}: not a database URL SQLAlchemy knows ({str(e).splitlines()[0][:160]})") from None
    try:
        dialect.import_dbapi()
    except ImportError as e:
        module = (getattr(e, "name", None) or "").split(".")[0]
        package = _DRIVER_PACKAGES.get(module, module or "the driver")
        other = _OTHER_DRIVER.get(parsed.get_backend_name())
        raise TrackingUnavailable(f"{what}: SQLAlchemy's {parsed.drivername} driver needs the Python module {module!r}, "
                                  f"which is not installed: pip install {package}" + (f", or name a driver you have in the URL "
                                  f"(e.g. {other})" if other else "")) from None

    def connect() -> None:
        engine = create_engine(parsed, poolclass=NullPool)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()

    done, e = _bounded(connect, timeout)  # no portable connect timeout across drivers
    if not done:
        raise TrackingUnavailable(f"{what}: the database server did not answer within {timeout:.0f} s")
    if e is not None:
        detail = str(getattr(e, "orig", None) or e).strip().splitlines()
        raise TrackingUnavailable(f"{what}: cannot connect ({type(getattr(e, 'orig', None) or e).__name__}: "
                                  f"{detail[0][:200] if detail else ''})")


def _check_server(uri: str, what: str, timeout: float) -> None:
    import requests

    try:
        r = requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.RequestException as e:
        raise TrackingUnavailable(f"{what}: cannot reach the MLflow server ({type(e).__name__})") from None
    if r.status_code >= 500:
        raise TrackingUnavailable(f"{what}: server answered {r.status_code} on /health")
    # credentials: an authenticated call tells a 401 apart from success
    # the same credentials the MLflow client will use: the environment
    # (MLFLOW_TRACKING_USERNAME/PASSWORD), else ~/.mlflow/credentials
    from mlflow.utils.credentials import read_mlflow_creds

    creds = read_mlflow_creds()
    auth = (creds.username, creds.password or "") if creds.username else None
    try:
        r = requests.get(uri.rstrip("/") + "/api/2.0/mlflow/experiments/search", params={"max_results": 1}, auth=auth, timeout=timeout)
    except requests.RequestException as e:
        raise TrackingUnavailable(f"{what}: cannot reach the MLflow server ({type(e).__name__})") from None
    if r.status_code in (401, 403):
        raise TrackingUnavailable(f"{what}: the server refused the credentials (HTTP {r.status_code}); set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD")


SQLITE_HEADER = b"SQLite format 3\x00"
MLFLOW_TABLES = {"experiments", "runs", "alembic_version"}


def _check_sqlite(what: str, path: Path, write: bool, uri: str | None = None) -> None:
    folder = path.parent
    if not folder.exists():
        raise TrackingUnavailable(f"{what}: folder {folder} does not exist")
    if not folder.is_dir():
        raise TrackingUnavailable(f"{what}: {folder} is not a folder")
    if path.exists() and not path.is_file():
        raise TrackingUnavailable(f"{what}: {path} is not a file")
    # under the lock a driver holds while it creates a new store's schema
    # (init_tracking): a store seen mid-creation (an empty file, tables without
    # alembic_version) would be called "not an MLflow store"
    with folder_lock(folder):
        _check_sqlite_file(what, path, write, uri)


def _check_sqlite_file(what: str, path: Path, write: bool, uri: str | None = None) -> None:
    folder = path.parent
    has_data = path.is_file() and path.stat().st_size > 0
    if not write and not has_data:
        found = "an empty file, not an MLflow store" if path.exists() else "no such SQLite file"
        raise TrackingUnavailable(f"{what}: {found}; pass the store `awnn compare` wrote (its summary prints it)")
    if has_data:
        check_sqlite_store(path, what)
        if uri is not None:
            check_mlflow_opens(uri, path, what)
    if write:
        check_writable(folder, what)
        if path.exists():
            try:
                os.close(os.open(path, os.O_RDWR))
            except OSError as e:
                raise TrackingUnavailable(f"{what}: cannot write to {path} ({e.strerror or type(e).__name__})") from None


def check_sqlite_store(path: Path, what: str, tables: set[str] = MLFLOW_TABLES, kind: str = "an MLflow SQLite store") -> None:
    """A non-empty file that must be an intact SQLite database holding `tables`
    (read-only: the file is opened with mode=ro and nothing is written, but for
    one case: a writer killed mid-transaction (a driver's SIGKILL) leaves a hot
    journal, which a read-only connection cannot roll back (SQLITE_READONLY_ROLLBACK,
    "attempt to write a readonly database": the resume after a kill refused its own
    store); it is rolled back by opening the file read-write once, as SQLite's next
    writer or reader would, restoring the last committed state)."""
    import sqlite3

    try:
        _check_sqlite_store(path, what, tables, kind)
    except _HotJournal:
        journal = Path(f"{path}-journal")
        if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
            raise TrackingUnavailable(f"{what}: {path} holds a write cut short ({journal}), which needs write access to roll back: "
                                      "open it once with write access (or give it to its owner)") from None
        try:
            con = sqlite3.connect(str(path), timeout=30)
            try:
                con.execute("PRAGMA quick_check(1)").fetchone()  # (the first read lock rolls the hot journal back)
            finally:
                con.close()
        except sqlite3.DatabaseError as e:
            raise TrackingUnavailable(f"{what}: {path}: cannot roll back the write cut short in {journal}: {str(e).splitlines()[0][:200]}") from None
        try:
            _check_sqlite_store(path, what, tables, kind)
        except _HotJournal:
            raise TrackingUnavailable(f"{what}: {path}: the write cut short in {journal} was not rolled back") from None


class _HotJournal(Exception):
    """check_sqlite_store's read-only connection met a hot journal."""


def _check_sqlite_store(path: Path, what: str, tables: set[str], kind: str) -> None:
    import sqlite3

    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as e:
        raise TrackingUnavailable(f"{what}: cannot read {path} ({e.strerror or type(e).__name__})") from None
    if head != SQLITE_HEADER:
        raise TrackingUnavailable(f"{what}: {path} is not {kind}: file is not a database")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            check = con.execute("PRAGMA quick_check(1)").fetchone()
            if not check or check[0] != "ok":
                raise sqlite3.DatabaseError(check[0] if check else "no answer to quick_check")
            found = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if getattr(e, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK" or (
                "readonly" in str(e) and Path(f"{path}-journal").exists()):  # (Python < 3.11: no sqlite_errorname)
            raise _HotJournal() from None
        raise TrackingUnavailable(f"{what}: {path} is not {kind}: {str(e).splitlines()[0][:200]}") from None
    if not tables <= found:
        raise TrackingUnavailable(f"{what}: {path} is a SQLite database but not {kind} (no table {', '.join(sorted(tables - found))})")


def check_mlflow_opens(uri: str, path: Path, what: str) -> None:
    """The installed MLflow opens the SQLite store at `path` (an intact SQLite
    database with MLflow's tables: check_sqlite_store), or one line says why
    not.  A store another MLflow version made (its schema at a revision this
    MLflow does not have: a team's shared store, another environment), or one
    whose creation was cut short (before this project made new stores whole:
    tracking.checks.prepare_store), made every command end in MLflow's or
    alembic's traceback, and a newer store's said "run 'mlflow db upgrade'",
    which an older MLflow cannot do."""
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    try:
        client(uri).search_experiments(max_results=1)
    except (MlflowException, sqlalchemy.exc.SQLAlchemyError) as e:
        import sqlite3

        import mlflow

        try:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                revision = con.execute("SELECT version_num FROM alembic_version").fetchone()[0]
            finally:
                con.close()
        except (sqlite3.Error, TypeError):
            revision = "unknown"
        said = (getattr(e, "message", None) or str(e)).strip().splitlines()[0]
        said = said.split(". ")[0][:240]
        raise TrackingUnavailable(
            f"{what}: MLflow {mlflow.__version__} cannot open {path}: {said}"
            f"{'' if revision in said else f' (its schema is at revision {revision})'}; a store "
            f"another MLflow version made: use that version, or `mlflow db upgrade` with the newer of the two after a backup; "
            f"one whose creation was cut short: move it aside, and a new store is made in its place") from None


def check_writable(folder: Path, what: str) -> None:
    """Create, fill (64 KiB, flushed to the file system) and remove a file in
    `folder` (or its nearest existing parent, which must be a folder): a
    read-only folder or mount, or a full disk, fails here, in milliseconds,
    instead of deep inside a sweep."""
    import tempfile

    probe = Path(folder)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise TrackingUnavailable(f"{what}: {probe} is a file, not a folder")
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".awnn-write-check-") as f:
            f.write(b"\0" * 65536)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise TrackingUnavailable(f"{what}: cannot write in {probe} ({e.strerror or type(e).__name__})") from None


def free_space(path: str | Path) -> str:
    """'N free of M' of the file system holding `path` (or its nearest existing
    parent), '' where that cannot be told (a URI, a folder gone)."""
    import shutil

    from .fmt import fbytes

    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        usage = shutil.disk_usage(probe)
    except OSError:
        return ""
    return f"{fbytes(usage.free)} free of {fbytes(usage.total)}"


def _bounded(call, timeout: float) -> tuple[bool, BaseException | None]:
    """Run `call` on a daemon thread for at most `timeout` seconds: (finished, its exception)."""
    import threading

    outcome: dict = {}

    def run() -> None:
        try:
            call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome["error"] = e
        outcome["done"] = True

    t = threading.Thread(target=run, name="awnn-check", daemon=True)
    t.start()
    t.join(timeout)
    return bool(outcome.get("done")), outcome.get("error")


def check_remote_storage(uri: str, what: str, timeout: float = 30.0) -> None:
    """A `--storage` URI (s3://, gs://, file://...) that Ray Tune can write
    to: resolved with pyarrow as Ray resolves it, its folder created and a
    file written and deleted there, within `timeout` seconds.  Before: Ray's
    Tuner raised pyarrow's OSError as a traceback after the comparison's
    MLflow run had started (s3:// with no network: 20 s)."""
    import uuid

    def probe() -> None:
        import pyarrow.fs as pafs

        fs, path = pafs.FileSystem.from_uri(uri)
        path = path.rstrip("/")
        fs.create_dir(path, recursive=True)
        name = f"{path}/.awnn-write-check-{uuid.uuid4().hex[:8]}"
        with fs.open_output_stream(name) as f:
            f.write(b"ok")
        fs.delete_file(name)

    done, error = _bounded(probe, timeout)
    if not done:
        raise TrackingUnavailable(f"{what}: no answer within {timeout:.0f} s (network, endpoint or credentials)")
    if error is not None:
        if isinstance(error, KeyboardInterrupt):
            raise error
        first = (str(error).strip().splitlines() or [""])[0]
        raise TrackingUnavailable(f"{what}: cannot write there ({type(error).__name__}: {first[:240]})")


@contextmanager
def folder_lock(folder: Path, say_after: float = 10.0):
    """An exclusive lock on `folder` (flock on the folder itself: no lock file
    is left behind) between processes on this host.  Held for a store's
    creation (about a second); a wait past `say_after` seconds (a holder
    stopped or hung) is said once on stderr, naming the folder, and goes on."""
    import fcntl
    import sys
    import time

    fd = os.open(folder, os.O_RDONLY)
    try:
        start = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said and time.monotonic() - start >= say_after:
                    print(f"waiting for the lock on {folder}: another process has held it for {say_after:.0f}s "
                          f"(an awnn driver creating a store there; a process stopped with it holds it until it "
                          f"ends or continues)", file=sys.stderr, flush=True)
                    said = True
                time.sleep(0.05)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def init_tracking(uri: str) -> None:
    """Make a SQLite store ready: a new store's MLflow schema is created
    whole, or not at all (`prepare_store`, then `place_store`); an existing
    store is opened under the lock on its folder.  Other URIs: nothing to do."""
    place_store(uri, prepare_store(uri))


def store_room(uri: str) -> str:
    """'the disk of PATH: N free of M' for a SQLite store's file (what a store that stopped taking writes is short of,
    when it is room), '' for any other store or where it cannot be told."""
    path = _sqlite_path(uri)
    room = free_space(path.parent) if path is not None else ""
    return f"the disk of {path}: {room}" if room else ""


def _sqlite_path(uri: str) -> Path | None:
    """The file of a SQLite URI, without its query (`?timeout=30` is for the
    driver, not part of the name); None for any other URI, and for an
    in-memory database or a `file:` URI inside the URI, which have no such file."""
    if not uri.startswith("sqlite:///"):
        return None
    rest = uri[len("sqlite:///"):].split("?", 1)[0]
    if not rest or rest == ":memory:" or rest.startswith("file:"):
        return None
    return Path(rest)


def prepare_store(uri: str) -> Path | None:
    """A new SQLite store's MLflow schema, made in a file of its own beside it
    (`.NAME.PID-THREAD.new`), which `place_store` then puts in place: None where
    there is nothing to make (not a SQLite URI, or the store exists).

    MLflow creates a new store by running its ~100 migrations one after another
    (~1.5 s on 2 cores).  Made in place, a driver ended in the middle (SIGKILL,
    the OOM killer, a Ctrl-C inside a migration) left a store between two
    revisions, which every later command refused with a traceback from
    alembic (`duplicate column name: routing_strategy`, a store killed 2.1 s
    into its creation, 2026-11-28); and drivers started together on a new file
    had to take turns, each under the folder's lock.  Made aside, what another
    process can see at the store's path is nothing or a whole store; a file
    of a process that died while making it is removed by the next one.

    The schema itself is copied from a template MLflow made once per version
    (tracking/_mlflow_speedups.py: ~1 ms instead of the migrations' ~1-1.5
    CPU-s), where that applies; MLflow then opens the copy as any store
    (checks its revision, creates the Default experiment)."""
    path = _sqlite_path(uri)
    if path is None or path.exists():
        return None
    aside.remove_abandoned(path)
    temp = aside.aside_path(path)
    try:
        copied = _mlflow_speedups.copy_empty_store(temp)  # (MLflow's schema from a template: no migrations)
        try:
            client(f"sqlite:///{temp}").search_experiments(max_results=1)
        except Exception:
            if not copied:
                raise
            _mlflow_speedups.forget_template()  # a copy MLflow refused: it makes the store itself,
            aside.remove(temp)  # in a file of another name (MLflow keeps its connection to the refused one)
            temp = aside.aside_path(path, "-mlflow")
            client(f"sqlite:///{temp}").search_experiments(max_results=1)
    except BaseException:
        aside.remove(temp)
        raise
    return temp


def place_store(uri: str, made: Path | None) -> None:
    """Under the lock on the store's folder: the store `prepare_store` made is
    put at its path unless a store is already there (another driver's, made at
    the same moment: that one is used, this one removed), then the store is
    opened (its schema created here, under the lock, only where nothing was
    prepared and the file is still missing)."""
    path = _sqlite_path(uri)
    if path is None:
        if uri.startswith("sqlite:"):  # (no file of ours to place: MLflow makes what it makes)
            client(uri).search_experiments(max_results=1)
        return
    with folder_lock(path.parent):
        if made is not None:
            aside.place(made, path)
        client(uri).search_experiments(max_results=1)


def init_tracking_in_background(uri: str):
    """`init_tracking(uri)` with its slow part, a new store's schema
    (`prepare_store`: ~1 s of MLflow's import and ~1.5 s of migrations, the
    driver's CPU), in a thread of its own while the driver does something else
    (start Ray: mostly waiting on the node's processes; a one-trial sweep's
    first line came 1.5 s sooner, its end 0.7 s sooner, 2026-11-28).

    Returns `finish(place)`, to be called on every path: it waits for the
    thread, then with `place` puts the store in place and opens it
    (`place_store`, raising what the thread raised), without it removes what
    the thread made (the driver stops before anything is written: an error
    starting Ray leaves no store behind, as before)."""
    import threading

    outcome: dict = {}

    def work() -> None:
        try:
            outcome["made"] = prepare_store(uri)
        except BaseException as e:  # noqa: BLE001 - raised again by finish(), in the driver's thread
            outcome["error"] = e

    thread = threading.Thread(target=work, name="awnn-new-store", daemon=True)
    thread.start()

    def finish(place: bool = True) -> None:
        thread.join()
        made = outcome.get("made")
        if not place:
            if made is not None:
                aside.remove(made)
            return
        if "error" in outcome:
            raise outcome["error"]
        place_store(uri, made)

    return finish
