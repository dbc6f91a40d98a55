"""Imported by the local Ray's worker processes before they take work.

`search.tune.init_ray` lists this module in Ray's `preload_python_modules`
when it starts a local Ray: the workers Ray starts with the node (one per
CPU) import what a trial needs - torch, Ray Tune, the trainer - while the
driver still sets up MLflow and the Tuner, then leave a mark in
$AWNN_WARM_DIR so the driver can wait for the rest of the warm-up instead of
having Ray start more processes next to them (`<pid>.failed` where an import
failed: the driver waited out its 60 s bound for such workers, 2026-12-07).

Not dynamo, torch's compiler (1.1 CPU-s of the 3.6 s a worker's warm-up took on a
2-core Xeon): the trials of the tabular tasks never import it (the lean Adam
skips torch.optim's wrappers that do, awnn/lean_adam.py `UNWRAPPED`; the
stacked trainer uses no torch.optim).  A trial with another optimiser (SGD)
imports it at its first step, once per worker.
"""
import os

failed = None
try:
    import torch  # noqa: F401
    import ray.tune  # noqa: F401

    import awnn.train  # noqa: F401
    import search.tune  # noqa: F401
except ImportError as e:  # (`ulimit -v`, a module missing): the worker lives on, and its trial, hitting the same
    failed = f"{type(e).__name__}: {e}"  # error, stops the comparison in one line (search/node_limits.py); the
    # mark says it came, so that the driver does not wait out wait_for_warm_workers' bound for it

_dir = os.environ.get("AWNN_WARM_DIR")
if _dir and os.path.isdir(_dir):
    with open(os.path.join(_dir, str(os.getpid()) + (".failed" if failed else "")), "w") as _mark:
        _mark.write(failed or "")
