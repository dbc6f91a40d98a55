"""The report's statement of how the trials ran (tracking/execution.py): one
config per trial or fused groups (--fuse), and whether denormals were flushed."""
from types import SimpleNamespace

import pandas as pd
import pytest

from tracking.execution import execution, execution_text


def data(groups, fuse=1, flush=True):
    runs = pd.DataFrame({"strategy": [a for a, _ in groups], "group": [g for _, g in groups]}, columns=["strategy", "group"])
    return SimpleNamespace(runs=runs, comparison={"fuse": fuse, "flush_denormal": flush})


def test_unfused_comparison():
    d = data([("fixed", ""), ("awnn", "")])
    assert execution(d) == {"fuse": 1, "flush_denormal": True, "fused_configs": 0, "groups": 0, "by_arm": {}}
    text = execution_text(d)
    assert text.startswith("Execution: one config per Ray trial:") and "flushed to zero" in text


def test_fused_comparison_counts_configs_and_groups_per_arm():
    d = data([("fixed", "fuse-sel-0000"), ("fixed", "fuse-sel-0000"), ("fixed", "fuse-sel-0002"), ("fixed", ""), ("awnn", "")], fuse=8)
    e = execution(d)
    assert e["fused_configs"] == 3 and e["groups"] == 2 and e["by_arm"] == {"fixed": {"configs": 3, "groups": 2}}
    assert "**fused trials** (`--fuse 8`)" in execution_text(d) and "fixed: 3 configs in 2 Ray trials" in execution_text(d)


@pytest.mark.parametrize("flush, words", [(False, "were kept (`--keep-denormals`)"), (None, "not recorded")])
def test_denormals_kept_or_not_recorded(flush, words):
    d = data([("fixed", "")], fuse=4, flush=flush)
    text = execution_text(d)
    assert words in text and "`--fuse 4` was set, but no arm had fusable configs" in text
