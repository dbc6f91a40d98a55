"""Graph Isomorphism Network (Xu et al. 2019) as in Errica et al. (2020),
with fixed or adaptive MLPs (AWNN paper, appendix C.4).

    h_0 = act(MLP_in(x))                                      (nodes, E)
    h_l = act(BN(GINConv_l(h_{l-1})))   l = 1..L,  GINConv_l = MLP_l((1+eps) h + sum_neighbours h)
    logits = sum_l dropout(Linear_l(pool(h_l)))               (graphs, classes)

Each MLP has one hidden layer (`hidden_layers`): of `width` neurons for the
fixed model, adaptive for AWNN (the MLP before the convolutions and the one
inside every convolution).  The node-embedding size E between layers is
fixed, `embed_dim`; 0 means E = `width` for the fixed model (the standard
GIN, where "hidden units" sets both) and E = 64 for AWNN (the largest
width of the fixed grid), so that only the MLPs' hidden widths adapt.
Batch norm acts on the E-sized outputs of the convolutions (a batch norm
on an adaptive hidden layer would have to be resized with it), not on the
input MLP's: with REDDIT-BINARY's constant node feature every node has the
same input, and a batch norm there outputs the same value, beta = 0 at
initialisation, for every node, which erases the input for good.  The read-out sums the
per-layer predictions of every layer's pooled embedding (sum or mean).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import TrainConfig
from ..activations import resolve_activation
from .mlp import build_mlp

__all__ = ["GIN", "build_gin", "AWNN_EMBED_DIM"]

AWNN_EMBED_DIM = 64


class PooledBatchNorm(nn.BatchNorm1d):
    """BatchNorm1d over a batch of pooled graph embeddings; a training batch
    of one graph (the last, short batch of an epoch) is normalised with the
    running statistics instead of failing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training and x.shape[0] < 2:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0, self.eps)
        return super().forward(x)


class GIN(nn.Module):
    def __init__(self, in_features: int, num_classes: int, make_mlp, conv_layers: int = 2, embed_dim: int = 64, pooling: str = "sum",
                 dropout: float = 0.0, activation: str = "relu", readout_norm: str = "none"):
        super().__init__()
        from ..data.graphs import import_pyg, pyg_sources_in_memory

        import_pyg()
        from torch_geometric.nn import GINConv, global_add_pool, global_mean_pool

        if pooling not in ("sum", "mean"):
            raise ValueError(f"Could not resolve pooling {pooling!r} among choices ['sum', 'mean'].")
        self.pooling = pooling
        self._pool = global_add_pool if pooling == "sum" else global_mean_pool
        self._act = resolve_activation(activation)
        self.dropout = dropout
        self.input_mlp = make_mlp(in_features, embed_dim)
        with pyg_sources_in_memory():  # (PyG writes each layer class's propagate to a file in /tmp and leaves it)
            self.convs = nn.ModuleList(GINConv(make_mlp(embed_dim, embed_dim), train_eps=True) for _ in range(conv_layers))
        self.norms = nn.ModuleList(nn.BatchNorm1d(embed_dim) for _ in range(conv_layers))
        # readout_norm="batch": each pooled graph embedding is batch-normalised before its linear read-out.  With
        # sum pooling a graph's embedding grows with its node count; on graphs without node features whose sizes
        # span two orders of magnitude (REDDIT-BINARY) the logits of large graphs explode (test loss ~47 against
        # ~0.5 with it, same accuracy: docs/domains.md)
        if readout_norm not in ("none", "batch"):
            raise ValueError(f"Could not resolve readout_norm {readout_norm!r} among choices ['none', 'batch'].")

        def readout() -> nn.Module:
            linear = nn.Linear(embed_dim, num_classes)
            return nn.Sequential(PooledBatchNorm(embed_dim), linear) if readout_norm == "batch" else linear

        self.readouts = nn.ModuleList(readout() for _ in range(conv_layers + 1))

    def forward(self, data) -> torch.Tensor:
        x, edge_index, batch = data.x, data.edge_index, data.batch
        size = data.num_graphs
        h = self._act(self.input_mlp(x))  # (nodes, E)
        out = F.dropout(self.readouts[0](self._pool(h, batch, size)), self.dropout, self.training)  # (graphs, classes)
        for conv, norm, readout in zip(self.convs, self.norms, self.readouts[1:]):
            h = self._act(norm(conv(h, edge_index)))
            out = out + F.dropout(readout(self._pool(h, batch, size)), self.dropout, self.training)
        return out

    def mlps(self) -> list[nn.Module]:
        return [self.input_mlp] + [conv.nn for conv in self.convs]

    @property
    def widths(self) -> list[int]:
        return [w for m in self.mlps() for w in m.widths]

    def width_names(self) -> list[str]:
        names = []
        for block, m in zip(["input"] + [f"conv{i}" for i in range(len(self.convs))], self.mlps()):
            n = len(m.widths)
            names += [block] if n == 1 else [f"{block}_l{j}" for j in range(n)]
        return names


def build_gin(config: TrainConfig, task) -> GIN:
    embed = config.embed_dim or (AWNN_EMBED_DIM if config.adaptive else config.width)
    if embed < 1:
        raise ValueError("GIN needs a node-embedding size: set embed_dim >= 1 when width=0.")
    return GIN(
        task.in_features,
        task.num_classes,
        make_mlp=lambda i, o: build_mlp(config, i, o),
        conv_layers=config.conv_layers,
        embed_dim=embed,
        pooling=config.pooling,
        readout_norm=config.readout_norm,
        dropout=config.dropout,
        activation=config.activation,
    )
