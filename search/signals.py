"""SIGTERM (a job scheduler, `kill`) and SIGHUP (the terminal was closed)
end an `awnn` command the way Ctrl-C does: a KeyboardInterrupt in the main
thread, so the driver closes its MLflow runs as interrupted, flushes its
writes and exits 130.  A SIGHUP that was ignored when the command started
(`nohup awnn ...`) stays ignored.

Ray's core worker installs its own SIGTERM handler in `ray.init` (it dumps
a C++ stack trace and aborts: exit 134, runs left RUNNING), so `init_ray`
installs ours again after it: `restore()` does, once the CLI `enable()`d it
(a program that uses the package as a library keeps its own handlers).

While `ray.init` runs, its own handler is in place: `sys.exit(15)`.  A
SIGTERM in that window (sent to the whole process group, it also ends the
node's GCS as it starts) surfaces as SystemExit(15), and not necessarily
inside `ray.init`: Python runs a signal's handler at the next bytecode, and
where the signal arrived during a C call (Ray waiting for the GCS's port
file), that is wherever the call's exception is first handled.
`ray_sigterm` tells the CLI's `main` such an exit is our SIGTERM, which it
ends as an interrupt (exit 130).  (An `except SystemExit` around
`ray.init` does not catch it.)

Only the first of these signals (Ctrl-C included) interrupts: the ones
that follow while the command stops (Ctrl-C pressed again, a scheduler's
repeated SIGTERM) say once that it is stopping and are otherwise ignored.
Each used to raise another KeyboardInterrupt wherever the stopping code
was: inside the closing of the MLflow runs, or Ray's exit handler, which
printed a traceback and then crashed (exit 139, a segmentation fault in
Ray's teardown).  SIGKILL still stops it at once; `--resume` then closes
what it left open.

The interrupt lands at whatever bytecode runs when the signal comes
(tests/system/test_signal_any_moment.py sends one at 18 moments of a
comparison), so each place it can land ends the same way: inside Ray
Tune's bookkeeping, whose cleanup then raises another error
(`interrupted_by`: still the interrupt, exit 130); inside a finalizer or
a weakref's callback, where Python ignores it (`_unraisable`: delivered
again); inside `ray.init` (search/tune.py ends the process without Ray's
exit handlers, which crashed on a half-made core worker; Ray's C++
failure handler, which aborted on SIGTERM while the core worker started,
is not installed in the driver: search/_ray_speedups.py, 6); and in the
interpreter's exit once the command returned (`finished`: a signal then
no longer raises; Ray's shutdown, cut short, crashed).

The process's last moments are covered too: Python's own finalization
(after the exit handlers) puts the default action back for every signal
that has a Python handler, so a signal that came then (a Ctrl-C pressed
twice, a scheduler's repeated SIGTERM, while the interpreter tore down
torch's and Ray's modules) killed the command: exit -2 or -15 where it
had decided 130, or 0 for a finished comparison.  The last exit handler
(registered first, by `enable`) ignores them instead: the exit code is
decided by then, and an ignored signal stays ignored through the
finalization.

An output that cannot be written stops a command the same way
(`guard_output`): the reader of a pipe that went away (`awnn compare ... 2>&1 | head`, a `tee` that
ended) made each later write of the driver raise BrokenPipeError wherever
it printed, and Ray Tune swallows an exception raised in a callback
(`stop_trial` logs it): a sweep's closing line raised before the sweep was
closed, the driver ran on to the end and left the comparison `finished`
with its sweeps RUNNING.  Now the first write that finds its reader gone
sends the stream to /dev/null and interrupts the command as Ctrl-C does
(a KeyboardInterrupt: a BaseException, which Tune does not swallow);
`output_fault` names the stream and the error for the CLI's exit (141, as
for SIGPIPE).  Likewise any other OSError of a write to stdout or stderr:
a file they were redirected to whose disk is full (exit 2, its line
naming the stream and the error).

A library that logs, with its traceback, an error our interrupt caused in
its own cleanup no longer prints it (`_FromInterrupt`): SQLAlchemy's
"Error closing cursor" (CI: a SIGTERM while `awnn compare` read MLflow
for its report printed 40 lines of SQLAlchemy's and sqlite's traceback
above the command's one line).  While the command stops, a record whose
exception's chain holds a KeyboardInterrupt is left out, by the handler
that would print it: Python's last-resort handler (loggers with none of
their own: SQLAlchemy's) from `enable`, and every handler of every logger
there is when the first signal comes.  Other records are kept, as are
such records before any signal."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading

__all__ = ["enable", "restore", "deferred", "release_leaked_logging_lock", "finished", "forget_unhandled_interrupt", "ray_sigterm", "interrupted_by", "guard_output", "output_closed", "output_fault"]

_enabled = False
_signals: list[int] = []
_stopping: list[int] = []  # the signals received (the first one interrupts)


_deferring: list[bool] = []  # inside deferred(): the first signal is kept, not raised, until it ends
_deferred: list[int] = []  # the signal kept by deferred(), raised as it ends
_finished: list[bool] = []  # the command's work is done (finished()): a signal now only ends the exit sooner
_redeliver: list[bool] = []  # our interrupt was swallowed (_unraisable): the next call of the handler raises it again


def _raise_interrupt(signum, frame):
    if _finished:
        _stopping.append(signum)  # (nothing left to interrupt: the exit handlers run, bounded by search/tune.py exit_process)
        return
    if frame is not None and _at_lock_edge(frame):
        # raised here, between a lock's acquire and the `try` that releases it, or at the first bytecode of its release,
        # it would leave the lock held (see _LOCK_EDGES): delivered again 50 ms on, outside it
        again = threading.Timer(0.05, _interrupt_main, (signum,))
        again.daemon = True
        again.start()
        return
    if _redeliver:
        _redeliver.clear()
        if _deferring:
            _deferred.append(signum)
            return
        raise KeyboardInterrupt
    _stopping.append(signum)
    if len(_stopping) == 1:
        _quiet_interrupt_logs()
        if _deferring:  # closing the runs, flushing MLflow: raised once that is done (deferred)
            _deferred.append(signum)
            return
        raise KeyboardInterrupt
    if len(_stopping) == 2:
        print(f"awnn: already stopping (closing this driver's runs in MLflow, then Ray); `kill -9 {os.getpid()}` ends it at once, "
              "and --resume closes what it left open", file=sys.stderr, flush=True)


def enable() -> None:
    global _enabled
    if threading.current_thread() is not threading.main_thread():
        return
    _enabled = True
    _stopping.clear()
    _deferring.clear()
    _deferred.clear()
    _redeliver.clear()
    _finished.clear()
    _signals[:] = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # (an ignored SIGINT, `cmd &` in a script, stays so)
        _signals.append(signal.SIGINT)
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        _signals.append(signal.SIGHUP)
    restore()
    _stacks_on_sigusr1()
    _add_filter(logging.lastResort)
    if not _at_exit:  # first of the exit handlers registered after the CLI's imports: runs after them
        import atexit

        atexit.register(_ignored_at_exit)
        _at_exit.append(True)
    if sys.unraisablehook is not _unraisable:
        _previous_hook[:] = [sys.unraisablehook]
        sys.unraisablehook = _unraisable


def _stacks_on_sigusr1() -> None:
    """`kill -USR1 <pid>` prints every thread's Python stack to stderr and the command goes on: where a driver that
    seems hung waits (the fault tests send it to a driver that outlived their wait, tests/fault_helpers.py).  Only
    where SIGUSR1 has no handler yet (a program that uses the package as a library keeps its own)."""
    sig = getattr(signal, "SIGUSR1", None)
    if sig is None or signal.getsignal(sig) is not signal.SIG_DFL or sys.__stderr__ is None:
        return
    import faulthandler

    try:
        faulthandler.register(sig, file=sys.__stderr__, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError, AttributeError):  # pragma: no cover - (stderr without a file descriptor)
        pass


_previous_hook: list = []
_at_exit: list[bool] = []


def _ignored_at_exit() -> None:
    """An exit handler: from here on the command's signals are ignored.  Python's finalization, which follows, gives
    a signal with a Python handler its default action back (it would kill the process, exit -2 / -15 in place of the
    code decided), but leaves an ignored one ignored."""
    if _enabled and threading.current_thread() is threading.main_thread():
        for sig in _signals:
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):  # pragma: no cover - (a signal this platform refuses: left as it is)
                pass


def _caused_by_interrupt(error: BaseException | None) -> bool:
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return True
        seen.add(id(error))
        error = error.__context__ or error.__cause__
    return False


class _FromInterrupt(logging.Filter):
    """Leaves out a library's log of an error that our interrupt caused, while the command stops (module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not (_enabled and _stopping and record.exc_info and isinstance(record.exc_info, tuple)):
            return True
        return not _caused_by_interrupt(record.exc_info[1])


