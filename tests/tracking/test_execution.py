"""The report's statement of how the trials ran (tracking/execution.py): one
config per trial or fused groups (--fuse), and whether denormals were flushed."""
from types import SimpleNamespace

import pandas as pd
import pytest

from tracking.execution import execution, execution_text


def data(groups, fuse=1, flush=True, cpus=None):
    cpus = cpus or [""] * len(groups)
    runs = pd.DataFrame({"strategy": [a for a, _ in groups], "group": [g for _, g in groups], "cpu": cpus}, columns=["strategy", "group", "cpu"])
    return SimpleNamespace(runs=runs, comparison={"fuse": fuse, "flush_denormal": flush})


def test_unfused_comparison():
    d = data([("fixed", ""), ("awnn", "")])
    assert execution(d) == {"fuse": 1, "flush_denormal": True, "fused_configs": 0, "groups": 0, "by_arm": {}, "cpus": {"not recorded": 2}}
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


def test_the_cpus_the_runs_trained_on_are_counted_and_more_than_one_is_said_loudly():
    """Float results differ between CPU models: a SpiralHard tie went to another AWNN config on another CPU
    (docs/results.md, "The standard verdict, a tie away"), so the report names the CPUs and warns when they differ."""
    one = data([("fixed", ""), ("awnn", "")], cpus=["AMD EPYC (AVX512)", "AMD EPYC (AVX512)"])
    assert execution(one)["cpus"] == {"AMD EPYC (AVX512)": 2}
    assert "CPU: AMD EPYC (AVX512) (2 runs)." in execution_text(one)
    # a run retried on another node counts for both CPUs; the most used first
    two = data([("fixed", ""), ("fixed", ""), ("awnn", "")],
               cpus=["Intel(R) Xeon(R) Processor (AVX512)", "Intel(R) Xeon(R) Processor (AVX512); AMD EPYC (AVX2)", "AMD EPYC (AVX2)"])
    assert execution(two)["cpus"] == {"AMD EPYC (AVX2)": 2, "Intel(R) Xeon(R) Processor (AVX512)": 2}
    text = execution_text(two)
    assert "**The trials ran on 2 CPUs**: AMD EPYC (AVX2) (2 runs), Intel(R) Xeon(R) Processor (AVX512) (2 runs)." in text
    assert "may rank otherwise on another machine" in text
    # stores from before the tag: nothing said; a mix names the unrecorded ones too
    assert "CPU: " not in execution_text(data([("fixed", "")])) and "CPUs" not in execution_text(data([("fixed", "")]))
    assert "not recorded (1 run)" in execution_text(data([("fixed", ""), ("awnn", "")], cpus=["", "AMD EPYC (AVX2)"]))
