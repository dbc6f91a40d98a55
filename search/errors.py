"""User-facing errors: one line each, naming what is wrong and where; the
CLI prints them as `awnn <command>: error: <message>` and exits 2.

    UsageError           the common parent of the search layer's errors
      GridError          a grid file (search/grid.py)
      BudgetError        a budget name or budget file (search/budget.py)
      OptionError        a command-line option (--strategies, --repeats, --cpus-per-trial, --optuna-storage, ...)
      SearchError        a service that cannot be reached or joined (the Ray cluster)
        TokenRefused     the Ray cluster refused the driver's token (or its lack of one)
        TrialsNotRun     Ray Tune ended before every trial of a phase ran (resumable)
        StorageFull      a trial could not write its checkpoint: no space left, a quota, a read-only disk (resumable)
        WorkerLost       a trial's worker process was lost more often than --max-failures allows (resumable)
        TrialEnvironment a trial's process could not import its code on its node: a module missing, `ulimit -v` (resumable)
        StudyUnwritable  TPE's Optuna study could not be written (--optuna-storage full, read-only, its server gone) (resumable)

The other layers' input errors are their own (awnn.config.ConfigError,
awnn.data.DataError, tracking.checks.TrackingUnavailable,
tracking.reader.AnalysisError); `user_errors()` lists every class the CLI
reports this way, so that no command has to translate them.
"""
from __future__ import annotations

import os
import re
from typing import Mapping

__all__ = ["UsageError", "GridError", "BudgetError", "OptionError", "SearchError", "TokenRefused", "TrialsNotRun", "StorageFull", "WorkerLost", "TrialEnvironment", "StudyUnwritable", "storage_error", "lost_worker_error", "connect_error", "client_address_error", "auth_refused", "version_remedy", "user_errors", "out_of_memory"]


class UsageError(Exception):
    """Bad input from the user: the CLI prints it as one line and exits 2."""


class GridError(UsageError, ValueError):
    """A grid file is invalid; the message names the file and the key."""


class BudgetError(UsageError, ValueError):
    """An unknown budget name, or an invalid budget file."""


class OptionError(UsageError, ValueError):
    """A command-line option has a value that cannot work."""


class SearchError(UsageError, ValueError):
    """A service the search needs cannot be reached (the Ray cluster)."""


class TokenRefused(SearchError):
    """The Ray cluster given by --address refused the driver's token (or its lack of one): token authentication."""


class TrialsNotRun(SearchError):
    """Ray Tune returned while trials of a phase had no result (the cluster
    ended them without telling the driver): the comparison fails, `--resume` runs them."""


class StorageFull(SearchError):
    """A trial could not write its checkpoint for want of room or permission
    (no space left on the device, a disk quota, a read-only disk, a folder it
    may not write): the comparison stops, its trials in flight interrupted;
    `--resume` runs them once it can be written."""


class WorkerLost(SearchError):
    """A trial's worker process was lost (killed, out of memory, its node
    died) once more than --max-failures allows: the comparison stops, its
    trials in flight interrupted, none counted as a failure of its config;
    `--resume` runs them once the nodes are fixed."""


class TrialEnvironment(SearchError):
    """A trial's process could not import its code on its node (a module missing there, another version of the
    project, a library it could not map into memory under `ulimit -v`): no config causes it and no retry there cures
    it, so the comparison stops at the first such trial, its trials in flight interrupted; `--resume` runs them once
    the node is fixed (search/node_limits.py)."""


class StudyUnwritable(SearchError):
    """TPE's Optuna study could not be written (its --optuna-storage full,
    read-only, locked, its database server gone): TPE cannot ask for another
    config, so the comparison stops, its trials in flight interrupted;
    `--resume` goes on with the same study once it can be written."""