_FILTER = _FromInterrupt()


def _add_filter(handler: logging.Handler | None) -> None:
    if handler is not None and _FILTER not in handler.filters:
        handler.addFilter(_FILTER)


def _quiet_interrupt_logs() -> None:
    """The filter on every handler there is now (the first signal): Python's last-resort one and every logger's."""
    if not _enabled:
        return
    _add_filter(logging.lastResort)
    loggers = [logging.getLogger()] + [lg for lg in list(logging.Logger.manager.loggerDict.values())
                                       if isinstance(lg, logging.Logger)]
    for logger in loggers:
        for handler in list(logger.handlers):
            _add_filter(handler)


def _unraisable(unraisable) -> None:
    """sys.unraisablehook: Python ignores an exception raised in a finalizer (`__del__`), a weakref's callback or the
    garbage collector's, and a signal's handler runs at whatever bytecode comes next, also in those (a probe:
    SQLAlchemy's weakref callback `_collection_gced`, at a garbage collection).  Our interrupt raised there was lost: the command ran on to its
    end and exited 0 after Ctrl-C.  It is delivered again from a timer thread 50 ms on (not from here: the handler
    would run at this hook's next bytecode, where it is ignored too), and again while it lands in a finalizer.

    The same for a signal that lands in a hook Python runs after a fork (`os.register_at_fork`), whose exceptions it
    ignores too: while `ray.init` forks Ray's processes, also Ray's SIGTERM handler's `sys.exit(15)` (ray_sigterm),
    delivered again as a SIGTERM to whichever handler is in place then.  Logging's hook (`_releaseLock`), cut short
    there, also left logging's module lock held by the main thread, and the next thread that logged waited for ever:
    `make test-long` (a SIGTERM 1.2 s after the start) hung the driver, its tracking thread waiting for the lock and the
    main thread waiting for it (tests/system/test_signal_cut_short.py injects the moment).  The lock is released here."""
    exc = unraisable.exc_value
    if not (_enabled and threading.current_thread() is threading.main_thread()):
        (_previous_hook[0] if _previous_hook else sys.__unraisablehook__)(unraisable)
        return
    ours = isinstance(exc, KeyboardInterrupt) and bool(_stopping)
    rays = isinstance(exc, SystemExit) and ray_sigterm(exc)
    if ours or rays:
        _release_logging_lock(unraisable.object)
    if ours and not _redeliver:
        _redeliver.append(True)
        again = threading.Timer(0.05, _interrupt_main, (_signals[0],))  # (SIGTERM: always ours, _raise_interrupt)
    elif rays:  # (not through _raise_interrupt yet: no mark; Ray's handler, or ours once init_ray restored it)
        again = threading.Timer(0.05, _interrupt_main, (signal.SIGTERM,))
    elif ours:  # (delivered again already)
        return
    else:
        (_previous_hook[0] if _previous_hook else sys.__unraisablehook__)(unraisable)
        return
    again.daemon = True
    again.start()


