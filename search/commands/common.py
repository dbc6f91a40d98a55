"""Flags shared by `awnn sweep` and `awnn compare` (infrastructure, not config)."""
from __future__ import annotations

import argparse
import os
import sys


class _Noted(argparse.Action):
    """argparse's plain store that also notes the flag as typed (`args.given_flags`: dest -> the flag), so that a strategy
    option the command has no use for is said (`unused_flag_notes`), even where its value is the default."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given_flags = {**(getattr(namespace, "given_flags", None) or {}), self.dest: option_string}


def add_run_flags(p, task: bool = True) -> None:
    """The shared flags; `task=False`: --task is refused (a study chooses its tasks: `refuse_task`)."""
    if task:
        p.add_argument("--task", required=True, help="task name, e.g. spiralhard (see `awnn grids`)")
    else:
        p.add_argument("--task", default=None, help="refused: a study runs its own tasks (run one task with `awnn sweep --task T "
                       "--strategy awnn`)")
    p.add_argument("--budget", default="quick", help="smoke | quick | standard | paper, or a budget YAML file (default: quick; standard: 150 epochs a "
                   "trial on the tabular tasks, where SpiralHard's selections have plateaued)")
    p.add_argument("--address", default=None, help="join this Ray cluster: its head's GCS address, host:6379 (default: $RAY_ADDRESS, else start a local "
                   "Ray); not a Ray Client address (ray://...)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite:///./mlflow.db)")
    p.add_argument("--storage", default=None, help="where Ray keeps trial results and checkpoints: a local path, NFS, or s3://... (default: ./awnn-results)")
    p.add_argument("--cpus-per-trial", type=float, default=1.0, help="CPUs reserved per trial; torch threads follow it (default 1)")
    p.add_argument("--gpus-per-trial", type=float, default=0.0, help="GPU share per trial, e.g. 0.25 lets 4 trials share a GPU (default 0)")
    p.add_argument("--max-failures", type=int, default=2, help="retries of a failed trial, from its last checkpoint (default 2; -1: without end)")
    p.add_argument("--report-interval", type=float, default=2.0, help="seconds between a trial's reports to Ray (each blocks the trial for a driver round trip); every epoch is still logged (0 = one report per epoch; default 2)")
    p.add_argument("--checkpoint-interval", type=float, default=10.0, help="seconds between a trial's checkpoints (default 10)")
    p.add_argument("--stall-warning", type=float, default=600.0, metavar="SECONDS",
                   help="warn about a running trial that has reported nothing for this long, or for 10x its longest gap between "
                        "reports if longer, beyond --report-interval (a hung data read, a stopped process); the sweep goes on "
                        "waiting (default 600; 0: never)")
    p.add_argument("--stall-timeout", type=float, default=0.0, metavar="SECONDS",
                   help="end the process of a running trial that has reported nothing for this long (with the same 10x-gap "
                        "and --report-interval allowance), so that Ray Tune retries it from its last checkpoint; for sweeps "
                        "nobody watches (default 0: never)")
    p.add_argument("--fuse", type=fuse_flag, default="auto", metavar="N|auto", action=_Noted,
                   help="train up to N fixed-grid selection configs of one shape as one stacked model in one Ray trial "
                        "(each keeps its own MLflow run; docs/design.md 'Fused trials'); 1 = one config per trial; "
                        f"auto (default): {AUTO_FUSE_GPU} on GPU trials (--gpus-per-trial > 0), {AUTO_FUSE_CPU} on CPUs "
                        "(measured: docs/design.md 'The --fuse default')")
    p.add_argument("--keep-denormals", action="store_true",
                   help="let trials compute on float denormals (slow on x86 CPUs; by default they are flushed to zero: docs/data.md 'Real datasets')")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray (default: all); no effect with --address (a note says so)")
    p.add_argument("--grid-dir", default=None, help="folder with grid YAML files (default: the packaged search/grids)")
    p.add_argument("--data-root", default=None, help="folder with the datasets of the image, graph and text tasks (docs/domains.md); for --task table, "
                   "your CSV file, or a folder with table.csv, or with train.csv and test.csv (docs/data.md); "
                   "a relative path is taken from the working directory and made absolute before any trial starts (default: ./data)")
    p.add_argument("--label", default=None, metavar="COLUMN",
                   help="for --task table: the name of the class label's column in the CSV header, where it is not the last "
                        "(e.g. Survived); the other columns are the features (default: the last column; docs/data.md)")
    p.add_argument("--drop-columns", default=None, metavar="NAMES",
                   help="for --task table: columns of the CSV file to leave out, comma-separated (an id, a name, free text: "
                        "e.g. PassengerId,Name,Ticket; a name with a comma in double quotes, as a CSV row writes it: "
                        "'id,\"Name, full\"'; default: none)")
    p.add_argument("--protocol", default=None, choices=None, metavar="{holdout,cv10}",
                   help="risk assessment: holdout (one outer split) or cv10 (the graph tasks' 10 outer folds, Errica et al. 2020: "
                        "selection and R re-trainings per fold); default: the budget's (paper: the grid's, cv10 for the graph "
                        "tasks; quick, smoke: holdout)")
    p.add_argument("--train-seed", type=int, default=None, metavar="S",
                   help="the draw of the trials' training: selection trials train with seed 1000 S, re-training run r with "
                        "1000 S + r, so no two draws share a seed (default: the budget's train_seed, 0: seeds 0 and 1..R). The data "
                        "split stays the same: another S re-runs the comparison with other initialisations and batch orders, to see "
                        "how far the verdict moves with them")
    p.add_argument("--resume", action="store_true", help="continue the newest unfinished run of the same command instead of starting anew")
    g = p.add_argument_group("search strategies (tpe, asha, random, awnn-asha, fixedplus)")
    g.add_argument("--seed", action=_Noted, type=int, default=0, help="seed of the stochastic strategies' search (sampling, launch order); repeat k uses seed+k-1 (default 0)")
    g.add_argument("--repeats", action=_Noted, type=int, default=1, help="run each stochastic strategy (tpe, asha, random, awnn-asha) this many times with different seeds (default 1)")
    g.add_argument("--tpe-trials", action=_Noted, type=int, default=None, help="TPE's trial budget (default: the AWNN grid's number of configs)")
    g.add_argument("--tpe-window", action=_Noted, type=int, default=None,
                   help="TPE asks trial k once trial k - N has ended, knowing exactly the trials before it, so the same "
                        "command asks the same configs (default: the cluster's trial slots when the study is created, e.g. "
                        "set it on a cluster that scales up; a resumed study keeps its own)")
    g.add_argument("--random-trials", action=_Noted, type=int, default=None, help="configs drawn by random search (default: the AWNN grid's number of configs)")
    g.add_argument("--asha-grace-period", action=_Noted, type=int, default=None, help="epochs before ASHA (asha, awnn-asha) may stop a trial (default: 10%% of the budget's epochs for the arm's grid, at least 1)")
    g.add_argument("--asha-reduction-factor", action=_Noted, type=float, default=3.0, help="ASHA keeps the best 1/factor at each rung (default 3)")
    g.add_argument("--fixedplus-widths", action=_Noted, default="mean", metavar="mean|per-layer",
                   help="fixedplus: one width, the mean over hidden layers of AWNN's learned widths (the paper's Fixed+), "
                        "or each layer its own learned mean (default mean)")
    g.add_argument("--optuna-storage", action=_Noted, default=None, help="Optuna RDB storage URL for TPE's study (default: optuna.db beside the MLflow SQLite file, else ./optuna.db)")


AUTO_FUSE_GPU = 32  # --fuse auto on GPU trials (docs/design.md "Fused trials": where fusion pays, measured)
# --fuse auto on CPUs: since the stacked trainer's Adam is one fused kernel pass (issue #30), a group of
# the SpiralHard grid's 6 same-shape configs trains 1.3x (2x256@128) to 4.3x (1x8@32) the configs per
# core-hour of one config per trial, 1.5x at its dearest shape, 4x256@32 (docs/design.md "The --fuse default")
AUTO_FUSE_CPU = 32


def fuse_flag(text: str) -> "int | str":
    """--fuse's value: 'auto' or an integer (range checked by check_run_flags)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'auto', found {text!r}") from None


