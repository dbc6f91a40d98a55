"""Adaptive Width Neural Networks (Errica et al.) in pure PyTorch.

No Ray, no MLflow: `awnn.train.train(config, on_epoch=...)` is all a
scheduler or a tracker needs.  Names are imported on first use, so that
`import awnn.config` (the CLI's argument checks) does not pay for torch."""
from __future__ import annotations

import importlib

_EXPORTS = {
    "TrainConfig": "config",
    "ConfigError": "config",
    "importance": "distributions",
    "width_from_rate": "distributions",
    "rho_from_rate": "distributions",
    "rate_from_rho": "distributions",
    "AdaptiveMLP": "layers",
    "AdaptiveWidth": "layers",
    "FixedMLP": "fixed",
    "ResizableLinear": "layers",
    "adaptive_modules": "layers",
    "model_widths": "layers",
    "RatePrior": "loss",
    "elbo_loss": "loss",
}

__all__ = list(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'awnn' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
