"""The hidden layers' activations, by the names a config gives them
(TrainConfig.activation): shared by the adaptive MLP (awnn/layers.py), the
fixed one (awnn/fixed.py), the stacked one (awnn/stacked.py) and GIN."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

__all__ = ["ACTIVATIONS", "resolve_activation"]

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "leaky_relu": F.leaky_relu,
    "relu6": F.relu6,
    "tanh": torch.tanh,
    "gelu": F.gelu,
}


def resolve_activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"Could not resolve activation {name!r} among choices {sorted(ACTIVATIONS)}.") from None