def resolve_fuse(fuse: "int | str", gpus_per_trial: float) -> int:
    """The configs per fused Ray trial: --fuse's integer, or for 'auto' AUTO_FUSE_GPU on GPU trials and AUTO_FUSE_CPU on CPUs."""
    if fuse == "auto":
        return AUTO_FUSE_GPU if gpus_per_trial > 0 else AUTO_FUSE_CPU
    return int(fuse)


# flag -> (lowest allowed value, is the lowest value itself allowed, what to say)
_NUMERIC_FLAGS = {
    "cpus_per_trial": (0, False, "a number > 0"),
    "gpus_per_trial": (0, True, "a number >= 0"),
    "max_failures": (-1, True, "an integer >= -1 (-1: retry without end)"),
    "report_interval": (0, True, "a number of seconds >= 0"),
    "checkpoint_interval": (0, True, "a number of seconds >= 0 (0: at every report)"),
    "stall_warning": (0, True, "a number of seconds >= 0 (0: never warn)"),
    "stall_timeout": (0, True, "a number of seconds >= 0 (0: never end a trial)"),
    "num_cpus": (1, True, "an integer >= 1"),
    "fuse": (1, True, "an integer >= 1 (1: one config per trial)"),
}


def check_run_flags(args) -> None:
    """Numbers that argparse lets through (nan, inf, negatives), a --data-root URL, an empty --drop-columns name, and the
    folder a local Ray would keep its files in (search/node_files.py) fail here, before anything starts."""
    import math

    from ..errors import OptionError

    for name, (low, inclusive, expected) in _NUMERIC_FLAGS.items():
        value = getattr(args, name, None)
        if value is None or value == "auto":
            continue
        ok = math.isfinite(value) and (value >= low if inclusive else value > low)
        if not ok:
            raise OptionError(f"--{name.replace('_', '-')}: expected {expected}, found {value}")
    if getattr(args, "data_root", None):
        from . import data_root_option

        data_root_option(args.data_root)
    if getattr(args, "drop_columns", None) is not None:  # (an empty item: a stray comma, or an unset variable)
        from . import column_option

        column_option("--drop-columns", args.drop_columns)
    if hasattr(args, "address") and not (args.address or os.environ.get("RAY_ADDRESS")):  # a local Ray will start
        from .. import node_files, node_limits

        node_files.prepare(lambda line: print(line, file=sys.stderr, flush=True))  # its folder, before anything is written
        node_limits.check_local(note=False)  # a `ulimit -v` too low for the driver alone (the note: as the node starts)


