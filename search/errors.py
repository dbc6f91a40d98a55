"""User-facing errors of the search layer: one line each, exit code 2."""
from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: the CLI prints it as one line and exits 2."""


class SearchError(ValueError):
    """Bad input or an unreachable service (the CLI prints it and exits 2)."""


def connect_error(address: str, error: BaseException) -> SearchError:
    msg = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return SearchError(f"--address {address}: cannot join the Ray cluster ({msg[:200]})")
