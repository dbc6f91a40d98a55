"""Which configs the stacked trainer (awnn/stacked.py) can train together:
the rules on a TrainConfig alone, without torch, so the driver groups a
sweep's trials (search/fusion.py) without importing it.  awnn.stacked
re-exports every name here."""
from __future__ import annotations

from .config import TrainConfig
from .data.table import TASK as TABLE  # a user's CSV file: in-memory tensors like the generated tasks
from .data.tabular import GENERATORS

__all__ = ["SLICE_KEYS", "GROUP_KEYS", "PAD_WIDTH", "PADDED", "check_fusable", "padded", "group_key"]

# SLICE_KEYS may differ between the slices of a fused group (each slice's own optimiser values, seed, selection rules,
# and its weights' initialisation: every slice is built apart); every other TrainConfig key is one value in a group, so
# a key the stack does not handle per slice can never differ inside one (GROUP_KEYS)
SLICE_KEYS = ("lr", "weight_decay", "adam_eps", "seed", "patience", "select_metric", "best_epoch_ties", "init", "init_distribution",
              "activation")
GROUP_KEYS = tuple(k for k in TrainConfig.keys() if k not in SLICE_KEYS)
PAD_WIDTH = 32  # uniform hidden widths up to this share a stack padded to its widest (docs/design.md "Fused trials": measured)
PADDED = f"<={PAD_WIDTH}"  # group_key's width value for such configs


def check_fusable(config: TrainConfig) -> None:
    """Raise a ValueError naming the key when `config` cannot be trained fused."""
    supported = {"model": ["fixed"], "task": sorted(GENERATORS) + [TABLE], "optimizer": ["adam"], "lr_schedule": ["none"]}
    for key, allowed in supported.items():
        if getattr(config, key) not in allowed:
            why = " (AWNN slices change width on their own: they are not stacked)" if key == "model" else ""
            raise ValueError(f"key {key!r}: fused training supports {allowed} only, found {getattr(config, key)!r}{why}")


def padded(config: TrainConfig) -> bool:
    """Is `config` a small uniform-width MLP that may share a stack with other
    widths up to PAD_WIDTH (padded to the group's widest; see StackedMLP)?"""
    return config.hidden_layers >= 1 and 1 <= config.width <= PAD_WIDTH and not config.layer_widths


def group_key(config: TrainConfig) -> tuple:
    """The values of GROUP_KEYS (a width up to PAD_WIDTH as one value): configs with equal keys can share a stack."""
    check_fusable(config)
    return tuple(PADDED if k == "width" and padded(config) else getattr(config, k, None) for k in GROUP_KEYS)
