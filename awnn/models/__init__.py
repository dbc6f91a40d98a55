"""Model construction by task kind.  Each domain registers a builder
`(config, task) -> nn.Module` in BUILDERS; adaptive blocks inside any model
are found by `awnn.layers.adaptive_modules`."""
from __future__ import annotations

from typing import Callable

import torch.nn as nn

from ..config import TrainConfig
from .mlp import build_mlp

__all__ = ["BUILDERS", "build_model"]

def _lazy(module: str, function: str) -> Callable[[TrainConfig, object], nn.Module]:
    def build(config: TrainConfig, task) -> nn.Module:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{module}"), function)(config, task)

    return build


BUILDERS: dict[str, Callable[[TrainConfig, object], nn.Module]] = {
    "tabular": lambda config, task: build_mlp(config, task.in_features, task.num_classes),
    "image": _lazy("resnet", "build_resnet20"),  # ResNet-20, fixed or adaptive classifier
    "graph": _lazy("gin", "build_gin"),  # GIN, fixed or adaptive MLPs
    "text": _lazy("transformer", "build_transformer"),  # Transformer, fixed or adaptive FFNs
}


def build_model(config: TrainConfig, task) -> nn.Module:
    try:
        builder = BUILDERS[task.kind]
    except KeyError:
        raise ValueError(f"Could not resolve a model for task kind {task.kind!r} among choices {sorted(BUILDERS)}.") from None
    return builder(config, task)
