"""Model construction by task kind.  Each domain registers a builder
`(config, task) -> nn.Module` in BUILDERS; adaptive blocks inside any model
are found by `awnn.layers.adaptive_modules`."""
from __future__ import annotations

from typing import Callable

import torch.nn as nn

from ..config import TrainConfig
from .mlp import build_mlp

__all__ = ["BUILDERS", "build_model", "load_model", "MODEL_FORMAT", "MODEL_TASK_ATTRS"]

# a kept model's file (awnn.train.Trainer.export_model writes it, load_model reads it): its format tag, and
# the task attributes the model builders read (so a model is built back without its data)
MODEL_FORMAT = "awnn-model-v1"
MODEL_TASK_ATTRS = ("name", "kind", "in_features", "num_classes", "in_channels", "image_size", "pad_id", "max_len")

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


def load_model(source, map_location: str = "cpu") -> nn.Module:
    """A model kept by a re-training run (`model.pt`: MLflow artifact `model/`
    of its trial run, written by `Trainer.export_model`), built from its
    config and loaded with its weights, in eval mode; `source` is the file's
    path or its loaded content.  No data is needed (a text model still needs
    its tokenizer to turn sentences into ids: the task's)."""
    import types

    import torch

    state = torch.load(source, map_location=map_location, weights_only=False) if not isinstance(source, dict) else source
    if not isinstance(state, dict) or state.get("format") != MODEL_FORMAT:
        raise ValueError(f"{source if not isinstance(source, dict) else 'model'}: not an awnn model file (missing format {MODEL_FORMAT!r})")
    config = TrainConfig.from_dict(state["config"])
    model = build_model(config, types.SimpleNamespace(**state["task"]))
    model.load_state_dict(state["model"])  # resizes adaptive layers to the saved widths
    return model.eval()

