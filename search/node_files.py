"""The files a local Ray node keeps on this machine: its session folder and its authentication token, checked (and
where Ray's own choice cannot work, chosen) before the node starts.

**The session folder.**  A local node of Ray 2.x puts its session under a root folder: RAY_TMPDIR, else (on Linux)
TMPDIR, else /tmp, as `<root>/ray/session_<YYYY-MM-DD_HH-MM-SS_micro>_<pid>/`, and its two Unix sockets in that
session's `sockets/` (`plasma_store`, `raylet`).  A Unix socket's path is at most 107 bytes (103 on macOS), so a root of
more than ~39 bytes cannot hold them, and Ray's start ended in a 38-line traceback ("AF_UNIX path length cannot exceed
107 bytes").  Such roots are common: a Slurm job's TMPDIR (`/net/<site>/people/<user>/slurm_jobdir/<job>/tmp.t0016`),
per-job scratch folders, CI runners'.  Found by trying it (2026-12-07), as were roots Ray cannot use at all: an empty
or relative RAY_TMPDIR (or TMPDIR) made the node wait 30 s and end in "The current node timed out during startup";
one naming a file ended in NotADirectoryError's traceback.  `prepare`:

* RAY_TMPDIR set (the user chose Ray's folder): a relative path is made absolute (as --data-root is); empty, a file,
  a folder this user may not write (or make), or too long for the sockets is one line naming RAY_TMPDIR, what is
  wrong and what to set, before Ray starts (exit 2, nothing written);
* else Ray's own pick (TMPDIR on Linux, else /tmp) when it works; when it does not (TMPDIR too long, empty, relative,
  a file, not writable), the first folder of Python's temporary folder (`tempfile.gettempdir()`, which passes over
  an unusable TMPDIR), /tmp, /var/tmp and /dev/shm that is there and works, set as RAY_TMPDIR for the node (its
  processes inherit it) and said in one line; none working is one line, as above.  A trial's own scratch files still
  go to TMPDIR (search/scratch.py): only Ray's session moves.

The socket path is computed from Ray's layout (the session name and file names above, ray/_private/node.py);
tests/search/test_node_files.py starts a real Ray at a root of exactly the longest length allowed, so a Ray that
changes its layout fails that test instead of this module guessing wrong.

**The token.**  Since Ray 2.5x a new local node enables token authentication unless RAY_AUTH_MODE says otherwise,
and, with no token given (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH) and none in `~/.ray/auth_token`, writes a new one
there.  A home this user may not write (a container run with `--user`, whose HOME is `/`; a read-only home on
compute nodes) ended Ray's start in a 40-line traceback (`FileNotFoundError: '/proc/.ray'`, found 2026-12-07).
`prepare_token` then gives the node a new token in its environment (RAY_AUTH_TOKEN, inherited by its processes, gone
with them): authentication stays on and nothing is written.  A token that is there, or a home Ray can write, is
left to Ray.  (Joining a cluster with --address uses the cluster's folders and token: nothing here applies.)
"""
from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Callable, Mapping, MutableMapping

__all__ = ["RAY_TMPDIR", "socket_limit", "ray_root", "longest_socket", "root_problem", "prepare", "token_path", "prepare_token"]

RAY_TMPDIR = "RAY_TMPDIR"
FALLBACKS = ("/tmp", "/var/tmp", "/dev/shm")  # after tempfile.gettempdir(): short folders most machines have
SESSION_TIME = "0000-00-00_00-00-00_000000"  # the length of Ray's session time stamp (%Y-%m-%d_%H-%M-%S_%f)
LONGEST_SOCKET = "plasma_store"  # the longer of a node's two socket files (the other: raylet)


def socket_limit(platform: str | None = None) -> int:
    """The longest Unix socket path Ray accepts, in bytes (its validate_socket_filepath: sun_path less its NUL)."""
    return (104 if (platform or sys.platform).startswith("darwin") else 108) - 1


def ray_root(environ: Mapping[str, str] | None = None, platform: str | None = None) -> tuple[str, str]:
    """(root, where it came from) as Ray 2.x picks a local node's root folder: RAY_TMPDIR, else TMPDIR on Linux,
    else /tmp.  The root as given (possibly empty or relative)."""
    environ = os.environ if environ is None else environ
    platform = platform or sys.platform
    if RAY_TMPDIR in environ:
        return environ[RAY_TMPDIR], RAY_TMPDIR
    if platform.startswith("linux") and "TMPDIR" in environ:
        return environ["TMPDIR"], "TMPDIR"
    return "/tmp", "Ray's default"


def longest_socket(root: str, pid: int | None = None) -> str:
    """The path of the longest socket a local node started by process `pid` makes under `root`."""
    session = f"session_{SESSION_TIME}_{os.getpid() if pid is None else pid}"
    return os.path.join(root, "ray", session, "sockets", LONGEST_SOCKET)


