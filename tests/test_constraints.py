"""constraints.txt, the versions `make install` installs: one pin per package, the same pins as the Makefile and the
cluster image where they name one, and (under `make test`, whose install used it) the versions installed."""
from __future__ import annotations

import os
import re
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "constraints.txt"
MARKER = 'python_version >= "3.11"'
LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)\s*;\s*(?P<marker>.+)$")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, raw in enumerate(PINS.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"constraints.txt line {number}: {raw!r} is not `name==version ; {MARKER}`"
        assert m["marker"].strip() == MARKER, f"constraints.txt line {number}: marker {m['marker']!r}, expected {MARKER!r}"
        key = _key(m["name"])
        assert key not in pins, f"constraints.txt line {number}: {m['name']} pinned twice"
        pins[key] = m["version"]
    return pins


def _makefile_pins() -> dict[str, str]:
    text = (ROOT / "Makefile").read_text()
    pins = {}
    for var in ("TORCH", "RAY"):
        m = re.search(rf"^{var}\s*:=\s*(.+)$", text, re.M)
        assert m, f"Makefile has no {var} :="
        for spec in m[1].split():
            name, _, version = spec.partition("==")
            pins[_key(name.split("[")[0])] = version
    return pins


def test_every_line_is_one_exact_pin_of_one_package():
    pins = _pins()
    assert len(pins) > 50, f"constraints.txt pins only {len(pins)} packages: not a whole environment"
    for must in ("torch", "ray", "mlflow", "optuna", "pandas", "pytest", "torch-geometric"):
        assert must in pins, f"constraints.txt does not pin {must}"
    left_to_torch = [k for k in pins if k.startswith(("nvidia-", "cuda-", "triton"))]
    assert not left_to_torch, f"pinned, though torch pins them per platform: {left_to_torch}"


def test_the_makefile_and_the_cluster_image_pin_the_same_versions():
    pins = _pins()
    for name, version in _makefile_pins().items():
        assert pins.get(name) == version, f"Makefile pins {name}=={version}, constraints.txt {pins.get(name)}"
    docker = (ROOT / "cluster" / "Dockerfile").read_text()
    mlflow_image = re.search(r"^ARG MLFLOW_VERSION=(\S+)$", docker, re.M)
    assert mlflow_image, "cluster/Dockerfile has no ARG MLFLOW_VERSION="
    assert pins["mlflow"] == mlflow_image[1], f"cluster/Dockerfile's MLflow {mlflow_image[1]}, constraints.txt {pins['mlflow']}"
    torch_image = re.search(r'^ARG TORCH_SPEC="([^"]+)"$', docker, re.M)
    assert torch_image, 'cluster/Dockerfile has no ARG TORCH_SPEC="..."'
    for spec in torch_image[1].split():
        name, _, version = spec.partition("==")
        assert pins[_key(name)] == version, f"cluster/Dockerfile pins {spec}, constraints.txt {pins[_key(name)]}"


@pytest.mark.skipif(os.environ.get("AWNN_REQUIRE_CHECKED_TORCH") != "1",
                    reason="not under `make test` (whose install used constraints.txt); a hand-made venv may differ")
def test_make_test_runs_in_the_pinned_environment():
    """The venv `make test` runs in holds the pinned version of every pinned package it has (the stamp depends on
    constraints.txt: a change there reinstalls)."""
    differ = []
    for name, version in _pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a package of another platform or Python
        if installed != version:
            differ.append(f"{name} {installed} (pinned {version})")
    assert not differ, f"installed versions other than constraints.txt's: {differ}"
