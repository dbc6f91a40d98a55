"""ResNet-20 (He et al. 2016, section 4.2) with a fixed or adaptive classifier.

    conv3x3(16) -> 3 x BasicBlock(16) -> 3 x BasicBlock(32, stride 2)
               -> 3 x BasicBlock(64, stride 2) -> global average pool -> head

The shortcut is the paper's option A for CIFAR (identity; when the shape
changes, subsample by 2 and zero-pad the new channels), so the convolutional
part has the 0.27M parameters of the original.  Following the AWNN paper
(appendix C.2), only the classifier changes between the compared models:

* fixed, width 0: a linear layer 64 -> classes;
* fixed, width w: one hidden layer of w neurons (Table 4: 32, 128, 256, 512);
* awnn: an AdaptiveMLP with one (or more) adaptive hidden layers, whose
  weights carry the ELBO's Gaussian prior; the convolutional part keeps
  plain weight decay (the trainer's parameter groups do that).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import TrainConfig
from ..fixed import FixedMLP
from ..layers import AdaptiveMLP
from .mlp import build_mlp

__all__ = ["BasicBlock", "ResNet20", "build_resnet20"]


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and an option-A shortcut."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.stride = stride
        self.pad = channels - in_channels  # zero channels added by the shortcut

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.pad:
            x = F.pad(x, (0, 0, 0, 0, self.pad // 2, self.pad - self.pad // 2))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    """ResNet-20 features (B, C, H, W) -> (B, 64), then `head` -> (B, classes)."""

    def __init__(self, in_channels: int, head: nn.Module, blocks_per_stage: int = 3):
        super().__init__()
        self.stem = nn.Conv2d(in_channels, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        stages, c_in = [], 16
        for c_out, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(blocks_per_stage):
                stages.append(BasicBlock(c_in, c_out, stride if b == 0 else 1))
                c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.head = head
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                m.reset_parameters()
        self.stem.to(memory_format=torch.channels_last)
        self.stages.to(memory_format=torch.channels_last)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous(memory_format=torch.channels_last)  # about 2x faster convolutions on CPU
        h = F.relu(self.bn(self.stem(x)))  # (B, 16, H, W)
        h = self.stages(h)  # (B, 64, H/4, W/4)
        return h.mean(dim=(2, 3))  # (B, 64): global average pooling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))

    # widths of the classifier (fixed or adaptive), named for the trainer's records
    @property
    def widths(self) -> list[int]:
        return list(self.head.widths)

    def width_names(self) -> list[str]:
        n = len(self.head.widths)
        return ["head"] if n == 1 else [f"head_l{i}" for i in range(n)]


def build_resnet20(config: TrainConfig, task) -> ResNet20:
    """ResNet-20 for an image task (`task.in_channels`, `task.num_classes`)."""
    head = build_mlp(config, 64, task.num_classes)
    assert isinstance(head, (AdaptiveMLP, FixedMLP))
    return ResNet20(task.in_channels, head)
