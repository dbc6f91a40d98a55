"""The fixed-width baseline MLP: every hidden layer as wide as the config
says, kaiming-initialised, with the adaptive MLP's interface (`widths`,
`update_width`) so that the trainer treats both alike.  A width of 0 is a
linear read-out (paper Table 4)."""
from __future__ import annotations

import torch
import torch.nn as nn

from .activations import resolve_activation
from .init import fill_, init_std

__all__ = ["FixedMLP"]


class FixedMLP(nn.Module):
    """The fixed-width baseline with the same interface as AdaptiveMLP."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        hidden_layers: int = 1,
        width: int = 64,
        activation: str = "relu",
        init: str = "kaiming",
        init_distribution: str = "gaussian",
        layer_widths: list[int] | None = None,
    ):
        super().__init__()
        if hidden_layers < 0:
            raise ValueError(f"hidden_layers cannot be negative, but got {hidden_layers=}.")
        if width < 0:
            raise ValueError(f"width cannot be negative, but got {width=}.")
        if layer_widths and (len(layer_widths) != hidden_layers or min(layer_widths) < 1):
            raise ValueError(f"layer_widths must give {hidden_layers} widths >= 1, but got {layer_widths=}.")
        if width == 0 and not layer_widths:  # width 0: no hidden layer, a linear read-out (paper Table 4)
            hidden_layers = 0
        self.activation = activation
        self._act = resolve_activation(activation)
        self.init_distribution = init_distribution
        dims = [in_features] + (list(layer_widths) if layer_widths else [width] * hidden_layers) + [out_features]
        self.layers = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
        self.reset_parameters()

    @property
    def widths(self) -> list[int]:
        return [layer.out_features for layer in self.layers[:-1]]

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for layer in self.layers:
                fill_(layer.weight, init_std("kaiming", layer.in_features, None), self.init_distribution)
                layer.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for layer in self.layers[:-1]:
            h = self._act(layer(h))
        return self.layers[-1](h)

    def update_width(self, optimizer=None) -> bool:
        return False
