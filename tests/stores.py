"""A new MLflow SQLite store for a test, copied from one made once per session.

The product makes a new store by running MLflow's ~100 schema migrations
(tracking.checks.prepare_store: ~1.5 s of CPU on 2 cores, ~3 s while
pytest-xdist's two workers share them), and `make test` made ~110 new stores,
one for nearly every command it ran: some 3-4 minutes of its workers' time
spent making the same empty schema.  The session makes it once, with the
product's own code (`init_tracking`, in a process of its own, as a driver
would), and a test's command finds a copy where its store will be
(`seed`).  A copy of a SQLite file nobody has open is that store: the schema,
its alembic revision, the Default experiment.

Where a test is about a new store (its making, its placing, a command that
must leave none behind) it passes `store_template=False` to run_awnn or
Driver, and the command makes its own.  The session's shared comparisons
(conftest.smoke_comparison, all_strategies_comparison) make theirs too, so
every suite run still makes new stores the product's way.
AWNN_TEST_STORE_TEMPLATE=0 turns the copies off (every store made by its
command, as before 2026-12-04)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_ENV = "AWNN_TEST_MLFLOW_TEMPLATE"  # where the session's template is (set by conftest's session fixture)
SWITCH = "AWNN_TEST_STORE_TEMPLATE"


def build_template(folder: Path) -> dict:
    """A new store made by the product's own code in `folder` (for conftest.shared_session_result)."""
    db = folder / "template.db"
    code = "import sys; from tracking.checks import init_tracking; init_tracking(sys.argv[1])"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("MLFLOW_TRACKING_URI", None)
    subprocess.run([sys.executable, "-c", code, f"sqlite:///{db}"], check=True, cwd=folder, env=env, timeout=300,
                   capture_output=True)
    leftovers = [p.name for p in folder.iterdir() if p.name != db.name]
    assert db.is_file() and not any(n.startswith(db.name + "-") for n in leftovers), (
        f"the template store {db} is not one closed file: {leftovers}")
    return {"dir": folder, "db": str(db)}


def template() -> Path | None:
    """The session's template store, or None (switched off, or no session made one)."""
    if os.environ.get(SWITCH, "1") == "0":
        return None
    path = os.environ.get(TEMPLATE_ENV)
    return Path(path) if path else None


def store_path(args: list[str], cwd: Path, env: dict | None = None) -> Path | None:
    """The SQLite file the command `awnn ARGS` run in `cwd` will use as its MLflow store: its --tracking-uri, else
    MLFLOW_TRACKING_URI in `env` (the tests' commands do not inherit one), else the default ./mlflow.db; None for a
    store that is not a plain SQLite file (a server, a URI with a query, in memory)."""
    uri = None
    for i, a in enumerate(args):
        if a == "--tracking-uri" and i + 1 < len(args):
            uri = args[i + 1]
        elif a.startswith("--tracking-uri="):
            uri = a.split("=", 1)[1]
    if uri is None:
        uri = (env or {}).get("MLFLOW_TRACKING_URI")
    if uri is None:
        return Path(cwd) / "mlflow.db"
    if not uri.startswith("sqlite:///") or "?" in uri:
        return None
    rest = uri[len("sqlite:///"):]
    if not rest or rest == ":memory:" or rest.startswith("file:"):
        return None
    return Path(cwd) / rest


def seed(db: Path | None) -> bool:
    """Copy the session's template to `db` where no file is yet (and its folder is); whether it did."""
    source = template()
    if source is None or db is None or db.exists() or not db.parent.is_dir():
        return False
    shutil.copyfile(source, db)
    return True


def seed_for(args: list[str], cwd: Path, env: dict | None = None) -> bool:
    """`seed` the store of the command `awnn ARGS` run in `cwd`."""
    return seed(store_path(args, cwd, env))