def _option_users() -> dict[str, tuple[str, ...]]:
    """Each strategy option (its dest) -> the strategies that read it."""
    from ..strategies import REGISTRY, STOCHASTIC

    stops_early = tuple(s for s, f in REGISTRY.items() if f.stops_early)
    fused = tuple(s for s, f in REGISTRY.items() if f.fuses and f.grid == "fixed")  # (the stack trains fixed-width MLPs)
    return {"fuse": fused, "seed": STOCHASTIC, "repeats": STOCHASTIC, "tpe_trials": ("tpe",), "tpe_window": ("tpe",), "optuna_storage": ("tpe",),
            "random_trials": ("random",), "asha_grace_period": stops_early, "asha_reduction_factor": stops_early,
            "fixedplus_widths": ("fixedplus",)}


def unused_flag_notes(args, strategies: list[str], tasks: list[str], what: str) -> list[str]:
    """The flags typed on a command that has no use for them, one note each: a strategy option for strategies it does not
    run (a script that passes the same options to each strategy's sweep keeps working: a note, not an error), --num-cpus
    on a cluster (its nodes' CPUs are theirs), and --data-root for tasks that read no files (generated from the seed, or
    scikit-learn's digits)."""
    from awnn.data import reads_files

    notes = []
    users = _option_users()
    for dest, flag in (getattr(args, "given_flags", None) or {}).items():
        for_them = users.get(dest, ())
        if for_them and not set(for_them) & set(strategies):
            notes.append(f"note: {flag} has no effect: it is for {_strategy_words(for_them)}, which {what} does not run "
                         f"(it runs {', '.join(strategies)})")
    address = "--address" if getattr(args, "address", None) else "RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else None
    if getattr(args, "num_cpus", None) is not None and address:
        notes.append(f"note: --num-cpus has no effect on a cluster ({address}): its nodes have the CPUs they were started with "
                     "(`ray start --num-cpus N`)")
    if getattr(args, "data_root", None) and not any(reads_files(t) for t in tasks):
        notes.append(f"note: --data-root has no effect: {'task ' + tasks[0] if len(tasks) == 1 else 'tasks ' + ', '.join(tasks)} "
                     f"{'reads' if len(tasks) == 1 else 'read'} no data files")
    return notes


