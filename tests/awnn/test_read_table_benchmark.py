"""benchmarks/read_table.py: task `table`'s read-and-check time on a generated file; its last line is one JSON object,
and what it reads is the file it wrote (features: numeric columns, one per category, one indicator per column with
gaps)."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_reads_the_file_it_writes_and_prints_one_json_line(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "read_table.py"), "--rows", "300", "--numeric", "3", "--text", "2",
                          "--gaps", "0.2", "--repeats", "2"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # 3 numeric columns, each with gaps (an indicator each), and the two text columns' 3 + 4 categories
    assert (result["rows"], result["features"], len(result["seconds"])) == (300, 3 + 3 + 3 + 4, 2)
    assert result["median_s"] > 0 and result["rows_per_s"] > 0 and result["bytes"] > 300 * 5
    assert list(tmp_path.iterdir()) == []  # (the file lived in a temporary folder)
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "read_table.py"), "--rows", "10"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert bad.returncode == 2 and "expected --rows >= 60" in bad.stderr
