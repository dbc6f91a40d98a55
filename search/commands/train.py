"""awnn train: one training run on this machine, JSON result as the last line."""
from __future__ import annotations

import json
import math
import time

from ..progress import ProgressLine, fmt_seconds


def add_parser(sub) -> None:
    p = sub.add_parser("train", help="train one model (fixed or AWNN) and print its result as JSON")
    p.add_argument("--task", required=True, help="task name (see `awnn grids`), e.g. spiralhard")
    p.add_argument("--model", required=True, choices=["fixed", "awnn"])
    p.add_argument("--epochs", type=int, default=None, help="number of epochs (default 100)")
    p.add_argument("--seed", type=int, default=None, help="training seed (default 0)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="any TrainConfig key, repeatable, e.g. --set hidden_layers=2 --set activation=relu6")
    p.add_argument("--data-root", default=None, help="folder with downloaded datasets (images, graphs, text)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def parse_sets(sets: list[str]) -> dict[str, str]:
    from ..errors import UsageError

    out = {}
    for item in sets:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def run(args) -> int:
    from awnn.config import TrainConfig
    from awnn.train import train

    values: dict = {"task": args.task, "model": args.model}
    values.update(parse_sets(args.sets))
    if args.epochs is not None:
        values["epochs"] = args.epochs
    if args.seed is not None:
        values["seed"] = args.seed
    if args.data_root is not None:
        values["data_root"] = args.data_root
    config = TrainConfig.from_dict(values, source="command line")
    progress = ProgressLine()
    start = time.monotonic()

    def on_epoch(rec):
        if args.quiet:
            return
        done = rec["epoch"] / config.epochs
        elapsed = time.monotonic() - start
        eta = elapsed / done * (1 - done) if done else math.nan
        progress.update(
            f"epoch {rec['epoch']}/{config.epochs}  loss {rec['train_loss']:.4f}  val_acc {rec['val_acc']:.4f}  "
            f"best {rec['best_val_acc']:.4f}  width {rec['width_total']}  elapsed {fmt_seconds(elapsed)}  eta {fmt_seconds(eta)}"
        )

    result = train(config, on_epoch=on_epoch)  # a DataError is one line, exit code 2 (search/errors.py)
    progress.close()
    out = result.summary()
    out["config"] = config.to_dict()
    print(json.dumps(out, default=_json_default), flush=True)
    return 0 if result.status == "ok" else 1


def _json_default(o):
    if isinstance(o, float) and math.isnan(o):
        return None
    return str(o)