def _strategy_words(names: tuple[str, ...]) -> str:
    return f"strategy {names[0]}" if len(names) == 1 else f"strategies {', '.join(names[:-1])} and {names[-1]}"


def say_unused_flags(args, strategies: list[str], tasks: list[str], what: str) -> None:
    for line in unused_flag_notes(args, strategies, tasks, what):
        print(line, file=sys.stderr, flush=True)


def settings_from(args):
    from ..tune import RunSettings

    return RunSettings(
        address=args.address,
        storage=args.storage,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        max_failures=args.max_failures,
        report_interval=args.report_interval,
        checkpoint_interval=args.checkpoint_interval,
        stall_warning=args.stall_warning,
        stall_timeout=args.stall_timeout,
        num_cpus=args.num_cpus,
        fuse=resolve_fuse(args.fuse, args.gpus_per_trial),
        flush_denormal=not args.keep_denormals,
    )


def table_options(args) -> dict[str, str | None]:
    """How task table reads its file (awnn/config.py TABLE_KEYS), from --label and --drop-columns."""
    return {"label": getattr(args, "label", None), "drop_columns": getattr(args, "drop_columns", None)}


def options_from(args):
    from ..strategies import StrategyOptions

    return StrategyOptions(seed=args.seed, repeats=args.repeats, tpe_trials=args.tpe_trials, tpe_window=args.tpe_window, random_trials=args.random_trials,
                           asha_grace_period=args.asha_grace_period, asha_reduction_factor=args.asha_reduction_factor,
                           optuna_storage=args.optuna_storage, fixedplus_widths=getattr(args, "fixedplus_widths", "mean"))


def run_comparison(args, strategies: list[str], kind: str) -> int:
    from ..sweep import Comparison
    from ..summary import print_summary, read_back, terminal_summary

    check_run_flags(args)  # bad input raises one of search.errors.user_errors(): one line, exit code 2
    comparison = Comparison(args.task, strategies, args.budget, settings_from(args), tracking_uri=args.tracking_uri,
                            resume=args.resume, grid_dir=args.grid_dir, kind=kind, options=options_from(args), data_root=args.data_root, table_options=table_options(args),
                            protocol=args.protocol, train_seed=args.train_seed)
    say_unused_flags(args, strategies, [args.task], f"this {'comparison' if kind == 'compare' else 'sweep'}")
    try:
        results = comparison.run()
    except KeyboardInterrupt:
        if not (comparison.finished_in_mlflow or comparison.already_finished):
            raise  # stopped before its end: the CLI's "interrupted; ... --resume" line
        return _interrupted_after_finish(comparison, kind)  # (a signal while its last writes were flushed: kept until they were in)
    read = None  # the finished comparison read back from MLflow once: its summary and its report
    try:
        if not comparison.already_finished:  # (--resume of a finished comparison: only its report may be missing)
            read = read_back(comparison)
            print_summary(comparison, results, summary=terminal_summary(comparison, results, read))
        if comparison.unwritten:  # MLflow lacks some of the comparison's writes: a report from it would be wrong
            import sys

            rest = "applies them and writes the report" if kind == "compare" else "applies them"
            print(f"awnn {kind}: comparison {comparison.id} ran to its end, but {comparison.unwritten}; once MLflow takes writes again "
                  f"(a tracking server back, room on its disk), run the same command with --resume: it {rest}", file=sys.stderr)
            return 1
        if kind == "compare":
            write_comparison_report(comparison, read)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP (search/signals.py) once MLflow holds the finished comparison
        return _interrupted_after_finish(comparison, kind)
    if comparison.already_finished:
        return 0
    failed_everything = any(r.selected is None for r in results)
    return 1 if failed_everything else 0


