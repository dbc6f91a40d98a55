"""The suite's modules start longest first (tests/module_order.py), under pytest-xdist too: real pytest runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import module_order

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


class Item:
    """What module_order reads of a pytest item: its id and its marks."""

    def __init__(self, nodeid: str, *marks: str):
        self.nodeid, self.marks = nodeid, set(marks)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None


def test_the_longest_module_goes_first_each_keeps_its_tests_in_order_and_an_unknown_one_is_estimated_from_its_marks():
    items = [Item("tests/a.py::t1"), Item("tests/a.py::t2[x::y]"), Item("tests/b.py::t1"),
             Item("tests/c.py::t1", "fault"), Item("tests/c.py::t2", "slow"), Item("tests/d.py::t1")]
    table = {"tests/a.py": 5.0, "tests/b.py": 50.0, "tests/d.py": 5.0}
    ordered = [i.nodeid for i in module_order.longest_first(items, table)]
    # b (50 s), c (not in the table: a fault test and a slow one, 30 s), then a and d (5 s each: collection order)
    assert ordered == ["tests/b.py::t1", "tests/c.py::t1", "tests/c.py::t2", "tests/a.py::t1", "tests/a.py::t2[x::y]", "tests/d.py::t1"]
    assert module_order.estimate(items, table)["tests/c.py"] == module_order.PER_TEST_S["fault"] + module_order.PER_TEST_S["slow"]
    assert sorted(ordered) == sorted(i.nodeid for i in items)  # nothing lost, nothing twice


def test_the_checked_in_table_is_a_valid_table_and_names_modules_that_exist():
    table = module_order.load_table(module_order.TABLE)
    assert table, "tests/module_times.json is missing or empty: refresh it (python tests/module_order.py --from-junit ...)"
    missing = [m for m in table if not (ROOT / m).is_file()]
    assert len(missing) <= len(table) // 10, f"the table names {len(missing)} modules that no longer exist: {missing[:5]}"


def _pytest(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWNN_TEST_ORDER", "AWNN_TEST_TIMES", "PYTEST_"))}
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=e)


def _collected(p: subprocess.CompletedProcess) -> list[str]:
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return [line for line in p.stdout.splitlines() if "::" in line]


def test_the_suites_own_collection_follows_the_table_and_a_bad_setting_is_a_usage_error_naming_it(tmp_path):
    modules = ["tests/test_machine.py", "tests/test_docs_links.py"]
    collect = [*modules, "--collect-only", "-q"]
    as_collected = _collected(_pytest(collect, ROOT, {"AWNN_TEST_ORDER": "collected"}))
    assert [module_order.module_of(i) for i in as_collected][0] == modules[0]
    for heavy in modules:
        table = tmp_path / f"{Path(heavy).stem}.json"
        table.write_text(json.dumps({m: (100.0 if m == heavy else 1.0) for m in modules}))
        ids = _collected(_pytest(collect, ROOT, {"AWNN_TEST_TIMES": str(table)}))
        assert module_order.module_of(ids[0]) == heavy
        assert sorted(ids) == sorted(as_collected)
    bad = tmp_path / "bad.json"
    bad.write_text('{"tests/test_machine.py": "slow"}')
    for env, named in (({"AWNN_TEST_TIMES": str(bad)}, "'slow'"), ({"AWNN_TEST_TIMES": str(tmp_path / "none.json")}, "no such file"),
                       ({"AWNN_TEST_ORDER": "shortest"}, "AWNN_TEST_ORDER='shortest'")):
        p = _pytest(collect, ROOT, env)
        assert p.returncode == 4, p.stdout[-1000:] + p.stderr[-1000:]  # pytest's usage error
        assert named in p.stderr, p.stderr[-1000:]


CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import module_order

def pytest_configure(config):
    module_order.configure(config)

def pytest_collection_modifyitems(config, items):
    module_order.reorder(config, items)
"""


def test_xdist_runs_the_modules_longest_first_not_by_how_many_tests_they_hold(tmp_path):
    pytest.importorskip("xdist")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "test_many.py").write_text("".join(f"def test_m{i}():\n    pass\n" for i in range(6)))
    (tests / "test_one.py").write_text("def test_o():\n    pass\n")
    (tests / "test_two.py").write_text("def test_t1():\n    pass\ndef test_t2():\n    pass\n")
    table = tmp_path / "times.json"
    table.write_text(json.dumps({"tests/test_one.py": 90.0, "tests/test_two.py": 40.0, "tests/test_many.py": 3.0}))

    def started(env: dict) -> list[str]:
        # one worker: it takes the modules in the queue's order
        p = _pytest(["tests", "-n", "1", "--dist", "loadfile", "-v"], tmp_path, env)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        seen: list[str] = []
        for line in p.stdout.splitlines():
            if "PASSED" in line and "::" in line:
                module = line.split("PASSED", 1)[1].strip().split("::")[0]
                if module not in seen:
                    seen.append(module)
        return seen

    assert started({"AWNN_TEST_TIMES": str(table)}) == ["tests/test_one.py", "tests/test_two.py", "tests/test_many.py"]
    # xdist's own order (AWNN_TEST_ORDER=collected): the most tests first, the order the table's exists to replace
    assert started({"AWNN_TEST_TIMES": str(table), "AWNN_TEST_ORDER": "collected"})[0] == "tests/test_many.py"
