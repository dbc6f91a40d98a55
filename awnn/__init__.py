"""Adaptive Width Neural Networks (Errica et al.) in pure PyTorch.

No Ray, no MLflow: `awnn.train.train(config, on_epoch=...)` is all a
scheduler or a tracker needs."""
from .config import ConfigError, TrainConfig
from .distributions import importance, rate_from_rho, rho_from_rate, width_from_rate
from .layers import AdaptiveMLP, AdaptiveWidth, FixedMLP, ResizableLinear, adaptive_modules, model_widths, update_widths
from .loss import RatePrior, elbo_loss

__all__ = [
    "TrainConfig",
    "ConfigError",
    "importance",
    "width_from_rate",
    "rho_from_rate",
    "rate_from_rho",
    "AdaptiveMLP",
    "AdaptiveWidth",
    "FixedMLP",
    "ResizableLinear",
    "adaptive_modules",
    "model_widths",
    "update_widths",
    "RatePrior",
    "elbo_loss",
]

__version__ = "0.1.0"
