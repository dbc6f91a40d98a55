"""Every use of MLflow's private API, in one place, behind one switch.

One speed-up, which changes nothing MLflow records:

**A new SQLite store's schema, copied.**  MLflow makes a new SQLite store by
creating its first tables and then running its ~100 schema migrations one
after another (`mlflow.store.db.utils._initialize_tables`): ~1.0-1.5 CPU-s
on a 2-core machine, every time, for a result that is the same file for a
given MLflow install.  Here it is made once per MLflow version, into a
template in the user's cache (`$XDG_CACHE_HOME/awnn`, else `~/.cache/awnn`),
and a new store starts as a copy of it (~1 ms).  The template holds the
tables at MLflow's latest revision and nothing else: MLflow's own open of
the copy then checks that revision (`_verify_schema`, as for any store) and
creates the Default experiment, with its artifact location from the working
folder of the command that opens it, exactly as when it creates the store
itself.  tests/tracking/test_mlflow_speedups.py compares the two stores
table by table.

Applied only

* when the switch is on: `AWNN_MLFLOW_SPEEDUPS` unset or `1` (`0`: MLflow
  makes every store itself), and
* when the installed MLflow is one it was checked against (`TESTED_MLFLOW`),
  and the private function it calls is still there (else MLflow's own path,
  with one line on stderr; the tests fail on a tested version where the
  target moved), and
* where the cache folder can be written (else MLflow's own path, silently:
  a read-only home is no error).

The template is made aside and linked into place, never replaced
(awnn/aside.py): two commands making it at once each make one, the
first placed is used.  A copy MLflow does not accept (a template
damaged on disk) is removed with the template, and the store is made by
MLflow itself (tracking/checks.py, `prepare_store`).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from awnn import aside

__all__ = ["TESTED_MLFLOW", "SWITCH", "CACHE_ENV", "enabled", "copy_empty_store", "forget_template", "template_path"]

TESTED_MLFLOW = ("3.17.", "3.18.")  # version prefixes this was written and tested against
SWITCH = "AWNN_MLFLOW_SPEEDUPS"
CACHE_ENV = aside.CACHE_ENV
_warned: list[str] = []


def _initializer():
    """MLflow's private `_initialize_tables(engine)`, or None where it moved."""
    try:
        from mlflow.store.db import utils
    except ImportError:  # pragma: no cover - another MLflow layout
        return None
    f = getattr(utils, "_initialize_tables", None)
    return f if callable(f) else None


def enabled() -> bool:
    """The switch is on, the installed MLflow is a tested one and its private target is there."""
    if os.environ.get(SWITCH, "1") == "0":
        return False
    import mlflow

    version = getattr(mlflow, "__version__", "")
    if not version.startswith(TESTED_MLFLOW) or _initializer() is None:
        if version not in _warned:
            _warned.append(version)
            print(f"awnn: MLflow {version} is not one the store speed-up was tested with ({', '.join(p + 'x' for p in TESTED_MLFLOW)}): "
                  f"MLflow makes each new store itself (set {SWITCH}=0 to silence this)", file=sys.stderr)
        return False
    return True


def template_path() -> Path:
    """Where the empty store of the installed MLflow version is kept."""
    import mlflow

    return aside.cache_dir() / f"mlflow-{mlflow.__version__}-empty-store.db"


def copy_empty_store(dest: Path) -> bool:
    """Write an empty store (MLflow's tables at its latest revision, no
    experiment) to the new file `dest` from the template, made first where
    there is none; False, having written nothing, where the speed-up does
    not apply (the caller lets MLflow make the store)."""
    if not enabled():
        return False
    try:
        template = _template()
    except Exception:  # noqa: BLE001 - an unwritable or full cache folder: MLflow's own path, which reports what is wrong
        return False
    if template is None:
        return False
    try:
        shutil.copyfile(template, dest)
    except OSError:  # the template removed meanwhile (forget_template elsewhere), a full disk, ...: MLflow's own
        aside.remove(dest)  # path, whose error (if any) the command reports as it always has
        return False
    except BaseException:
        aside.remove(dest)
        raise
    return True


def forget_template() -> None:
    """Remove the template (MLflow refused a copy of it): the next store remakes it."""
    try:
        aside.remove(template_path())
    except Exception:  # noqa: BLE001 - no home: there was no template either
        pass


def _template() -> Path | None:
    path = template_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    aside.remove_abandoned(path)
    made = aside.aside_path(path)
    try:
        _make(made)
        aside.place(made, path)
    finally:
        aside.remove(made)
    return path if path.exists() else None


def _make(path: Path) -> None:
    """MLflow's tables at their latest revision, in the new SQLite file `path`."""
    import logging

    import sqlalchemy

    initialize = _initializer()
    if initialize is None:  # pragma: no cover - enabled() said it was there
        raise OSError("MLflow's _initialize_tables is gone")
    log = logging.getLogger("mlflow.store.db.utils")  # (its two INFO lines: the command names the store itself)
    level = log.level
    if level == logging.NOTSET:
        log.setLevel(logging.WARNING)
    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    try:
        initialize(engine)
    finally:
        engine.dispose()
        log.setLevel(level)
