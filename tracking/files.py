"""Files awnn writes for its users (the cost report's folder, grid files):
written whole or not at all.

A report is several files that belong together (report.md, report.html,
summary.json, the PNG plots).  Written in place, a driver interrupted while
writing them (Ctrl-C or SIGTERM just after the comparison finished, a
SIGKILL, a full disk) would leave a truncated report.html, or a new
report.md beside the previous summary.json.  Here every file is first
written to a staging folder inside the destination (`.staging-<pid>`, the
same file system), and only when all are complete are they moved into
place, each by one `os.replace` (atomic on POSIX): the destination holds the
previous report or the new one, never a cut file, and the moves take
microseconds, not the seconds the report takes to build.  A staging folder
a killed writer left behind is removed by the next writer of that folder
(unless its process is still alive).

    with staged_folder(out) as stage:
        (stage / "report.md").write_text(text)
        ...
    # every file now in `out`; on an exception nothing in `out` changed

`write_atomic(path, text)` is the same for one file.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

__all__ = ["STAGING_PREFIX", "staged_folder", "write_atomic"]

STAGING_PREFIX = ".staging-"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _remove_stale(folder: Path) -> None:
    """Staging folders and temporary files in `folder` of writers that are
    gone (killed while writing)."""
    for p in folder.glob(STAGING_PREFIX + "*"):
        pid = p.name[len(STAGING_PREFIX):].split("-")[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()


@contextlib.contextmanager
def staged_folder(out: str | Path) -> Iterator[Path]:
    """A staging folder whose files are moved into `out` (created if needed)
    when the block ends normally; on any exception (KeyboardInterrupt
    included) it is removed and `out` is left as it was.  Subfolders are not
    supported: write files only."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    stage = out / f"{STAGING_PREFIX}{os.getpid()}-{id(out):x}"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    try:
        yield stage
        names = sorted(p.name for p in stage.iterdir())
        if any((stage / n).is_dir() for n in names):
            raise ValueError(f"staged_folder({out}): only files can be staged, found folder(s) in {stage}")
        for name in names:
            os.replace(stage / name, out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def write_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path`: the complete new content or the old file,
    never a cut one (a temporary file beside it, then os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path.parent)
    tmp = path.with_name(f"{STAGING_PREFIX}{os.getpid()}-{path.name}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
