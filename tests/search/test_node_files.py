"""The files a local Ray node keeps on this machine (search/node_files.py).  Its folder: a TMPDIR too long for Ray's
Unix sockets (a Slurm job's), empty, relative or naming a file is passed over for a folder that works, said in one
line; a RAY_TMPDIR the user set that cannot work is one line and exit 2 before Ray starts.  Before, a long TMPDIR ended
Ray's start in a 38-line traceback (AF_UNIX path length), an empty or relative one in a 30 s wait and "The current node
timed out during startup".  The layout the socket path is computed from is checked against a real Ray at the exact
limit.  Its token: where Ray would write ~/.ray/auth_token and cannot (HOME=/ in a container run with --user), the
node gets one in its environment (before: a 40-line traceback)."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, run_awnn
from search import node_files
from search.errors import SearchError

LIMIT = node_files.socket_limit("linux")


def _room(pid: int) -> int:
    """The longest root whose sockets fit, for a node started by process `pid`."""
    return LIMIT - 1 - len(node_files.longest_socket("", pid))  # (<root>/ray/...: the root, a slash, the rest)


def _root_of_length(base: str, length: int) -> str:
    """`base`/aaa... of exactly `length` bytes."""
    pad = length - len(base) - 1
    assert pad > 0, (base, length)
    return os.path.join(base, "a" * pad)


@pytest.fixture
def short_base():
    """A fresh folder with a short path (pytest's tmp_path may already be too long to be a Ray root)."""
    base = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_socket_path_is_rays_layout_and_its_length_is_what_ray_checks():
    path = node_files.longest_socket("/scratch/job", pid=4321)
    assert path == "/scratch/job/ray/session_0000-00-00_00-00-00_000000_4321/sockets/plasma_store"
    assert node_files.socket_limit("linux") == 107 and node_files.socket_limit("darwin") == 103


def test_a_root_fits_up_to_the_limit_and_not_one_byte_more(short_base):
    room = _room(os.getpid())
    fits, too_long = _root_of_length(short_base, room), _root_of_length(short_base, room + 1)
    assert len(node_files.longest_socket(fits)) == LIMIT
    assert node_files.root_problem(fits, platform="linux") is None  # missing, and made by Ray under a folder it may write
    problem = node_files.root_problem(too_long, platform="linux")
    assert problem.startswith(f"is too long ({room + 1} bytes)") and f"{LIMIT + 1} bytes, over the {LIMIT}-byte limit" in problem
    assert f"a folder of at most {room} bytes fits" in problem
    assert node_files.root_problem(fits, platform="darwin").startswith("is too long")  # macOS: 103 bytes


@pytest.mark.parametrize("root, said", [
    ("", "is empty (an unset shell variable?)"),
    ("  ", "is empty (an unset shell variable?)"),
    ("scratch/ray-files", "is a relative path"),
    (os.fsdecode(b"/tmp/caf\xe9"), "is not UTF-8 text"),  # (a name in Latin-1: Ray's paths are UTF-8 text)
])
def test_roots_ray_cannot_use_are_named(root, said):
    assert node_files.root_problem(root, platform="linux") == said


def test_a_file_or_a_folder_under_a_file_is_named(short_base):
    a_file = os.path.join(short_base, "f")
    Path(a_file).write_text("x")
    assert node_files.root_problem(a_file, platform="linux") == "is a file, not a folder"
    assert node_files.root_problem(os.path.join(a_file, "sub"), platform="linux") == f"cannot be made: {a_file} is a file, not a folder"


def _prepare(environ, **kw):
    said = []
    root = node_files.prepare(said.append, environ=environ, platform=kw.pop("platform", "linux"), **kw)
    return root, said


def test_a_usable_tmpdir_or_none_is_left_to_ray(short_base):
    env = {"TMPDIR": short_base}
    assert _prepare(env) == (short_base, []) and env == {"TMPDIR": short_base}
    env = {}
    assert _prepare(env) == ("/tmp", []) and env == {}
    env = {"TMPDIR": "/nonexistent/" + "x" * 80}  # macOS: Ray uses /tmp whatever TMPDIR says
    assert _prepare(env, platform="darwin") == ("/tmp", []) and "RAY_TMPDIR" not in env


@pytest.mark.parametrize("tmpdir, why", [
    ("/tmp/" + "slurm_jobdir/1355700/" * 4 + "tmp.t0016", "is too long"),
    ("", "is empty"),
    ("tmp", "is a relative path"),
])
def test_a_tmpdir_ray_cannot_use_is_passed_over_for_one_that_works_and_said(short_base, tmpdir, why):
    env = {"TMPDIR": tmpdir}
    Path(short_base, "f").write_text("x")
    missing = os.path.join(short_base, "missing")  # (a fallback is a folder that is there, not one to make)
    root, said = _prepare(env, fallbacks=("relative", os.path.join(short_base, "f", "x"), missing, short_base))
    assert root == short_base and env == {"TMPDIR": tmpdir, "RAY_TMPDIR": short_base}
    (line,) = said
    assert line.startswith(f"note: Ray's files go under {short_base}/ray: TMPDIR={tmpdir!r} {why}"), line
    assert line.endswith("(set RAY_TMPDIR to choose the folder)"), line


def test_a_tmpdir_with_no_folder_to_fall_back_on_is_one_line(short_base):
    env = {"TMPDIR": "/tmp/" + "x" * 100}
    Path(short_base, "f").write_text("x")
    with pytest.raises(SearchError) as e:
        _prepare(env, fallbacks=(os.path.join(short_base, "f"), "rel"))
    text = str(e.value)
    assert "\n" not in text and text.startswith(f"TMPDIR='/tmp/{'x' * 100}' is too long"), text
    assert f"none of {short_base}/f, rel can take a local Ray's files instead; point RAY_TMPDIR at" in text, text
    assert "RAY_TMPDIR" not in env


@pytest.mark.parametrize("value, said", [
    ("", "is empty (an unset shell variable?)"),
    ("/tmp/" + "y" * 90, "is too long (95 bytes)"),
])
def test_a_ray_tmpdir_the_user_set_that_cannot_work_is_refused_not_replaced(value, said):
    env = {"RAY_TMPDIR": value, "TMPDIR": "/tmp"}
    with pytest.raises(SearchError) as e:
        _prepare(env)
    text = str(e.value)
    assert text.startswith(f"RAY_TMPDIR={value!r} {said}") and "(e.g. RAY_TMPDIR=/tmp), or unset it" in text, text
    assert env["RAY_TMPDIR"] == value  # the user's choice is not overridden


def test_a_relative_ray_tmpdir_is_made_absolute(short_base, monkeypatch):
    monkeypatch.chdir(short_base)
    env = {"RAY_TMPDIR": "rayfiles"}
    assert _prepare(env) == (os.path.join(short_base, "rayfiles"), [])
    assert env["RAY_TMPDIR"] == os.path.join(short_base, "rayfiles")


# the real Ray: a root of exactly the longest length allowed starts a node whose socket path is exactly the limit
NODE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[2])
from search import node_files
room = node_files.socket_limit() - 1 - len(node_files.longest_socket(""))
root = os.path.join(sys.argv[1], "a" * (room - len(sys.argv[1]) - 1))
os.environ["RAY_TMPDIR"] = root
node_files.prepare(print)  # (nothing to say: it fits)
import ray
ctx = ray.init(address="local", num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
               log_to_driver=False, configure_logging=False)