def _interrupt_main(signum: int) -> None:
    """Deliver `signum` again to the main thread (from a timer thread): as the signal itself, which also wakes a wait
    the main thread went into meanwhile (a lock's acquire without a timeout, `Event.wait()`: EINTR, then the handler).
    `_thread.interrupt_main` only marks the handler as due: the interrupt then waited for the wait to end (a probe:
    8 s, an `Event.wait()` until its timer set it; for ever without one)."""
    if hasattr(signal, "pthread_kill"):
        try:
            signal.pthread_kill(threading.main_thread().ident, signum)
            return
        except (OSError, ValueError):  # pragma: no cover - (the main thread gone: the process is ending)
            return
    import _thread  # pragma: no cover - (no pthread_kill on this platform)

    _thread.interrupt_main(signum)


_LOGGING_RELEASES = ("_releaseLock", "_afterFork")  # logging's release of its module lock (`_afterFork`: the after-fork hook from 3.13)
# The standard library's Python-level functions that acquire a lock and return holding it, or release one: a signal's
# handler runs at whatever bytecode comes next, also just after their acquire (the lock held, the caller's `try` or
# `with` body not yet entered) or at the first bytecode of their release (the release skipped).  An interrupt raised
# there leaves the lock held for good:
# * logging's module lock (`_acquireLock`/`_releaseLock`, around every logger lookup and level check, and its
#   after-fork hook) or a handler's (`Handler.acquire`/`release`, around every record written): the next thread that
#   logs waits for ever (make test-long: the driver hung, its tracking thread waiting for logging's lock);
# * a Condition's (`__enter__`/`__exit__`: `queue.Queue`, `threading.Event`): the MLflow writer's queue, which the main
#   thread fills at each trial report; the main thread's next write, as it closed its runs, waited for ever on the
#   queue's lock it held itself (make test-long's fault matrix: a driver that never ended after SIGINT).
_LOCK_EDGES = (
    *((logging, name) for name in (*_LOGGING_RELEASES, "_acquireLock", "_prepareFork")),
    (logging.Handler, "acquire"), (logging.Handler, "release"),
    (threading.Condition, "__enter__"), (threading.Condition, "__exit__"),
)


