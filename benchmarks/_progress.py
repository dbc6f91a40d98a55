"""Progress lines on stderr for the training benchmarks."""
from __future__ import annotations

import sys
import time
from typing import Callable


def epoch_printer(name: str, epochs: int, lines: int = 5) -> Callable[[dict], None]:
    """An on_epoch callback printing `lines` progress lines (and the last epoch):
    epoch, total width, validation accuracy, seconds since it was made."""
    every = max(1, epochs // lines)
    start = time.perf_counter()

    def show(rec: dict) -> None:
        if rec["epoch"] % every == 0 or rec["epoch"] == epochs:
            print(f"[{name}] epoch {rec['epoch']}/{epochs} width {rec.get('width_total')} val_acc {rec['val_acc']:.3f} "
                  f"({time.perf_counter() - start:.0f}s)", file=sys.stderr, flush=True)

    return show
