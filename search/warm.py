"""Imported by the local Ray's worker processes before they take work.

`search.tune.init_ray` lists this module in Ray's `preload_python_modules`
when it starts a local Ray: the workers Ray starts with the node (one per
CPU) import what a trial needs - torch (and torch._dynamo, which the first
optimiser step imports, ~1.3 s by itself), Ray Tune, the trainer - while the
driver still sets up MLflow and the Tuner, then leave a mark in
$AWNN_WARM_DIR so the driver can wait for the rest of the warm-up instead of
having Ray start more processes next to them.
"""
import os

import torch  # noqa: F401
import torch._dynamo  # noqa: F401
import ray.tune  # noqa: F401

import awnn.train  # noqa: F401
import search.tune  # noqa: F401

_dir = os.environ.get("AWNN_WARM_DIR")
if _dir and os.path.isdir(_dir):
    with open(os.path.join(_dir, str(os.getpid())), "w"):
        pass
