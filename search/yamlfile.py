"""Reading a YAML input file (a grid, a budget) with one-line errors that
name the file and what is wrong with it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import UsageError

__all__ = ["read_yaml_file"]


def read_yaml_file(path: Path, kind: str, error: type[UsageError]) -> Any:
    """The parsed content of `path`, a `kind` file ("grid", "budget"); any
    problem raises `error` naming the file: missing, unreadable, not UTF-8,
    malformed YAML (with its line and column)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: no such {kind} file") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not a UTF-8 text file (byte {e.object[e.start]:#04x} at offset {e.start})") from None
    except OSError as e:
        raise error(f"{path}: cannot read the {kind} file ({e.strerror or type(e).__name__})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise error(f"{path}: malformed YAML{where}: {problem}") from None
