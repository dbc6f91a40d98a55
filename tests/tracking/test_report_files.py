"""The report's folder and awnn's grid files are written whole or not at all
(tracking/files.py): an interrupt, an error or a SIGKILL while a report is
being written leaves the previous report as it was, byte for byte, and the
next writer cleans up after a killed one."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_awnn
from tracking import analysis as A
from tracking.files import STAGING_PREFIX, staged_folder, write_atomic


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() if p.is_file() else "<folder>" for p in sorted(folder.iterdir())}


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ------------------------------------------------------------ the mechanism
def test_a_staged_folder_moves_every_file_in_at_the_end(tmp_path):
    out = tmp_path / "out"
    with staged_folder(out) as stage:
        (stage / "a.txt").write_text("new a")
        (stage / "b.bin").write_bytes(b"\x00\x01")
        assert not (out / "a.txt").exists()  # nothing in place before the block ends
    assert snapshot(out) == {"a.txt": b"new a", "b.bin": b"\x00\x01"}


@pytest.mark.parametrize("error", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_an_error_or_an_interrupt_leaves_the_folder_as_it_was(tmp_path, error):
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "b.txt").write_text("old b")
    before = snapshot(out)
    with pytest.raises(type(error)):
        with staged_folder(out) as stage:
            (stage / "a.txt").write_text("new a")
            raise error
    assert snapshot(out) == before  # no new a.txt beside the old b.txt, no staging folder


def test_only_files_can_be_staged(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="only files"):
        with staged_folder(out) as stage:
            (stage / "a.txt").write_text("a")
            (stage / "sub").mkdir()
    assert snapshot(out) == {}


def test_a_killed_writers_leftovers_go_and_a_live_ones_stay(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead, live = dead_pid(), os.getppid()
    (out / f"{STAGING_PREFIX}{dead}-1").mkdir()
    (out / f"{STAGING_PREFIX}{dead}-1" / "report.md").write_text("cut")
    (out / f"{STAGING_PREFIX}{dead}-grid.yaml").write_text("cut")
    (out / f"{STAGING_PREFIX}{live}-1").mkdir()
    with staged_folder(out) as stage:
        (stage / "a.txt").write_text("a")
    assert sorted(p.name for p in out.iterdir()) == [f"{STAGING_PREFIX}{live}-1", "a.txt"]


def test_write_atomic_replaces_whole_or_not_at_all(tmp_path):
    path = tmp_path / "grids" / "spiralhard-awnn.yaml"
    write_atomic(path, "old: 1\n")
    write_atomic(path, "new: 2\n")
    assert path.read_text() == "new: 2\n"
    with pytest.raises(TypeError):
        write_atomic(path, None)  # fails while writing: the file keeps its content, no temporary file stays
    assert path.read_text() == "new: 2\n" and sorted(p.name for p in path.parent.iterdir()) == [path.name]


# --------------------------------------------------- the report, really killed
KILLED_WRITER = """
import sys, time
from pathlib import Path
import tracking.report as R
real = R.render_html
def slow_html(*a, **k):
    text = real(*a, **k)
    Path(sys.argv[3]).write_text("writing")  # the plots, report.md are staged: the test kills us now
    time.sleep(600)
    return text
R.render_html = slow_html
R.write_report(sys.argv[1], sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.fault
def test_a_report_writer_killed_midway_leaves_the_previous_report_whole(smoke_comparison, tmp_path):
    uri = smoke_comparison["tracking_uri"]
    cid = A.find_comparison(uri)[0].data.tags["awnn.comparison"]
    out = tmp_path / "report"
    first = run_awnn(["report", "--tracking-uri", uri, "--out", str(out), "--comparison", cid], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    fresh = snapshot(out)
    assert {"report.md", "report.html", "summary.json"} <= set(fresh)
    for name in fresh:  # an older report's files: different bytes from those the writer is about to make
        with open(out / name, "ab") as f:
            f.write(b"\n(an older report)\n")
    before = snapshot(out)
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, uri, str(out), str(marker)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the writer never reached the report's HTML"
            time.sleep(0.2)
        staging = [p for p in out.iterdir() if p.name.startswith(STAGING_PREFIX)]
        assert staging and any(f.suffix == ".png" for f in staging[0].iterdir())  # killed with new files staged
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    after = {k: v for k, v in snapshot(out).items() if not k.startswith(STAGING_PREFIX)}
    assert after == before  # the previous report, byte for byte: no cut file, no mix of old and new
    again = run_awnn(["report", "--tracking-uri", uri, "--out", str(out), "--comparison", cid], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert snapshot(out) == fresh  # the new report whole (the same store gives the same files), the killed writer's staging folder gone


@pytest.mark.slow
@pytest.mark.parametrize("out", ["a-file", "a-file/report"])
def test_an_out_that_is_or_lies_under_a_file_is_one_line(smoke_comparison, tmp_path, out):
    """`awnn report --out` under a file was a NotADirectoryError traceback after the MLflow reads."""
    (tmp_path / "a-file").write_text("not a folder\n")
    p = run_awnn(["report", "--tracking-uri", smoke_comparison["tracking_uri"], "--out", out], cwd=tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [f"awnn report: error: --out {out}: a-file is a file, not a folder"]
    assert (tmp_path / "a-file").read_text() == "not a folder\n"
