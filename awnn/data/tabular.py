"""The synthetic binary tasks of the paper (section 4, appendix B, Fig. 8).

Two benchmarks live here.

**The authors' data** (task names `doublemoon`, `spiral`, `spiralhard`, the
default): our own generators written from the facts of the authors' public
release (issue #14; their code is not used):

* SpiralHard: 5,000 points per class.  Arm position n = sqrt(U) * 8 pi
  (4 turns), point (-n cos n, n sin n) + N(0, 0.3^2) per coordinate; the
  other class is the point reflection of the same points; every coordinate
  is then divided by 2 (radius up to ~12.6, noise std 0.15).  Split
  7,200 train / 800 validation / 2,000 test (20% test, then 10% of the rest
  for validation); the inner split re-splits the 8,000 90/10.  Features are
  not normalised.
* Spiral: the same with 2 turns (n = sqrt(U) * 4 pi), 2,500 points per
  class, 3,600 / 400 / 1,000.
* DoubleMoon: radius 10, noise std 0.3.  The facts give only these two
  numbers; the layout (upper moon (r cos a, r sin a), lower moon
  (r - r cos a, r/2 - r sin a), a ~ U(0, pi)) and the size (2,500 per class,
  split as Spiral) are our choices, written down here.
  The paper's Table 2 (2,500 / 2,500 / 5,000 points, 70/10/20) describes
  smaller sets than the authors' runs used.

**This project's earlier data** (task names `doublemoon-v0`, `spiral-v0`,
`spiralhard-v0`): a different, smaller benchmark, kept so that earlier
comparisons stay reproducible; its numbers are not comparable with the
paper's:

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
grids use.  These use the paper's 70/10/20 outer split.
"""
from __future__ import annotations

import numpy as np

__all__ = ["GENERATORS", "OUTER_FRACTIONS", "double_moon", "spiral", "authors_spiral", "authors_double_moon", "make_tabular", "outer_fractions"]


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


def authors_spiral(per_class: int = 5000, turns: float = 4.0, noise: float = 0.3, scale: float = 0.5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The authors' double spiral: n = sqrt(U) * 2 pi turns, class 0 at
    (-n cos n, n sin n) + N(0, noise^2), class 1 its point reflection, all
    multiplied by `scale`."""
    rng = np.random.default_rng(seed)
    n = np.sqrt(rng.uniform(0.0, 1.0, per_class)) * (2.0 * np.pi * turns)
    pts = np.stack([-np.cos(n) * n, np.sin(n) * n], 1) + rng.normal(0.0, noise, (per_class, 2))
    x = np.concatenate([pts, -pts]) * scale
    y = np.concatenate([np.zeros(per_class, int), np.ones(per_class, int)])
    return x.astype(np.float32), y


def authors_double_moon(per_class: int = 2500, radius: float = 10.0, noise: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles of radius `radius`, noise std `noise`."""
    rng = np.random.default_rng(seed)
    a0 = rng.uniform(0.0, np.pi, per_class)
    a1 = rng.uniform(0.0, np.pi, per_class)
    x0 = np.stack([radius * np.cos(a0), radius * np.sin(a0)], 1)
    x1 = np.stack([radius - radius * np.cos(a1), 0.5 * radius - radius * np.sin(a1)], 1)
    x = np.concatenate([x0, x1]) + rng.normal(0.0, noise, (2 * per_class, 2))
    y = np.concatenate([np.zeros(per_class, int), np.ones(per_class, int)])
    return x.astype(np.float32), y


GENERATORS = {
    # the authors' data (the default for the paper's task names)
    "doublemoon": lambda seed: authors_double_moon(2500, seed=seed),
    "spiral": lambda seed: authors_spiral(2500, turns=2.0, seed=seed),
    "spiralhard": lambda seed: authors_spiral(5000, turns=4.0, seed=seed),
    # this project's earlier data: a different benchmark
    "doublemoon-v0": lambda seed: double_moon(2500, seed=seed),
    "spiral-v0": lambda seed: spiral(2500, turns=1.5, seed=seed),
    "spiralhard-v0": lambda seed: spiral(5000, turns=3.0, seed=seed),
}

# outer (train, validation, test) fractions: the authors hold out 20% for
# test, then 10% of the rest for validation (72/8/20); the paper says 70/10/20
OUTER_FRACTIONS = {"doublemoon": (0.72, 0.08, 0.2), "spiral": (0.72, 0.08, 0.2), "spiralhard": (0.72, 0.08, 0.2)}


def outer_fractions(name: str) -> tuple[float, float, float]:
    return OUTER_FRACTIONS.get(name, (0.7, 0.1, 0.2))


def make_tabular(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return GENERATORS[name](seed)
