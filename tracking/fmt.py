"""How the report and the commands write numbers: device-hours, percentages, ratios, seconds, dates, and strict JSON
(`json_safe`, `json_text`: what every JSON the product writes goes through)."""
from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any

import numpy as np

PHASE_LABEL = {"selection": "selection", "assessment": "re-training", "total": "total"}


# -------------------------------------------------------------- formatting
def _finite(x: Any) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool) and math.isfinite(float(x))


def fh(x: Any) -> str:
    """Device-hours with 3 significant digits."""
    return f"{float(x):.3g}" if _finite(x) else "n/a"


def fpct(x: Any, digits: int = 2) -> str:
    return f"{100 * float(x):.{digits}f}%" if _finite(x) else "n/a"


def fratio(x: Any) -> str:
    return f"{float(x):.2f}x" if _finite(x) else "n/a"


def fsec(x: Any) -> str:
    if not _finite(x):
        return "n/a"
    x = float(x)
    if x < 120:
        return f"{x:.1f} s"
    if x < 7200:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.2f} h"


def fbytes(n: Any) -> str:
    """A size in bytes, binary units: 0 B, 512 B, 3.0 MiB, 1.2 GiB."""
    if not _finite(n):
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def fnum(x: Any, fmt: str = ".3g") -> str:
    return format(float(x), fmt) if _finite(x) else "n/a"


def _date(ms: Any) -> str:
    if not _finite(ms):
        return "unknown"
    return _dt.datetime.fromtimestamp(float(ms) / 1000.0, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 issue`, `2 issues`, `1 other comparison`: the count with its noun in the right number."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


# -------------------------------------------------------------- JSON
def json_safe(x: Any) -> Any:
    """`x` as strict JSON values: NaN and +-inf -> None (Python's `json` would write the literals NaN and
    Infinity, which RFC 8259 has not: JavaScript's JSON.parse, Go, serde_json and `jq --seq`-style
    tools reject them), numpy scalars -> Python, tuples -> lists, keys -> strings."""
    if isinstance(x, dict):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def json_text(x: Any, **kwargs: Any) -> str:
    """`json.dumps` of `json_safe(x)` that cannot write a non-finite number (allow_nan=False); what it cannot
    encode (a path, a date) as its str()."""
    kwargs.setdefault("default", str)
    return json.dumps(json_safe(x), allow_nan=False, **kwargs)
