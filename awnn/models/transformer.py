"""Encoder-decoder Transformer (Vaswani et al. 2017) whose feed-forward blocks
are fixed or adaptive MLPs (AWNN paper, appendix C.3).

    src (B, S), tgt_in (B, T) -> logits (B, T, vocab)

Post-norm layers as in the original: x = LN(x + Dropout(SelfAttn(x))),
then (decoder only) cross-attention to the encoder output, then
x = LN(x + Dropout(FFN(x))).  FFN is an MLP d_model -> hidden -> d_model
with one hidden layer: `width` neurons (fixed; the paper tries 128 ... 2048)
or adaptive (AWNN, starting rate 0.004, about 576 neurons at k = 0.9).
Source and target share one vocabulary, one embedding (scaled by
sqrt(d_model), plus sinusoidal positions) and the output projection (tied
to the embedding, as in the original).  Unlike torch's TransformerLayer
there is no dropout inside the FFN, for fixed and adaptive alike.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..config import TrainConfig
from .mlp import build_mlp

__all__ = ["FeedForward", "EncoderLayer", "DecoderLayer", "Transformer", "build_transformer"]


class FeedForward(nn.Module):
    """Applies an MLP (fixed or adaptive) to every position: (B, T, d) -> (B, T, d)."""

    def __init__(self, mlp: nn.Module):
        super().__init__()
        self.mlp = mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        return self.mlp(x.reshape(b * t, d)).reshape(b, t, -1)


class EncoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn: FeedForward, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, heads, dropout=dropout, batch_first=True)
        self.ffn = ffn
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        a = self.self_attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        x = self.norm1(x + self.drop(a))
        return self.norm2(x + self.drop(self.ffn(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, heads: int, ffn: FeedForward, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, heads, dropout=dropout, batch_first=True)
        self.cross_attn = nn.MultiheadAttention(d_model, heads, dropout=dropout, batch_first=True)
        self.ffn = ffn
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, y: torch.Tensor, memory: torch.Tensor, causal: torch.Tensor, tgt_pad: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        a = self.self_attn(y, y, y, attn_mask=causal, key_padding_mask=tgt_pad, need_weights=False)[0]
        y = self.norm1(y + self.drop(a))
        a = self.cross_attn(y, memory, memory, key_padding_mask=src_pad, need_weights=False)[0]
        y = self.norm2(y + self.drop(a))
        return self.norm3(y + self.drop(self.ffn(y)))


def sinusoids(length: int, d_model: int) -> torch.Tensor:
    """(length, d_model) sinusoidal position encodings (Vaswani et al. 2017, 3.5)."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)[:, : d_model // 2]
    return pe


class Transformer(nn.Module):
    def __init__(self, vocab_size: int, pad_id: int, make_mlp, d_model: int = 512, heads: int = 8, encoder_layers: int = 6, decoder_layers: int = 6, dropout: float = 0.1, max_len: int = 128):
        super().__init__()
        self.pad_id = int(pad_id)
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=self.pad_id)
        self.register_buffer("positions", sinusoids(max_len, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, heads, FeedForward(make_mlp(d_model, d_model)), dropout) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, heads, FeedForward(make_mlp(d_model, d_model)), dropout) for _ in range(decoder_layers))
        with torch.no_grad():
            nn.init.normal_(self.embed.weight, std=d_model**-0.5)
            self.embed.weight[self.pad_id].zero_()

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.positions.shape[0]:
            raise ValueError(f"sequence of {t} tokens is longer than max_len={self.positions.shape[0]}")
        return self.drop(self.embed(ids) * math.sqrt(self.d_model) + self.positions[:t])  # (B, T, d)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        src_pad = src == self.pad_id  # (B, S)
        h = self._embed(src)
        for layer in self.encoder:
            h = layer(h, src_pad)
        return h, src_pad

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor) -> torch.Tensor:
        t = tgt_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).triu(1)  # True = not attended
        tgt_pad = tgt_in == self.pad_id
        y = self._embed(tgt_in)
        for layer in self.decoder:
            y = layer(y, memory, causal, tgt_pad, src_pad)
        return F.linear(y, self.embed.weight)  # (B, T, vocab), tied output projection

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        src, tgt_in = inputs
        memory, src_pad = self.encode(src)
        return self.decode(tgt_in, memory, src_pad)

    def ffns(self) -> list[tuple[str, nn.Module]]:
        return [(f"enc{i}_ffn", l.ffn.mlp) for i, l in enumerate(self.encoder)] + [(f"dec{i}_ffn", l.ffn.mlp) for i, l in enumerate(self.decoder)]

    @property
    def widths(self) -> list[int]:
        return [w for _, m in self.ffns() for w in m.widths]

    def width_names(self) -> list[str]:
        names = []
        for block, m in self.ffns():
            n = len(m.widths)
            names += [block] if n == 1 else [f"{block}_l{j}" for j in range(n)]
        return names


def build_transformer(config: TrainConfig, task) -> Transformer:
    return Transformer(
        task.num_classes,
        task.pad_id,
        make_mlp=lambda i, o: build_mlp(config, i, o),
        d_model=config.d_model,
        heads=config.heads,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        dropout=config.dropout,
        max_len=max(config.max_len, getattr(task, "max_len", 0)),
    )
