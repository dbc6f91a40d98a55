"""A file made aside and put in place whole (a new MLflow store,
tracking/checks.py; the empty store it is copied from,
tracking/_mlflow_speedups.py; a compiled kernel library, awnn/native.py),
and the user's cache folder such files are made once in (`cache_dir`).

The file is made at `.NAME.PID-THREAD.new` beside its path, then hard-linked
to the path, which never replaces a file already there (two processes making
it at once: the first placed is used, the other's removed).  What another
process can see at the path is nothing or a whole file.  A file left aside by
a process that died while making it is removed by the next one that makes
the same path; one whose process still runs is left to it."""
from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["SUFFIX", "CACHE_ENV", "cache_dir", "aside_path", "place", "remove", "remove_abandoned"]

SUFFIX = ".new"
CACHE_ENV = "XDG_CACHE_HOME"


def cache_dir() -> Path:
    """Where files made once per user and machine are kept: `$XDG_CACHE_HOME/awnn`,
    else `~/.cache/awnn` (not created here; RuntimeError where there is no home)."""
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base) / "awnn"


def aside_path(path: Path, tag: str = "") -> Path:
    """Where this process and thread make `path` (`tag`: a second name for a second try)."""
    return path.parent / f".{path.name}.{os.getpid()}-{threading.get_ident()}{tag}{SUFFIX}"


def place(made: Path, path: Path) -> None:
    """`made` at `path` unless a file is already there (then `made` is dropped); `made` is gone afterwards."""
    try:
        os.link(made, path)  # (never replaces a file that is there: rename would)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not path.exists():
            os.replace(made, path)
    finally:
        remove(made)


def remove(path: Path) -> None:
    """`path` and its SQLite journal, where they are; one that cannot be removed is left (to `remove_abandoned`)."""
    for f in (path, path.with_name(path.name + "-journal")):
        try:
            f.unlink()
        except OSError:
            pass


def remove_abandoned(path: Path) -> None:
    """The files made aside for `path` by processes that no longer run."""
    for f in path.parent.glob(f".{path.name}.*{SUFFIX}"):
        pid = f.name[len(path.name) + 2:-len(SUFFIX)].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            remove(f)
        except PermissionError:
            pass  # another user's live process
