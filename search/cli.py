"""The `awnn` command.  Each subcommand lives in search/commands/<name>.py
with `add_parser(subparsers)` and `run(args) -> int`.

Exit codes: 0 success, 1 a run failed, 2 bad input (one line on stderr
naming what is wrong and where), 130 interrupted.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

COMMANDS = ["train", "grids", "sweep", "compare", "report", "draws", "env", "study"]


from . import signals
from .tune import tune_environment

def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("awnn-search")
    except PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from .commands import CommandParser

    # no flag abbreviations anywhere: the subcommands' parsers are CommandParsers too (parser_class)
    parser = CommandParser(prog="awnn", description="Adaptive Width Neural Networks: training, sweeps on Ray Tune, cost reports from MLflow.")
    parser.add_argument("--version", action="version", version=f"awnn {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    parser.subcommands = sub  # (main: the subcommand's own parser reports an unknown flag)
    for name in COMMANDS:
        module = importlib.import_module(f"search.commands.{name}")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # as parse_args, but from the subcommand's parser, with the flags closest to each unknown one
        from .commands import unrecognized

        sub = parser.subcommands.choices[args.command]
        sub.error(unrecognized(sub, extras))
    sub = parser.subcommands.choices[args.command]
    empty = _empty_values(sub, args) or _working_folder_gone() or _not_utf8(sub, args)
    if empty:
        print(f"awnn {args.command}: error: {empty}", file=sys.stderr)
        return 2
    # SIGTERM (a job scheduler, `kill`) ends the run like Ctrl-C: cleanly,
    # with pending tracking writes flushed, resumable with --resume.
    signals.enable()
    _own_warnings_in_one_line(args.command)
    try:
        tune_environment()  # Ray Tune's settings, before any command imports Ray
        with signals.guard_output():  # a reader gone away (`| head`) interrupts the command: see search/signals.py
            code = _run(args)
    except KeyboardInterrupt:  # a signal before `_run` handles its own (its first imports): the same one line, exit 130
        return _interrupted(args)
    # its output closed: 141, as a command that SIGPIPE ended; unwritable otherwise: 2 (one that failed for another
    # reason keeps its exit code)
    fault = signals.output_fault()
    if fault and code in (0, 130):
        return 141 if isinstance(fault[1], BrokenPipeError) else 2
    return code


def _own_warnings_in_one_line(command: str) -> None:
    """A warning of the product's own (its class defined in awnn/, search/ or tracking/, e.g. awnn.width.MaxWidthReached)
    as one line, `awnn <command>: warning: <message>`, as its errors are, not as Python's two lines of source path and
    code; other libraries' warnings keep Python's format (their source is what their reader needs)."""
    import warnings

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if category.__module__.split(".")[0] not in ("awnn", "search", "tracking"):
            return shown(message, category, filename, lineno, file, line)
        with contextlib.suppress(OSError, ValueError):  # (stderr gone: as Python's own, nothing to say it on)
            print(f"awnn {command}: warning: {message}", file=file or sys.stderr, flush=True)

    warnings.showwarning = show


def _empty_values(sub, args) -> str | None:
    """What to say of the first option of `sub` given an empty (or blank)
    string, or None if none was: `--tracking-uri "$MLFLOW_URI"` with the
    variable unset would otherwise mean the default store, silently."""
    for action in getattr(sub, "options", ()):
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) and value is not action.default else [value]  # (a repeatable option: each)
        if any(isinstance(v, str) and not v.strip() and v != action.default for v in values):
            flag = max(action.option_strings, key=len)
            rest = "" if action.required else "; leave the flag out for its default"
            return f"{flag}: expected a value, found an empty string (an unset shell variable?){rest}"
    return None


def _working_folder_gone() -> str | None:
    """What to say when the folder the command was started in no longer exists (removed, or removed and made again,
    while the shell stayed in it: `rm -rf run && mkdir run` from another terminal, a job folder cleaned up).  Every
    command reads or writes relative to it (./mlflow.db, ./awnn-results, ./data) or imports torch, and each failed its
    own way: a 28-line FileNotFoundError traceback from a comparison's first path, `awnn env` an "Intel oneMKL FATAL
    ERROR" (found 2026-12-07).  None while it exists."""
    import os
    import shlex

    try:
        os.getcwd()
    except FileNotFoundError:
        pwd = os.environ.get("PWD")  # (the shell's name for it; a folder there now was made since)
        how = f"`cd {shlex.quote(pwd)}` enters the one made there since" if pwd and os.path.isdir(pwd) else "cd to a folder that exists"
        return f"the folder this command was started in no longer exists (removed or moved since the shell entered it): {how}, then run it again"
    return None