def _at_lock_edge(frame) -> bool:
    """`frame` (where a signal's handler runs) is one of _LOCK_EDGES."""
    code = frame.f_code
    for owner, name in _LOCK_EDGES:
        if getattr(getattr(owner, name, None), "__code__", None) is code:
            return True
    return False


def _release_logging_lock(hook) -> None:
    """`hook`, cut short by a signal, is logging's after-fork hook in the parent: release the module lock it left held."""
    if any(hook is getattr(logging, name, None) for name in _LOGGING_RELEASES):
        release_leaked_logging_lock()


def release_leaked_logging_lock() -> None:
    """Release logging's module lock if this thread holds it.  Called where this thread is surely outside logging's
    own code (the driver's handling of an interrupt): holding it there means an interrupt raised as logging released
    it (Ray's SIGTERM handler, in place while `ray.init` runs, at the first bytecode of a logging call's `finally:
    _releaseLock()`) left it held, and the next thread that logs would wait for ever (the driver hung joining its
    tracking thread: tests/system/test_signal_cut_short.py injects the moment)."""
    lock = getattr(logging, "_lock", None)
    owned = getattr(lock, "_is_owned", None)  # (the C RLock's; absent on another implementation: nothing done)
    for _ in range(8):  # (an RLock: once per leaked acquire)
        if lock is None or owned is None or not owned():
            return
        try:
            lock.release()
        except RuntimeError:  # pragma: no cover - (not held after all)
            return


