"""The tracking contract (tracking/contract.py) is the one owner of the run
statuses, arm naming and the store helpers every module uses."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tracking import contract as C

ROOT = Path(__file__).resolve().parents[2]


def test_status_sets_nest_and_name_every_ending():
    assert set(C.SELECTABLE) < set(C.TERMINAL) < set(C.STATUSES)
    assert set(C.STATUSES) - set(C.TERMINAL) == {"interrupted", "running"}
    assert "stopped" in C.TERMINAL  # ASHA's early stops are endings, not open trials


def test_no_other_module_defines_a_status_set():
    """Status sets defined in several modules drifted apart once (one lacked `stopped`)."""
    owners = []
    for path in [*ROOT.glob("search/**/*.py"), *ROOT.glob("tracking/**/*.py")]:
        if path.name == "contract.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.Set, ast.List)):
                values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                if len(values & set(C.STATUSES)) >= 2:
                    owners.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert owners == [], f"status sets outside tracking/contract.py: {owners}"


@pytest.mark.parametrize("family,repeat,repeats,arm", [("tpe", 1, 1, "tpe"), ("tpe", 2, 3, "tpe.r2"), ("random", 10, 12, "random.r10"),
                                                       ("fixed", 1, 1, "fixed")])
def test_arm_names_round_trip_to_their_family(family, repeat, repeats, arm):
    assert C.arm_name(family, repeat, repeats) == arm
    assert C.arm_family(arm) == family


def test_params_parse_back_to_what_was_logged():
    assert [C.parse_param(v) for v in ("3", "0.01", "1e-05", "True", "False", "relu", "")] == [3, 0.01, 1e-05, True, False, "relu", ""]


def test_uris_lose_their_credentials():
    assert C.redact_uri("http://alice:s3cret@mlflow:5000") == "http://***@mlflow:5000"
    assert C.redact_uri("postgresql://u:p@db/mlflow") == "postgresql://***@db/mlflow"
    assert C.redact_uri("sqlite:////tmp/mlflow.db") == "sqlite:////tmp/mlflow.db"
    assert (C.redact_uri("s3://bucket/x?region=eu-west-1&access_key=AKIA1&secret_key=s3cret&session_token=t0k")
            == "s3://bucket/x?region=eu-west-1&access_key=***&secret_key=***&session_token=***")


def test_default_tracking_uri_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert C.default_tracking_uri() == "http://127.0.0.1:5000"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)
    assert C.default_tracking_uri() == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert C.experiment_name("spiralhard") == "awnn-spiralhard"


def test_tag_names_have_one_owner():
    """Every MLflow tag name is a `Tag` constant; no other module in search/ or
    tracking/ spells one as a string (a typo there would write a tag nobody reads)."""
    import re

    assert len(set(C.TAGS)) == len(C.TAGS) and all(t.startswith("awnn.") for t in C.TAGS)
    assert {"awnn.kind", "awnn.status", "awnn.order", "awnn.stops_early"} <= set(C.TAGS)
    spelled = []
    for path in [*ROOT.glob("search/**/*.py"), *ROOT.glob("tracking/**/*.py")]:
        if path.name == "contract.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"awnn\.[a-z_]+", node.value):
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert spelled == [], f"tag names spelled outside tracking/contract.py: {spelled}"
    assert C.tag_equals((C.Tag.KIND, "comparison"), (C.Tag.TASK, "spiral")) == "tags.`awnn.kind` = 'comparison' and tags.`awnn.task` = 'spiral'"