def storage_remedy(code: int | None, option: str = "--storage", nodes: bool = True) -> str:
    """What to do about a write that failed with `code` (tracking.contract.STORAGE_ERRNOS) under `option`
    (`nodes`: written by the trials, on every node, not by the driver alone)."""
    from tracking.contract import NO_ROOM_ERRNOS

    if code is None or code in NO_ROOM_ERRNOS:
        return f"make room (or give another {option})"
    return (f"make it writable by this user{' on every node that runs trials' if nodes else ''} (its permissions, "
            f"a read-only or missing mount) (or give another {option})")


def storage_error(error: BaseException) -> OSError | None:
    """The OSError in `error`'s chain (itself, its causes and contexts) of a
    write that found no room or permission (tracking.contract.STORAGE_ERRNOS), or None."""
    from tracking.contract import STORAGE_ERRNOS

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in STORAGE_ERRNOS:
            return error
        error = error.__cause__ or error.__context__
    return None


def lost_worker_error(error: BaseException) -> BaseException | None:
    """The loss of a worker process in `error`'s chain (itself, its causes,
    contexts and a Ray task error's `cause`; tracking.contract.lost_worker:
    killed, crashed, its node dead, Ray's memory monitor), or None."""
    from tracking.contract import lost_worker

    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if lost_worker(e):
            return e
        todo += [x for x in (getattr(e, "cause", None), e.__cause__, e.__context__) if isinstance(x, BaseException)]
    return None


def client_address_error(address: str, from_env: bool = False) -> SearchError | None:
    """The line for a Ray Client address (`ray://host:10001`), or None for any other.  Under Ray Client, Ray Tune
    runs the search in an actor on the cluster (ray/tune/tuner.py), not in the driver: the driver's callbacks
    (its MLflow records, the stall watch, the progress lines) would run there, on another machine."""
    if not address.strip().lower().startswith("ray://"):
        return None
    given = f"RAY_ADDRESS={address}" if from_env else f"--address {address}"
    return SearchError(f"{given}: a Ray Client address, which awnn cannot use: under Ray Client, Ray Tune "
                       "runs the search on the cluster, not in this driver, which records every trial in MLflow and "
                       "watches them; give the head's GCS address instead (host:6379, as `ray start --head` prints it: "
                       "this machine must reach the cluster's nodes), or run awnn on the head node")


def connect_error(address: str, error: BaseException, output: str = "", environ: Mapping[str, str] | None = None) -> SearchError:
    """The line for a join of the Ray cluster at `address` that failed with `error`; `output`: what Ray wrote to the
    driver's stderr meanwhile (its C++ client's retries), where a refused token shows too (`auth_refused`)."""
    if auth_refused(output) or auth_refused(_chain_text(error)):
        return TokenRefused(f"--address {address}: the Ray cluster there requires a token (its token authentication is "
                           f"on) and refused this driver: {_token_remedy(os.environ if environ is None else environ)}")
    text = " ".join(str(error).split()) or type(error).__name__
    versions = _VERSION_MISMATCH.search(text)
    if versions:
        return SearchError(f"--address {address}: cannot join the Ray cluster: {version_remedy(*versions.groups())}")
    return SearchError(f"--address {address}: cannot join the Ray cluster ({text if len(text) <= 500 else text[:500] + ' ...'})")


def _chain_text(error: BaseException | None) -> str:
    """The text of `error` and of the errors it was raised from or during (Ray raises "Failed to connect to Ray
    cluster" from the error that says why)."""
    texts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        texts.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(texts)


# Ray's check of a driver against the cluster it joins (ray/_private/utils.py check_version_info), whitespace collapsed
_VERSION_MISMATCH = re.compile(r"Version mismatch: The cluster was started with: Ray: (\S+) Python: (\S+) "
                               r"This process on node \S+ was started with: Ray: (\S+) Python: (\S+)")
# Ray's C++ client, once a second while the GCS refuses it (Ray 2.59-2.60)
_AUTH_REFUSED = ("InvalidAuthToken", "Authentication token is missing or incorrect")


def auth_refused(output: str) -> bool:
    """`output` (what a join wrote to stderr, or its error's text) says the cluster's GCS refused the driver's token
    (or its lack of one)."""
    return any(mark in output for mark in _AUTH_REFUSED)