def _not_utf8(sub, args) -> str | None:
    """What to say of the first option whose value is not UTF-8 text (any option of a command that runs on Ray; the
    tracking URI of the others), or of the folder a command that runs on Ray was started in, or None.  A Linux file name is bytes, and one written in Latin-1 or another legacy encoding
    (`caf\xe9`) reaches Python as text with lone surrogates; Ray (which sends the driver's folder to its workers), MLflow
    and SQLite take UTF-8 text only.  A comparison started in such a folder, or given such a --storage, ended in a
    41-line "UnicodeEncodeError: ... surrogates not allowed" traceback as Ray started (found 2026-12-07)."""
    import os

    def bad_bytes(text: str) -> list[int]:
        return [ord(c) - 0xDC00 for c in text if 0xDC80 <= ord(c) <= 0xDCFF]  # (Python's surrogateescape of byte b)

    def said(text: str) -> str:
        first = bad_bytes(text)[0]
        shown = os.fsencode(text).decode("utf-8", "backslashreplace")
        return (f"{shown}: not UTF-8 text (the byte 0x{first:02x}: a name written in Latin-1 or another legacy encoding); "
                f"Ray, MLflow and SQLite take UTF-8 text only")

    on_ray = hasattr(args, "address")  # (a command that runs on Ray, local or a cluster's: its every value reaches MLflow)
    for action in getattr(sub, "options", ()):
        if not on_ray and action.dest != "tracking_uri":  # (`awnn report --out caf\xe9` writes its files: left alone)
            continue
        value = getattr(args, action.dest, None)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and bad_bytes(v):
                return f"{max(action.option_strings, key=len)} {said(v)}: give one that is (rename it, e.g. convmv -f latin1 -t utf8)"
    if on_ray:
        try:
            here = os.getcwd()
        except OSError:
            return None
        if bad_bytes(here):
            return f"the folder this command was started in, {said(here)}: cd to a folder whose path is UTF-8 (or rename it, e.g. convmv -f latin1 -t utf8)"
    return None


