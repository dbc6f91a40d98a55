"""The trial's code is the driver's.

A node of a cluster runs the project as installed there: an image built
before the driver's checkout moved on, a virtual environment another user
updated.  Where a module is missing the trial cannot start
(tracking.contract.environment_failure); where the code merely differs the
trial ran it and its result counted as the driver's: other training
semantics, or a config the old code rejects, counted as a failure of that
config.  The driver hands every trial the SHA-256 of each source file of
this project's packages (`source_files`, in the trial settings); the trial
compares the files of the project modules its process has loaded
(`check_same_code`): those are the code it runs (a trial never loads the
report's or the CLI's modules, so a driver with edits there is not refused).
A difference is a `CodeMismatch`, an ImportError: the environment's fault,
the comparison stops at that trial, and `--resume` runs it once the node has
the driver's version.  `AWNN_CODE_CHECK=0` (the driver's environment) turns
the check off: the trials then run whatever their nodes have.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

__all__ = ["PACKAGES", "SWITCH", "CodeMismatch", "source_files", "check_same_code"]

PACKAGES = ("awnn", "search", "tracking")  # this project's packages (pyproject.toml)
SWITCH = "AWNN_CODE_CHECK"
SHOWN = 5  # files named in a mismatch's line, at most


class CodeMismatch(ImportError):
    """This process's copy of the project differs from the driver's in a file it runs."""


_CACHE: dict[str, str] = {}


def _package_roots() -> dict[str, Path]:
    import importlib

    return {name: Path(importlib.import_module(name).__file__).resolve().parent for name in PACKAGES}


def source_files() -> dict[str, str]:
    """{'search/sweep.py': its SHA-256's first 16 hex digits, ...} for every .py file of this project's packages as this
    process finds them (computed once per process: ~120 files, a few ms); {} where the check is off."""
    if os.environ.get(SWITCH, "1") == "0":
        return {}
    if not _CACHE:
        for name, root in _package_roots().items():
            for path in sorted(root.rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                rel = f"{name}/{path.relative_to(root).as_posix()}"
                _CACHE[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return dict(_CACHE)


def _loaded_files() -> dict[str, Path]:
    """The source files of this project's modules loaded in this process, by their path relative to the package's parent."""
    roots = _package_roots()
    found: dict[str, Path] = {}
    for name, module in list(sys.modules.items()):
        top = name.split(".", 1)[0]
        path = getattr(module, "__file__", None)
        if top not in roots or not path or not path.endswith(".py"):
            continue
        try:
            rel = Path(path).resolve().relative_to(roots[top])
        except ValueError:  # (a module of that name from elsewhere)
            continue
        found[f"{top}/{rel.as_posix()}"] = Path(path)
    return found


def check_same_code(expected: dict[str, str] | None) -> None:
    """Raise CodeMismatch when a loaded module's file of this project differs from the driver's (`expected`:
    source_files() of the driver) or the driver has none of that name.  Nothing to check without `expected` (the
    driver's check off, or a driver from before the check)."""
    if not expected:
        return
    differ, extra = [], []
    for rel, path in sorted(_loaded_files().items()):
        digest = _CACHE.get(rel) or hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        _CACHE.setdefault(rel, digest)
        want = expected.get(rel)
        if want is None:
            extra.append(rel)
        elif want != digest:
            differ.append(rel)
    if not differ and not extra:
        return
    named = [f"{rel} differs" for rel in differ] + [f"{rel} is not in the driver's copy" for rel in extra]
    more = f" and {len(named) - SHOWN} more" if len(named) > SHOWN else ""
    raise CodeMismatch(f"this node's copy of the project differs from the driver's in the code a trial runs: "
                       f"{', '.join(named[:SHOWN])}{more}")