def _token_remedy(environ: Mapping[str, str]) -> str:
    """Which token this driver sent, as Ray picks it (RAY_AUTH_MODE=token, then RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
    ~/.ray/auth_token), and what to do."""
    where = ("set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN (or in a file named by "
             "RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token); `ray get-auth-token` on the cluster's head node prints it")
    if (environ.get("RAY_AUTH_MODE") or "").strip().lower() != "token":
        given = " (RAY_AUTH_TOKEN is set, but Ray sends it only with RAY_AUTH_MODE=token)" if environ.get("RAY_AUTH_TOKEN") else ""
        return f"it sent none, as RAY_AUTH_MODE is not `token`{given}: {where}"
    if (environ.get("RAY_AUTH_TOKEN") or "").strip():
        sent = "the token in RAY_AUTH_TOKEN"
    elif environ.get("RAY_AUTH_TOKEN_PATH"):
        sent = f"the token in {environ['RAY_AUTH_TOKEN_PATH']} (RAY_AUTH_TOKEN_PATH)"
    else:
        sent = "the token in ~/.ray/auth_token"
    return f"{sent} is not the cluster's: put the cluster's token there ({where.partition('; ')[2]})"


def version_remedy(cluster_ray: str, cluster_python: str, driver_ray: str, driver_python: str) -> str:
    """The versions of a refused join, and what to do (Ray joins only the same Ray and, by default, the same Python
    down to its patch version: RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL)."""
    said = (f"it runs Ray {cluster_ray} on Python {cluster_python}, this driver Ray {driver_ray} on Python "
            f"{driver_python}, and Ray joins only the same versions")
    if cluster_ray == driver_ray and cluster_python.split(".")[:2] == driver_python.split(".")[:2]:
        return (f"{said}: the Pythons differ only in their patch version, so set RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL="
                f"minor for this driver (Ray then joins with a warning), or run it with Python {cluster_python}")
    minor = ".".join(cluster_python.split(".")[:2])
    patch = (f"; a Python {minor} other than {cluster_python} joins with RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor"
             if cluster_python != driver_python else "")
    return (f"{said}: run the driver with the cluster's (pip install 'ray[tune]=={cluster_ray}' in Python {cluster_python}"
            f"{patch}) or start the cluster from this driver's (cluster/Dockerfile pins the image's Ray)")


def user_errors() -> tuple[type[BaseException], ...]:
    """Every error class the CLI reports as one line with exit code 2."""
    from awnn.config import ConfigError
    from awnn.data import DataError
    from tracking.checks import TrackingUnavailable
    from tracking.reader import AnalysisError

    return (UsageError, ConfigError, DataError, TrackingUnavailable, AnalysisError)


def out_of_memory(error: BaseException) -> str | None:
    """What an allocation that failed for want of memory said, in one line
    (torch's CPU allocator, CUDA, Python's or numpy's MemoryError), searched
    along the error's causes; None for any other error.  The CLI reports it
    as one line with exit code 1 (the run failed; the same config may fit a
    machine with more memory), not as a traceback."""
    import re

    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        text = str(e).strip()
        cause = getattr(e, "cause", None)  # a Ray task's error: what the task raised
        if isinstance(cause, BaseException) and id(cause) not in seen:
            found = out_of_memory(cause)
            if found:
                return found
        by_type = isinstance(e, MemoryError) or type(e).__name__ == "OutOfMemoryError"  # (Ray's memory monitor's too)
        if by_type or "can't allocate memory" in text or "out of memory" in text.lower():
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            said = [ln for ln in lines if "can't allocate memory" in ln or "out of memory" in ln.lower()]
            line = lines[0] if by_type and lines else (said[0] if said else type(e).__name__)
            line = re.sub(r"\[enforce fail at [^\]]*\] err == 0\.\s*", "", line)
            line = re.sub(r"allocate (\d+) bytes", lambda m: f"{m.group(0)} ({int(m.group(1)) / 2**30:.1f} GiB)", line)
            return line
        e = e.__cause__ or e.__context__
    return None