class deferred:
    """A section the interrupt must not cut short: closing the driver's MLflow runs and flushing its writes.  The
    first signal (or closed output) that comes inside it is kept and raised as the KeyboardInterrupt when the section
    ends; a later one says "already stopping" as always.  Without it, a Ctrl-C that came while a finishing comparison
    flushed its last writes (the sweep's end, the comparison's) stopped the flush: those writes were lost with the
    writer's thread, and MLflow showed the finished comparison RUNNING (CI, the fault matrix's "fixed assessment" row).

    `then_raise=False`: the caller is already ending with an exception of its own (a failure being closed), which
    goes on in place of the interrupt; so does an exception raised inside the section.  The kept signal stays counted
    either way (interrupted_by: the command is stopping).  Nested sections raise at the outermost one's end.  Off the
    main thread (where no signal handler runs) it does nothing."""

    def __init__(self, then_raise: bool = True):
        self.then_raise = then_raise
        self.on = False

    def __enter__(self):
        self.on = threading.current_thread() is threading.main_thread()
        if self.on:
            _deferring.append(self.then_raise)
        return self

    def __exit__(self, kind, error, tb):
        if not self.on:
            return False
        _deferring.pop()
        if not _deferring and _deferred:
            _deferred.clear()
            if kind is None and self.then_raise:
                raise KeyboardInterrupt
        return False


def finished() -> None:
    """The command returned: a signal from now on no longer raises.  One that landed in the interpreter's exit, in Ray's
    exit handlers, cut Ray's shutdown short and crashed the process (SIGSEGV, exit -11, after a comparison had finished
    and its report was written)."""
    _finished.append(True)


def forget_unhandled_interrupt() -> None:
    """Called by the CLI's `entry` just before the process exits with the code its command decided.

    CPython marks a KeyboardInterrupt that leaves the code of an `exec` or `eval` of a string (the `__init__`
    `dataclasses` writes, the constructor `namedtuple` writes: many, while the command's first modules import) as
    unhandled, even where the program then catches it, and `python -m` (search.cli's `__main__`, the tests' way)
    ends such a process by SIGINT once it has exited: exit -2 (a shell's 130) whatever code `sys.exit` gave.  The
    `awnn` script (a file, whose SystemExit goes through `Py_Exit`) did not: `python -m search.cli` ended 4 of ~60
    SIGTERMs sent in its first 0.3 s by SIGINT, after its "interrupted" line.  Each later `exec` of a string clears
    the mark (CPython, `run_eval_code_obj`: "re-initialize _Py_UnhandledKeyboardInterrupt every eval"), so one
    here, once the interrupt was handled, leaves the exit to `sys.exit`.  tests/search/test_signals_exit_m.py
    checks the premise on the Python it runs under."""
    exec("pass")  # noqa: S102 - (a constant string: what clears CPython's mark, see above)


def disable() -> None:
    """The command's handling off again in this process, its state cleared (a caller that ran `search.cli.main` in its
    own process and goes on: the test suite).  `restore` and the closed-output interrupt then do nothing; re-delivery
    timers still pending are cancelled.  The signals' handlers and `sys.unraisablehook` are the caller's to put back
    (enable() does not keep what they were)."""
    global _enabled
    _enabled = False
    for lst in (_stopping, _deferring, _deferred, _redeliver, _finished, _closed):
        lst.clear()
    for timer in pending_redeliveries():
        timer.cancel()


def pending_redeliveries() -> list[threading.Timer]:
    """The timers that will deliver a signal again to the main thread (_raise_interrupt at a lock's edge, _unraisable)
    and have not yet fired."""
    return [t for t in threading.enumerate()
            if isinstance(t, threading.Timer) and getattr(t, "function", None) is _interrupt_main and not t.finished.is_set()]


def restore() -> None:
    if _enabled and threading.current_thread() is threading.main_thread():
        for sig in _signals:
            signal.signal(sig, _raise_interrupt)


