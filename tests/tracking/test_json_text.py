"""tracking.fmt.json_safe / json_text: every JSON the product writes (summary.json, `awnn train`'s result,
`awnn study`'s rows, `awnn grids --json`) is strict RFC 8259 JSON."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import strict_json
from tracking.fmt import json_safe, json_text


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan"), np.float64("-inf")])
def test_a_non_finite_number_anywhere_is_written_as_null(bad):
    obj = {"a": bad, "rows": [{"x": bad, "y": (1, bad)}], 3: [[bad]]}
    out = strict_json(json_text(obj))
    assert out == {"a": None, "rows": [{"x": None, "y": [1, None]}], "3": [[None]]}


def test_finite_values_numpy_scalars_and_other_objects_keep_their_value():
    obj = {"f": 0.25, "i": 7, "b": True, "s": "x", "n": None, "np_f": np.float32(0.5), "np_i": np.int64(3), "np_b": np.bool_(False),
           "path": Path("/tmp/a")}
    out = strict_json(json_text(obj, sort_keys=True))
    assert out == {"f": 0.25, "i": 7, "b": True, "s": "x", "n": None, "np_f": 0.5, "np_i": 3, "np_b": False, "path": "/tmp/a"}
    assert type(json_safe(np.int64(3))) is int and type(json_safe(np.float32(0.5))) is float and json_safe(True) is True


def test_json_text_never_writes_a_non_finite_literal_even_from_an_object_it_does_not_know():
    class Weird:
        def __str__(self):
            return "weird"
    text = json_text([Weird(), float("nan")])
    assert "NaN" not in text and strict_json(text) == ["weird", None]
