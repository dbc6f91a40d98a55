"""MLPs for tabular tasks: the adaptive one (AWNN) and the fixed baseline."""
from __future__ import annotations

from ..config import TrainConfig
from ..fixed import FixedMLP
from ..layers import AdaptiveMLP

__all__ = ["AdaptiveMLP", "FixedMLP", "build_mlp"]


def build_mlp(config: TrainConfig, in_features: int, num_classes: int):
    if config.adaptive:
        return AdaptiveMLP(
            in_features,
            num_classes,
            hidden_layers=config.hidden_layers,
            rate=config.rate,
            quantile_k=config.quantile_k,
            activation=config.activation,
            init=config.init,
            init_distribution=config.init_distribution,
            grow_init=config.grow_init,
            max_width=config.max_width,
            prior_on_readout=config.prior_on_readout,
            width_rule=config.width_rule,
            renormalise_importances=config.renormalise_importances,
            rate_min=config.rate_min,
            reset_optimizer_on_resize=config.reset_optimizer_on_resize,
            bias_init=config.bias_init,
            scale_free=config.scale_free_weights,
        )
    return FixedMLP(
        in_features,
        num_classes,
        hidden_layers=config.hidden_layers,
        width=config.width,
        activation=config.activation,
        init_distribution=config.init_distribution,
        layer_widths=[int(w) for w in config.layer_widths.split(",")] if config.layer_widths else None,
    )
