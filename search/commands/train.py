"""awnn train: one training run on this machine, JSON result as the last line."""
from __future__ import annotations

import math
import time

from tracking.fmt import json_text

from . import command_parser
from ..progress import ProgressLine, RunClock, fmt_seconds

DEFAULT_BUDGET = "quick"  # minutes on a laptop; `--budget paper` for the paper's epochs (SpiralHard: 5000)


def add_parser(sub) -> None:
    p = command_parser(sub, "train", "train one model (fixed or AWNN) and print its result as JSON",
                       "Train one model on this machine, no Ray, no MLflow: the task's own setup (its grid's settings "
                       "for --model, scaled by --budget) unless flags or --set say otherwise.  Progress goes to stderr, "
                       "the result as one JSON line to stdout.",
                       ["awnn train --task spiralhard --model awnn",
                        "awnn train --task spiralhard --model awnn --budget paper",
                        "awnn train --task doublemoon --model fixed --epochs 50 --set width=32 --set hidden_layers=2",
                        "awnn train --task nci1 --model awnn --data-root ~/datasets --budget smoke"])
    p.add_argument("--task", required=True, help="task name (see `awnn grids`), e.g. spiralhard")
    p.add_argument("--model", required=True, choices=["fixed", "awnn"])
    p.add_argument("--epochs", type=int, default=None,
                   help="number of epochs (default: the task's grid epochs under --budget); the grid's LR milestones are scaled to them")
    p.add_argument("--budget", default=DEFAULT_BUDGET,
                   help="scales the grid's epochs and patience as in a sweep: smoke | quick | standard | paper, or a budget YAML file "
                        f"(default: {DEFAULT_BUDGET}: 6%% of the grid's epochs, 20 to 60, on its CPU-sized data; paper: the paper's full run, "
                        "e.g. 5000 epochs on SpiralHard)")
    p.add_argument("--grid-dir", default=None, help="folder with grid YAML files whose settings are the defaults (default: the packaged search/grids)")
    p.add_argument("--seed", type=int, default=None, help="training seed (default 0)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="any TrainConfig key, repeatable, e.g. --set hidden_layers=2 --set activation=relu6")
    p.add_argument("--data-root", default=None, help="folder with downloaded datasets (images, graphs, text); for --task table, your CSV file, or a folder "
                   "with table.csv, or with train.csv and test.csv (docs/data.md)")
    p.add_argument("--label", default=None, metavar="COLUMN",
                   help="for --task table: the class label's column in the CSV header, where it is not the last (default: the last)")
    p.add_argument("--drop-columns", default=None, metavar="NAMES",
                   help="for --task table: columns of the CSV file to leave out, comma-separated (a name with a comma in "
                        "double quotes: 'id,\"Name, full\"'; default: none)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--keep-denormals", action="store_true", help="compute on float denormals (slow on x86 CPUs; by default flushed to zero, as in trials)")
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


def public_tasks() -> list[str]:
    """The task names a user chooses among: every registered task but the
    versioned aliases of this project's earlier data (`spiral-v0`, ...),
    which stay accepted (awnn/data/tabular.py GENERATORS)."""
    import re

    from awnn.data import TASKS

    return sorted(t for t in TASKS if not re.search(r"-v\d+$", t))


def check_task(task: str) -> None:
    """An unknown --task: one line listing the public task names, with the closest ones."""
    import difflib

    from awnn.config import ConfigError
    from awnn.data import TASKS

    if task in TASKS:
        return
    names = public_tasks()
    close = difflib.get_close_matches(task, names, n=3, cutoff=0.5)
    did = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    expected = f"one of {names}"
    raise ConfigError(f"command line: key 'task': expected {expected}, found {task!r}{did}", "task", expected, task)


def resolve_defaults(args, values: dict) -> tuple[dict, str]:
    """The task's own setup as defaults (search.protocol.single_run_config):
    the settings of its grid for --model, scaled by --budget.  A task without
    a grid file keeps TrainConfig's defaults (an unknown task is reported by
    TrainConfig, naming the known ones)."""
    from awnn.data import TASKS
    from ..budget import resolve_budget
    from ..grid import find_grid, grid_folder
    from ..protocol import single_run_config

    budget = resolve_budget(args.budget)
    folder = grid_folder(args.grid_dir)  # a --grid-dir that is no folder is an error, not "no grid file"
    if args.task not in TASKS:
        return values, "TrainConfig defaults"
    if not (folder / f"{args.task}-{args.model}.yaml").exists():
        return values, "TrainConfig defaults (no grid file for this task and model)"
    grid = find_grid(args.task, args.model, folder)  # a malformed one: GridError naming the file and key
    return single_run_config(grid, budget, values), f"{grid.path} (first value of each searched key), budget {budget.name}"


def run(args) -> int:
    import sys

    from awnn.config import TrainConfig
    from awnn.train import train

    check_task(args.task)
    values: dict = {"task": args.task, "model": args.model}
    sets = parse_sets(args.sets)
    values.update(sets)
    if args.epochs is not None:
        values["epochs"] = args.epochs
    if args.seed is not None:
        values["seed"] = args.seed
    if args.data_root is not None:
        from . import data_root_option

        values["data_root"] = data_root_option(args.data_root)
    if args.label is not None:
        values["label"] = args.label
    if args.drop_columns is not None:
        from awnn.config import column_text

        from . import column_option

        values["drop_columns"] = column_text(column_option("--drop-columns", args.drop_columns))
    values, source = resolve_defaults(args, values)
    config = TrainConfig.from_dict(values, source="command line")
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():  # a fact of this machine, not of the config: one line, not a traceback
            from ..errors import OptionError

            built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
            raise OptionError(f"device=cuda: torch sees no CUDA device on this machine (torch {torch.__version__}, {built}); "
                              "use device=cpu or auto")
    from awnn.data import reads_files, task_kind

    for key, value in sets.items():  # (a key the model does not use: trained as without it, so said)
        why = config.unused_reason(key, task_kind(config.task)) if key in TrainConfig.keys() else None
        if why is not None:
            print(f"note: --set {key}={value} has no effect: {why}", file=sys.stderr, flush=True)
    if args.data_root is not None and not reads_files(config.task):
        print(f"note: --data-root has no effect: task {config.task} reads no data files", file=sys.stderr, flush=True)
    if not args.quiet:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        print(f"config (defaults from {source}; flags and --set override them): {shown}", file=sys.stderr, flush=True)
    progress = ProgressLine()
    clock = RunClock(config.epochs)
    at_most = "<=" if config.patience else ""  # early stopping may end the run sooner

    def on_epoch(rec):
        clock.epoch_done()
        if args.quiet:
            return
        # train_nll: the data term alone (cross-entropy); AWNN's train_loss adds its priors' terms / N
        progress.update(
            f"epoch {rec['epoch']}/{config.epochs}  train_nll {rec.get('train_nll', rec['train_loss']):.4f}  val_acc {rec['val_acc']:.4f}  "
            f"best {_score(rec['best_val_acc'])}  width {rec['width_total']}  elapsed {fmt_seconds(time.monotonic() - clock.start)}  "
            f"run eta {at_most}{fmt_seconds(clock.eta(rec['epoch']))}"
        )

    shown_at = [0.0]

    def on_batch(epoch, done, total, seconds):
        # inside long epochs (a first MNIST epoch takes minutes on 2 cores): batches, rate, the epoch's and the run's ETA, once a second
        now = time.monotonic()
        if done == 1:
            clock.began(now - seconds)  # the first epoch's length leaves out loading the data
        if args.quiet or seconds < 2.0 or now - shown_at[0] < 1.0:
            return
        shown_at[0] = now
        rate = done / seconds
        left = (total - done) / rate if rate else math.nan
        progress.update(f"epoch {epoch}/{config.epochs}  batch {done}/{total}  {rate:.1f} batch/s  epoch eta {fmt_seconds(left)}  "
                        f"run eta {at_most}{fmt_seconds(clock.eta(epoch, left, seconds + left))}  elapsed {fmt_seconds(now - clock.start)}")

    from awnn.arith import set_denormals

    set_denormals(not args.keep_denormals)  # as a trial does (awnn/arith.py)
    result = train(config, on_epoch=on_epoch, on_batch=on_batch)  # a DataError is one line, exit code 2 (search/errors.py)
    progress.close()
    if result.status != "ok" and not args.quiet:  # the exit code is 1; say why in words, not only in the JSON's status
        print(f"awnn train: the run ended {result.status} at epoch {result.epochs_run} of {config.epochs}: {_why(result.status, config)}",
              file=sys.stderr, flush=True)
    out = result.summary()
    out.update(plain_losses(result.history, result.best_epoch))
    out["config"] = config.to_dict()
    print(json_text(out), flush=True)  # strict JSON: a score that does not exist (a width-capped or diverged run) is null
    return 0 if result.status == "ok" else 1


def _score(x) -> str:
    """A score for the progress line: "n/a" before any epoch was scored (the trainer's sentinel is -1)."""
    return f"{x:.4f}" if isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 else "n/a"


def _why(status: str, config) -> str:
    if status == "width_capped":
        return (f"an adaptive layer wanted more than max_width={config.max_width} neurons and on_max_width=stop ends the run "
                f"there (--set max_width=<larger>, or --set on_max_width=cap to go on at the cap)")
    if status == "diverged":
        what = "its training loss or a layer's width rate" if config.model == "awnn" else "its training loss"
        return f"{what} became NaN or infinite (a smaller lr: --set lr=<smaller>)"
    return "see the JSON result's status"


def plain_losses(history: list[dict], best_epoch: int) -> dict:
    """The training data loss (mean cross-entropy, without AWNN's prior terms)
    of the last epoch (`train_nll`) and of the selected one (`train_nll_at_best`);
    None where there is none (no epoch, or a diverged one)."""
    def finite(rec):
        v = (rec or {}).get("train_nll")
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    at_best = next((r for r in history if r.get("epoch") == best_epoch), None)
    return {"train_nll": finite(history[-1] if history else None), "train_nll_at_best": finite(at_best)}