def ray_sigterm(exit: SystemExit) -> bool:
    """`exit` is what Ray's SIGTERM handler raises (`sys.exit(signum)`) while
    the CLI handles SIGTERM: the command was told to stop."""
    return _enabled and exit.code == signal.SIGTERM


def interrupted_by(error: BaseException) -> bool:
    """Whether `error`, ending a command, is its interruption: a KeyboardInterrupt, Ray's SIGTERM exit
    (ray_sigterm), or any other exception raised once the command was told to stop (the first of these
    signals, a closed output) or while a KeyboardInterrupt propagated.

    An interrupt lands at whatever bytecode runs (Python runs the handler
    there): inside Ray Tune's bookkeeping it can leave a half-done update
    (a placement group taken out of one of its tables, not yet out of the
    next), and Tune's cleanup then fails on it (CI: `KeyError:
    <PlacementGroup ...>` from a SIGINT that came during a lazy import), so
    that error, not the KeyboardInterrupt, reaches the command.  It is still
    the stop the user asked for: the runs close as interrupted, the exit is 130."""
    if isinstance(error, KeyboardInterrupt) or (isinstance(error, SystemExit) and ray_sigterm(error)):
        return True
    if _enabled and _stopping:
        return True
    return _caused_by_interrupt(error.__context__ or error.__cause__)


def stop_if_interrupted(error: BaseException) -> None:
    """Raise KeyboardInterrupt (from `error`) when `error` is the interruption's doing (interrupted_by).  For a broad
    `except Exception` in the driver's thread that goes on after a failure (a warning, a fallback, a hint): the
    interrupt, landing inside a library, may reach it as another error (MLflow's SQL, matplotlib, ...), and the stop
    the user asked for must not become a warning and an exit 0."""
    if interrupted_by(error):
        raise KeyboardInterrupt from error


# ------------------------------------------------------------ a closed output
_closed: list[tuple[str, OSError]] = []  # the streams ("stdout", "stderr") that could not be written, and why


def output_closed() -> str | None:
    """The first of the command's outputs that could not be written (guard_output), or None."""
    return _closed[0][0] if _closed else None


def output_fault() -> tuple[str, OSError] | None:
    """(stream, error) of the first output that could not be written: BrokenPipeError when its reader went away,
    else the OSError of the write (no room on the disk of a file it was redirected to, an I/O error)."""
    return _closed[0] if _closed else None


def _unwritable(stream, name: str, error: OSError) -> None:
    """`stream` cannot be written: later writes go to /dev/null, and the command is interrupted once."""
    import contextlib

    with contextlib.suppress(OSError, ValueError):  # (a stream without a file descriptor: its writes keep failing, quietly)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    if any(n == name for n, _ in _closed):
        return
    _closed.append((name, error))
    if not _enabled or _stopping:  # a library caller's streams, or already stopping: nothing more to stop
        return
    if threading.current_thread() is threading.main_thread():
        _stopping.append(-1)
        if _deferring:
            _deferred.append(-1)
            return
        raise KeyboardInterrupt
    import _thread

    _thread.interrupt_main(signal.SIGINT)  # (runs our handler, or Python's default: a KeyboardInterrupt in the main thread)


class _Guarded:
    """A stream whose writes never raise OSError: see _unwritable."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as e:
            _unwritable(self._stream, self._name, e)
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except OSError as e:
            _unwritable(self._stream, self._name, e)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class guard_output:
    """Within it, sys.stdout and sys.stderr are _Guarded (restored after)."""

    def __enter__(self):
        _closed.clear()
        self._saved = sys.stdout, sys.stderr
        sys.stdout = _Guarded(sys.stdout, "stdout") if sys.stdout is not None else None
        sys.stderr = _Guarded(sys.stderr, "stderr") if sys.stderr is not None else None
        return self

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self._saved
        return False
