"""The synthetic binary tasks of the paper (section 4, appendix B, Fig. 8).

The paper ships its generators only as supplementary material, so these are
our own, with every parameter written down here:

* DoubleMoon (2,500 points): two interleaving half circles of radius 1.
  Class 0: (cos a, sin a), a ~ U(0, pi); class 1: (1 - cos a, 0.5 - sin a).
  Gaussian noise, std 0.1, on both coordinates.  Linearly inseparable but
  easy (the paper's fixed and AWNN MLPs both reach 100%).
* Spiral (2,500 points): two interleaved arms.  Point at arm position
  t ~ U(0.1, 1): radius t, angle 2*pi*turns*t + pi*class, turns = 1.5.
  Gaussian noise, std 0.03.
* SpiralHard (5,000 points): the same double spiral with twice the turns
  (turns = 3), so neighbouring arms are half as far apart (0.15 vs 0.3
  in radius) and the decision boundary winds twice as often.

Classes are balanced (n/2 each).  Features are the raw 2-D coordinates,
which already lie within about [-1.5, 2]; no further scaling.  Everything
is drawn from `numpy.random.default_rng(seed)`; seed 0 is the dataset the
grids use.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GENERATORS", "double_moon", "spiral", "make_tabular"]


def double_moon(n: int = 2500, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n0 = n // 2
    a0 = rng.uniform(0.0, np.pi, n0)
    a1 = rng.uniform(0.0, np.pi, n - n0)
    x0 = np.stack([np.cos(a0), np.sin(a0)], 1)
    x1 = np.stack([1.0 - np.cos(a1), 0.5 - np.sin(a1)], 1)
    x = np.concatenate([x0, x1]) + rng.normal(0.0, noise, (n, 2))
    y = np.concatenate([np.zeros(n0, int), np.ones(n - n0, int)])
    return x.astype(np.float32), y


def spiral(n: int = 2500, turns: float = 1.5, noise: float = 0.03, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.zeros(n // 2, int), np.ones(n - n // 2, int)])
    t = rng.uniform(0.1, 1.0, n)
    angle = 2.0 * np.pi * turns * t + np.pi * y
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) + rng.normal(0.0, noise, (n, 2))
    return x.astype(np.float32), y


GENERATORS = {
    "doublemoon": lambda seed: double_moon(2500, seed=seed),
    "spiral": lambda seed: spiral(2500, turns=1.5, seed=seed),
    "spiralhard": lambda seed: spiral(5000, turns=3.0, seed=seed),
}


def make_tabular(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return GENERATORS[name](seed)
