"""tracking/draws.py's verdict line and draws.md on summaries of every shape
(real stores: tests/tracking/test_draws_ray.py)."""
from __future__ import annotations

from tracking.draws import draws_markdown, verdict_line


def _summary(baseline="fixed", cpus=("AMD EPYC",), awnn_savings=((2.5, 1.8), (0.9, 0.8))):
    arms = ["fixed", "awnn"] if baseline == "fixed" else ["tpe", "random"]
    draws = []
    for seed, (sel, tot) in enumerate(awnn_savings):
        row = {"train_seed": seed, "comparison": f"c{seed}", "cpus": list(cpus), "arms": {}}
        for arm in arms:
            row["arms"][arm] = {"selection_hours": 0.1, "total_hours": 0.2, "test_acc_mean": 0.995}
        if baseline == "fixed":
            row["arms"]["awnn"].update({"selection_savings": sel, "total_savings": tot})
        draws.append(row)
    over = {}
    if baseline == "fixed":
        sels, tots = [s for s, _ in awnn_savings if s is not None], [t for _, t in awnn_savings if t is not None]

        def block(v):
            return {"min": min(v) if v else None, "median": None, "max": max(v) if v else None, "cheaper_in": sum(x > 1 for x in v),
                    "of": len(v), "pooled": 1.4 if v else None}
        over["awnn"] = {"selection": block(sels), "total": block(tots), "test_acc": [0.99, 0.999]}
    out = {"task": "spiralhard", "budget": "standard", "arms": arms, "baseline": baseline if baseline == "fixed" else None,
            "baseline_test_acc": [0.995, 0.995] if baseline == "fixed" else None, "seeds": [d["train_seed"] for d in draws],
            "draws": draws, "over_draws": over, "cpus": sorted(set(cpus)), "set_aside": []}
    out["verdict"] = verdict_line(out)
    return out


def test_the_line_counts_the_draws_an_arm_was_cheaper_in_and_gives_range_and_pooled_savings():
    line = verdict_line(_summary())
    assert line == ("Over 2 draws (train seeds 0, 1) of spiralhard at budget standard: awnn's selection was cheaper than fixed's in 1 of 2 draws "
                    "(0.900x to 2.50x, pooled 1.40x), with re-training in 1 of 2 (0.800x to 1.80x, pooled 1.40x); tested at 99.00-99.90%; "
                    "fixed tested at 99.50%."), line


def test_draws_on_several_cpu_models_are_named():
    line = verdict_line(_summary(cpus=("AMD EPYC", "Intel Xeon")))
    assert line.endswith("The draws ran on 2 CPU models (AMD EPYC; Intel Xeon): their float rounding moves the trials too.")


def test_no_baseline_and_an_arm_without_savings_are_said_not_computed():
    assert verdict_line(_summary(baseline=None)) == "2 draws; no savings: the comparison ran neither `fixed` nor `awnn` (the baselines)."
    line = verdict_line(_summary(awnn_savings=((None, None), (None, None))))
    assert "awnn: no savings in any draw" in line
    md = draws_markdown(_summary(awnn_savings=((None, None), (None, None))))
    assert "| 0 | `c0` |" in md and "n/a / n/a" in md  # a draw's missing savings shown as n/a, not 0 or nan


def test_the_markdown_has_a_row_per_draw_and_the_spread_per_arm():
    s = _summary()
    s["set_aside"] = [{"comparison": "old", "train_seed": 1, "why": "the same train seed as c1, which counts (the comparison asked for, or the newer)"}]
    md = draws_markdown(s)
    assert md.splitlines()[2] == verdict_line(s)
    assert "| 0 | `c0` | 0.1 | 0.1 | 2.50x / 1.80x | 99.50% | 99.50% |" in md and "| 1 | `c1` | 0.1 | 0.1 | 0.900x / 0.800x |" in md
    assert "| awnn | 1 of 2 | 0.900x | n/a | 2.50x | 1.40x | 1 of 2 | 0.800x | n/a | 1.80x | 1.40x |" in md
    assert "- `old` (train seed 1): the same train seed as c1" in md
