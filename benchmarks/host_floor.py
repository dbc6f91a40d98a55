"""What the AWNN step's ratio to the lean fixed step would be if its host-side
checks cost nothing: a what-if bound for issue #30's step target, not a
product path.

benchmarks/step_overhead.py times the product's AWNN step as a trial takes it:
`Trainer.update_widths()` (one read of rho, every layer's target width),
then `Trainer.train_step` -> awnn/fast_step.py's FastStep, whose first work is
LeanAdam.direct() (a walk over every parameter's Adam state, checking it
still fits before torch's fused kernel writes through it).  Here, on a
second Trainer with the same config, the same 1-hidden-layer measurement
(step_overhead.measure: windows, each followed by a lean fixed MLP of that
window's mean width) takes a stripped step instead:

* the width check inline: one read of rho and `width_for_rho` per layer; the
  product's update (a resize and Adam's reset) only when a width moves;
* FastStep called directly (no Trainer.train_step around it);
* Adam's state check done only after a width move, its result reused on the
  steps between (`_CachedDirect`): unsafe in general (nothing else may touch
  the optimiser), which is why the product keeps it.

Prints one JSON object as its last line, per run r (`--runs`, alternating the
two steppers so the hour's drift hits both):

    product: {...}, floor: {...}   step_overhead.measure's figures for each (ratio_vs_lean,
                                   awnn_still_us, awnn_moving_us, width_move_share_of_excess,
                                   ratio_vs_lean_without_moves, ...), per run
    floor_fast_steps               steps the floor stepper took on FastStep (every timed one
                                   whose widths it checked: the check that the bound measures
                                   the fast path)
    ratio_vs_lean_product, ratio_vs_lean_floor
                                   the median over the runs of each one's ratio_vs_lean

Measured 2026-12-06 on a 2-core AMD EPYC (`python benchmarks/host_floor.py`, 2 runs
each): the floor at 1.30-1.41 (median 1.355) against the product's 1.375-1.41 (1.393),
their steps that keep their widths at 1.26-1.28 against 1.34-1.36: the host checks are
~0.07 of the ratio, and the width moves (28% of steps, ~330-360 us each against ~210)
are 63-74% of what remains over the lean step at the median (docs/measurements.md).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import step_overhead  # noqa: E402  (this folder's script, as a module)
from tracking.fmt import json_text  # noqa: E402

from search.trial_common import worker_setup  # noqa: E402

PRODUCT_STEPPER = step_overhead.make_stepper


class _CachedDirect:
    """The FastStep's optimiser with `direct` answered from the last real check
    (taken again after every width move, `refresh`); everything else is the
    LeanAdam's."""

    def __init__(self, opt):
        self.__dict__["_opt"] = opt
        self.__dict__["_held"] = None

    def refresh(self, params) -> None:
        self.__dict__["_held"] = self._opt.direct(params)

    def direct(self, params):
        return self._held

    def __getattr__(self, name):
        return getattr(self._opt, name)

    def __setattr__(self, name, value):
        setattr(self._opt, name, value)


def make_floor_stepper(trainer, counter: list[int]):
    """The stripped step (module docstring) of `trainer`, an AWNN Trainer on
    FastStep's path; a fixed Trainer gets the product's stepper.  `counter[0]`
    counts the steps FastStep took."""
    if not trainer.blocks:
        return PRODUCT_STEPPER(trainer)
    prior = trainer.rate_prior(1)
    fast = trainer._fast
    if fast is None:
        raise SystemExit("the AWNN trainer does not take the fast step here (AWNN_FAST_STEP=0, no lean Adam, a GPU?)")
    cached = _CachedDirect(fast.opt)
    fast.opt = cached
    rho = trainer.model._parameters["rho"]
    ctrls = fast.ctrls

    def step(x, y):
        moved = False
        for c, r in zip(ctrls, rho.tolist()):
            if c.width_for_rho(r)[0] != c.width:
                moved = True
        if moved or cached._held is None:
            if moved:
                trainer.update_widths()
            cached.refresh(fast.params)
        if fast(x, y, prior, True) is None:  # (the first step: no Adam state yet)
            trainer.train_step(x, y, prior)
            cached.refresh(fast.params)
        else:
            counter[0] += 1

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1500, help="timed AWNN steps per run (default 1500)")
    ap.add_argument("--runs", type=int, default=2, help="runs of each stepper, alternating (default 2)")
    args = ap.parse_args()
    worker_setup({"cpus_per_trial": 1, "flush_denormal": True})  # as a trial's process
    cpu = torch.device("cpu")
    counter = [0]
    runs: dict = {"product": [], "floor": []}
    for r in range(args.runs):
        for kind in ("product", "floor") if r % 2 == 0 else ("floor", "product"):
            step_overhead.make_stepper = PRODUCT_STEPPER if kind == "product" else (lambda t: make_floor_stepper(t, counter))
            res = step_overhead.measure(1, cpu, args.steps)
            res.pop("_trainers")
            res.pop("read_out_products", None)
            runs[kind].append(res)
            print(f"{kind}: ratio_vs_lean {res['ratio_vs_lean']}, still {res.get('ratio_vs_lean_without_moves')}, "
                  f"moves' share {res.get('width_move_share_of_excess')}", file=sys.stderr, flush=True)
    step_overhead.make_stepper = PRODUCT_STEPPER
    print(json_text({"steps": args.steps, "runs": args.runs, **runs, "floor_fast_steps": counter[0],
                     "ratio_vs_lean_product": round(statistics.median(r["ratio_vs_lean"] for r in runs["product"]), 3),
                     "ratio_vs_lean_floor": round(statistics.median(r["ratio_vs_lean"] for r in runs["floor"]), 3)}))


if __name__ == "__main__":
    main()