def _run(args) -> int:
    from .errors import user_errors

    try:
        code = int(args.func(args) or 0)
        signals.finished()  # (its work done: a signal now only ends the exit sooner)
        return code
    except BrokenPipeError:  # the reader went away (`awnn grids | head`): end quietly, as a command killed by SIGPIPE
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 141
    except OSError as e:  # a write found no room or permission where no layer said it better (e.g. stdout on a full disk)
        if signals.interrupted_by(e):  # (one raised as the command stopped: see below)
            return _interrupted(args)
        from .errors import storage_error

        found = storage_error(e)
        if found is None:
            raise
        import os

        where = found.filename or "its output (stdout)"
        with contextlib.suppress(OSError, ValueError):  # no second error when Python flushes a stdout that cannot take it
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        from tracking.contract import NO_ROOM_ERRNOS

        said = f"cannot write {where}" if found.errno in NO_ROOM_ERRNOS else where  # (a permission: a read or a write)
        print(f"awnn {args.command}: error: {said}: {os.strerror(found.errno)}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit) as e:
        if isinstance(e, SystemExit) and not signals.ray_sigterm(e):
            raise
        return _interrupted(args)
    except Exception as e:
        if signals.interrupted_by(e):  # raised by what the interrupt cut short (a library's half-done update): still the stop asked for
            return _interrupted(args)
        _exit_if_limited(args, e)  # (first: user_errors() imports pandas, which such a limit may not let load either)
        if not isinstance(e, user_errors()):  # (a user error's own line first: it may carry an out-of-memory cause)
            from .errors import out_of_memory

            oom = out_of_memory(e)
            if oom:  # (a trial's own in a sweep ends that trial; this is the command's: `awnn train`, the driver)
                print(f"awnn {args.command}: error: out of memory: {oom}; a smaller config (width, max_width, batch_size, "
                      f"hidden_layers), fewer trials at once, or a machine with more memory", file=sys.stderr)
                return 1
            raise  # a bug or an unexpected failure: the full traceback
        print(f"awnn {args.command}: error: {e}", file=sys.stderr)
        return 2


def _exit_if_limited(args, error: BaseException) -> None:
    """This process could not load a library or start a thread (`awnn train` importing torch, the driver importing
    pandas) under a memory limit of the shell (`ulimit -v`: search/node_limits.py): one line naming it, and exit 2
    at once, without the interpreter's teardown (which crashed, SIGSEGV, after such an ImportError at 2 GB,
    2026-12-07).  Anything else returns."""
    from tracking.contract import environment_failure

    from . import node_limits

    found = environment_failure(error)
    limits = [lim for lim in node_limits.finite_limits() if lim.what != node_limits.FILE_SIZE]
    if found is None or not limits or not node_limits.mapping_failed(found):
        return
    import os

    print(f"awnn {args.command}: error: {found}: {node_limits.environment_remedy(found, on_cluster=False).replace('its process', 'this process', 1)}",
          file=sys.stderr, flush=True)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    os._exit(2)


def _interrupted(args) -> int:
    """The end of a command that was interrupted (Ctrl-C, SIGTERM, SIGHUP, a closed output): one line, its exit code."""
    signals.release_leaked_logging_lock()  # (Ray's exit handlers and threads log)
    resumable = args.command in ("sweep", "compare")
    hint = "; run the same command with --resume to continue" if resumable else ""
    fault = signals.output_fault()
    if fault:  # (stderr unwritable: this line goes to /dev/null; `awnn grids | head`: nothing to say)
        stream, error = fault
        if isinstance(error, BrokenPipeError):
            if resumable:
                print(f"awnn {args.command}: its output ({stream}) was closed by its reader: interrupted as by Ctrl-C{hint}", file=sys.stderr)
            return 141
        import os

        print(f"awnn {args.command}: error: cannot write its output ({stream}): {os.strerror(error.errno) if error.errno else error}"
              f"{'; interrupted as by Ctrl-C' + hint if resumable else ''}", file=sys.stdout if stream == "stderr" else sys.stderr)
        return 2
    print(f"awnn {args.command}: interrupted{hint}", file=sys.stderr)
    return 130


def entry() -> None:
    """The `awnn` console script and `python -m search.cli`: `main` in the
    command's own process, whose garbage collector skips the import-time heap
    and the exit collections (search/heap.py)."""
    from . import heap

    heap.own_process()
    try:
        code = main()
    except KeyboardInterrupt:  # a signal in the few bytecodes between the command's return and signals.finished()
        code = 130
    heap.at_exit()
    signals.forget_unhandled_interrupt()  # (an interrupt handled in an exec'd string: `python -m` would end by SIGINT)
    tune = sys.modules.get("search.tune")  # (imported only by a command that may have started Ray)
    if tune is not None:  # Ray's exit handlers may wait 60 s for a GCS that is gone, then abort: bounded
        tune.exit_process(code)
    sys.exit(code)


if __name__ == "__main__":  # python -m search.cli: run the package's module, not a copy
    from search.cli import entry as _entry

    _entry()