def _interrupted_after_finish(comparison, kind: str) -> int:
    """The one line (exit 130) of a command stopped once MLflow held its finished comparison: in its summary or report."""
    import sys

    from .. import signals

    rest = (f"the report was not written: {report_command(comparison)} writes it (so does the same command with --resume)"
            if kind == "compare" else f"only its summary was cut short ({report_command(comparison)} writes the full report)")
    fault = signals.output_fault()
    why = "interrupted" if fault is None else (f"its output ({fault[0]}) was closed by its reader" if isinstance(fault[1], BrokenPipeError)
                                               else f"its output ({fault[0]}) could not be written ({fault[1].strerror or fault[1]})")
    print(f"awnn {kind}: {why} after comparison {comparison.id} had finished: its results are complete in MLflow; {rest}",
          file=sys.stderr)
    return 130


def unwritten_line(command: str, comparisons) -> str | None:
    """The closing line of a command whose comparisons ran to their end while
    MLflow did not take all their writes (Comparison.unwritten), or None."""
    lacking = [c for c in comparisons if c.unwritten]
    if not lacking:
        return None
    return (f"awnn {command}: {', '.join(str(c.id) for c in lacking)} ran to the end, but {lacking[0].unwritten}"
            f"{' (and more for the others)' if len(lacking) > 1 else ''}; what MLflow holds is incomplete until the same command "
            "with --resume applies them")


def report_command(comparison) -> str:
    """The `awnn report` command that writes `comparison`'s report where `compare` writes it."""
    from shlex import quote

    from tracking.contract import redact_uri

    return (f"awnn report --comparison {comparison.id} --tracking-uri {quote(redact_uri(comparison.tracking_uri))} "
            f"--out {quote(str(report_folder(comparison)))}")


def report_folder(comparison):
    """<storage>/reports/<id>/ (./awnn-results/reports/<id>/ when storage is remote)."""
    from pathlib import Path

    storage = comparison.settings.storage_path()
    base = Path(storage) if "://" not in storage else Path.cwd() / "awnn-results"
    return base / "reports" / str(comparison.id)


def write_comparison_report(comparison, read=None) -> str | None:
    """The cost report of a finished comparison, in <storage>/reports/<id>/
    (./awnn-results/reports/<id>/ when storage is remote), logged as an
    artifact of the comparison's MLflow run.  A report that cannot be written
    is a warning: the results are safe in MLflow and `awnn report` rebuilds it.
    `read`: the comparison as the summary read it back (search.summary.read_back),
    so that the report is built from that read, not a second one."""
    import sys

    from tracking.report import log_report, write_report

    from .. import signals

    out, retry = report_folder(comparison), report_command(comparison)
    try:
        paths = write_report(comparison.tracking_uri, out, comparison=comparison.id, read=read)
    except Exception as e:  # noqa: BLE001 - any failure: the sweep itself succeeded
        signals.stop_if_interrupted(e)  # (a signal's doing: the command's interrupted ending, not a warning and exit 0)
        print(f"warning: could not write the cost report ({type(e).__name__}: {str(e)[:300]}); rebuild it with: {retry}", file=sys.stderr)
        return None
    try:
        run_id = log_report(comparison.tracking_uri, comparison.id, out, summary=paths["summary"])
        where = f"logged to MLflow as artifact 'report' of the comparison run {run_id}"
    except Exception as e:  # noqa: BLE001 - e.g. an artifact store this machine cannot write to
        signals.stop_if_interrupted(e)
        where = f"not logged to MLflow: {type(e).__name__}: {str(e)[:200]}"
    print(f"Report: {out / 'report.html'}\n  report.md, summary.json and the plots are beside it; {where}")
    return str(out)