print(json.dumps({"root": root, "socket": ctx.address_info["object_store_address"],
                  "predicted": node_files.longest_socket(root)}))
ray.shutdown()
"""


@pytest.mark.timeout(120)
def test_a_real_ray_starts_at_the_longest_root_allowed_and_its_socket_is_the_one_computed(short_base):
    import json

    p = subprocess.run([sys.executable, "-c", NODE, short_base, str(ROOT)], capture_output=True, text=True, timeout=110,
                       env={**os.environ, "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"})
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    assert len(lines) == 1, p.stdout  # prepare said nothing
    got = json.loads(lines[0])
    socket, predicted = got["socket"], got["predicted"]
    stamp = socket.split("/session_", 1)[1].split("_", 4)  # date, time, microseconds, pid/...
    assert predicted.replace(node_files.SESSION_TIME, "_".join(stamp[:3])) == socket, (socket, predicted)
    assert len(os.fsencode(socket)) == node_files.socket_limit(), socket


def test_awnn_compare_with_a_slurm_length_tmpdir_and_a_home_it_cannot_write_runs_and_says_where_rays_files_went(tmp_path, short_base):
    long_tmp = Path(short_base, "slurm_jobdir", "1355700", "x" * 40, "tmp.t0016")
    long_tmp.mkdir(parents=True)
    env = {"TMPDIR": str(long_tmp), "HOME": "/proc", "MPLCONFIGDIR": str(tmp_path / "mpl")}  # (a home that takes no files)
    p = run_awnn(["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed", "--num-cpus", "2",
                  "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}"], cwd=tmp_path, timeout=300, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    assert "Traceback" not in p.stderr, p.stderr[-4000:]
    notes = [ln for ln in p.stderr.splitlines() if ln.startswith("note: Ray's files go under ")]
    assert len(notes) == 1 and f"TMPDIR='{long_tmp}' is too long" in notes[0], p.stderr[-3000:]
    assert "Report: " in p.stdout


@pytest.mark.parametrize("command", [
    ["compare", "--task", "doublemoon", "--budget", "smoke", "--strategies", "fixed"],
    ["sweep", "--task", "doublemoon", "--budget", "smoke", "--strategy", "awnn"],
    ["study", "fig3", "--budget", "smoke"],
])
def test_every_command_that_starts_ray_refuses_an_unusable_ray_tmpdir_in_one_line_and_writes_nothing(tmp_path, command):
    Path(tmp_path, "afile").write_text("x")
    p = run_awnn([*command, "--num-cpus", "2"], cwd=tmp_path, timeout=120, env={"RAY_TMPDIR": str(tmp_path / "afile")})
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-3000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert line == (f"awnn {command[0]}: error: RAY_TMPDIR='{tmp_path / 'afile'}' is a file, not a folder; a local Ray "
                    "keeps its files there: point RAY_TMPDIR at a short folder this user may write (e.g. RAY_TMPDIR=/tmp), "
                    "or unset it"), p.stderr
    assert sorted(os.listdir(tmp_path)) == ["afile"]  # no store, no results folder


# ------------------------------------------------------------------ the token
def _token_env(home, **more):
    return {"HOME": str(home), **more}


@pytest.mark.parametrize("more", [{"RAY_AUTH_MODE": "disabled"}, {"RAY_AUTH_TOKEN": "ab" * 32}, {"RAY_AUTH_TOKEN_PATH": "/x"}])
def test_a_token_given_or_authentication_turned_off_is_left_to_ray(more):
    env = _token_env("/proc", **more)
    assert node_files.prepare_token(env) is False and env == _token_env("/proc", **more)


def test_a_token_in_the_home_or_a_home_ray_can_write_is_left_to_ray(tmp_path):
    env = _token_env(tmp_path)
    assert node_files.prepare_token(env) is False and "RAY_AUTH_TOKEN" not in env
    assert os.listdir(tmp_path / ".ray") == []  # Ray's folder made as Ray would, the probe gone
    (tmp_path / ".ray" / "auth_token").write_text("cd" * 32)
    assert node_files.prepare_token(env) is False and "RAY_AUTH_TOKEN" not in env


@pytest.mark.parametrize("home", ["/proc", "a file"])
def test_a_home_that_takes_no_token_gets_one_in_the_nodes_environment(tmp_path, home):
    if home == "a file":
        home = tmp_path / "f"
        home.write_text("x")
    env = _token_env(home, RAY_AUTH_MODE="token")
    assert node_files.prepare_token(env) is True
    token = env["RAY_AUTH_TOKEN"]
    assert len(token) == 64 and int(token, 16) >= 0 and node_files.prepare_token(dict(env)) is False