def root_problem(root: str, pid: int | None = None, platform: str | None = None) -> str | None:
    """What keeps a local Ray from using `root` (an absolute path, or what it is), or None when it can."""
    if not root.strip():
        return "is empty (an unset shell variable?)"
    if not os.path.isabs(root):
        return "is a relative path"
    try:
        root.encode("utf-8")
    except UnicodeEncodeError:  # (a name in a legacy encoding: Ray's paths are UTF-8 text)
        return "is not UTF-8 text"
    folder = root
    while not os.path.lexists(folder):  # Ray makes the missing folders: the nearest one there must take them
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if not os.path.isdir(folder):
        return "is a file, not a folder" if folder == root else f"cannot be made: {folder} is a file, not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return "is a folder this user may not write" if folder == root else f"cannot be made: this user may not write {folder}"
    socket = longest_socket(root, pid)
    size, limit = len(os.fsencode(socket)), socket_limit(platform)
    if size > limit:
        room = limit - (size - len(os.fsencode(root)))
        return (f"is too long ({len(os.fsencode(root))} bytes): a local Ray's sockets under it "
                f"(<root>/ray/session_<time>_<pid>/sockets/{LONGEST_SOCKET}) would be {size} bytes, over the {limit}-byte "
                f"limit of a Unix socket's path; a folder of at most {room} bytes fits")
    return None


def prepare(log: Callable[[str], None] = print, environ: MutableMapping[str, str] | None = None,
            platform: str | None = None, fallbacks: tuple[str, ...] | None = None) -> str:
    """Make sure the local node Ray is about to start has a root folder it can use (module docstring); returns that
    root.  Raises search.errors.SearchError (one line) when none can be had."""
    from .errors import SearchError

    environ = os.environ if environ is None else environ
    root, source = ray_root(environ, platform)
    problem = root_problem(root, platform=platform)
    if source == RAY_TMPDIR:
        if problem == "is a relative path":
            root = os.path.abspath(root)
            problem = root_problem(root, platform=platform)
            if problem is None:
                environ[RAY_TMPDIR] = root  # (Ray's node and workers start in other folders: the same folder for all)
                return root
        if problem is None:
            return root
        raise SearchError(f"RAY_TMPDIR={root!r} {problem}; a local Ray keeps its files there: point RAY_TMPDIR at a "
                          f"short folder this user may write (e.g. RAY_TMPDIR=/tmp), or unset it")
    if problem is None:
        return root
    candidates = (tempfile.gettempdir(), *FALLBACKS) if fallbacks is None else fallbacks
    for other in dict.fromkeys(candidates):  # (in order, once each)
        if os.path.isdir(other) and root_problem(other, platform=platform) is None:
            environ[RAY_TMPDIR] = other
            log(f"note: Ray's files go under {os.path.join(other, 'ray')}: {source}={root!r} {problem} (set RAY_TMPDIR "
                f"to choose the folder)")
            return other
    raise SearchError(f"{source}={root!r} {problem}, and none of {', '.join(dict.fromkeys(candidates))} can take a local "
                      f"Ray's files instead; point RAY_TMPDIR at a short folder this user may write")


def token_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where a new local node looks for (and, missing, writes) its token: `~/.ray/auth_token` of HOME (else the
    user's entry in the password database), as Ray does; None where there is no home to find."""
    environ = os.environ if environ is None else environ
    home = environ.get("HOME")
    if home is None:
        try:
            home = str(Path.home())
        except (RuntimeError, KeyError):  # (no HOME and no password entry: a container's arbitrary uid)
            return None
    return Path(home or "/") / ".ray" / "auth_token"


def _can_make(path: Path) -> bool:
    """The file `path` can be written by this user, tried for real: its folder made (as Ray would make it) and a
    probe file written there and removed (os.access says yes to root for folders that take no files, e.g. /proc)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=path.parent, prefix=".awnn-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError:
        return False
    return not path.exists() or os.access(path, os.W_OK)


def prepare_token(environ: MutableMapping[str, str] | None = None) -> bool:
    """Give the local node about to start a token in its environment where Ray would need to write one and cannot
    (module docstring); True when it did."""
    environ = os.environ if environ is None else environ
    mode = environ.get("RAY_AUTH_MODE")
    if mode is not None and mode.strip().lower() != "token":  # (authentication turned off: no token wanted)
        return False
    if environ.get("RAY_AUTH_TOKEN", "").strip() or environ.get("RAY_AUTH_TOKEN_PATH"):  # (given: Ray reads and checks it)
        return False
    path = token_path(environ)
    if path is not None:
        try:
            if path.is_file() and os.access(path, os.R_OK) and path.stat().st_size > 0:
                return False  # Ray reads it
        except OSError:
            pass
        if _can_make(path):
            return False  # Ray writes it
    environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # (as Ray makes one: 256 bits)
    return True
