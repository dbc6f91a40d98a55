"""Real servers for tests, on 127.0.0.1: PostgreSQL, an MLflow tracking
server (with or without its basic-auth app) and a local multi-node Ray
cluster with token authentication.

Each is a context manager: it starts the server, waits a bounded time for it
to answer, yields what a client needs, and on exit stops exactly the
processes it started (their process groups, never other users' servers).
A server whose software is missing raises `ServerUnavailable`; tests turn
it into a skip that names what to install.

    with postgres_server(tmp_path) as pg, mlflow_server(pg.uri, tmp_path) as ml:
        env = ml.client_env()            # MLFLOW_TRACKING_URI + admin credentials
    with ray_cluster(tmp_path, nodes=2) as cluster:
        env = cluster.client_env()       # RAY_ADDRESS + RAY_AUTH_* for drivers
"""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_BIN = ROOT / "cluster" / "bin"
VENV_BIN = Path(sys.executable).parent

__all__ = [
    "ServerUnavailable",
    "PostgresServer",
    "MlflowServer",
    "RayCluster",
    "free_port",
    "postgres_server",
    "mlflow_server",
    "ray_cluster",
    "stop_process_group",
]


class ServerUnavailable(RuntimeError):
    """The software a server needs is not installed here (tests skip on it)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _pgid_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in group `pgid`."""
    if os.path.isdir("/proc/self"):
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            # after "(comm)": state ppid pgrp ...
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_process_group(pgid: int, timeout: float = 15.0, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group `pgid` (one we created with start_new_session),
    wait up to `timeout` seconds, then SIGKILL what is left.  `proc`, the
    group's leader if we started it, is reaped on the way."""
    def gone() -> bool:
        if proc is not None:
            proc.poll()
        return not _pgid_alive(pgid)

    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if gone():
            return
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.1)


# ---------------------------------------------------------------- PostgreSQL
@dataclass
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    database: str
    data_dir: Path
    log_path: Path

    @property
    def uri(self) -> str:
        """SQLAlchemy URI (what `mlflow server --backend-store-uri` takes)."""
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    # Debian keeps the server binaries out of PATH
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(Path(p).parts[-3]))
    if candidates:
        return candidates[-1]
    raise ServerUnavailable(f"PostgreSQL's {name} not found (install Debian's postgresql package; `make test` runs tests/system_deps.sh, which does)")


def _server_user() -> pwd.struct_passwd | None:
    """initdb and postgres refuse to run as root: run them as `postgres` (or `nobody`)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServerUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists to run PostgreSQL")


@contextmanager
def postgres_server(tmp_path: Path, *, user: str = "awnn", database: str = "mlflow", timeout: float = 60.0) -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL cluster on 127.0.0.1 with password (SCRAM) login
    over TCP only (no Unix socket).  Logs go to `tmp_path`."""
    initdb, pg_ctl, createdb = _pg_bin("initdb"), _pg_bin("pg_ctl"), _pg_bin("createdb")
    runas = _server_user()
    # its own directory under /tmp: tmp_path may not be reachable by the server user
    base = Path(tempfile.mkdtemp(prefix="awnn-pg-"))
    data, log = base / "data", base / "server.log"
    password = secrets.token_hex(16)
    pwfile = base / "pwfile"
    pwfile.write_text(password + "\n")
    kw: dict = {}
    if runas is not None:
        os.chown(base, runas.pw_uid, runas.pw_gid)
        os.chown(pwfile, runas.pw_uid, runas.pw_gid)
        kw = {"user": runas.pw_uid, "group": runas.pw_gid, "extra_groups": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(LC_ALL="C", LANG="C")
    started = False
    port = free_port()
    try:
        p = subprocess.run([initdb, "-D", str(data), "-U", user, f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8",
                            "--no-locale", "--no-sync"], capture_output=True, text=True, timeout=timeout, env=env, cwd=base, **kw)
        if p.returncode != 0:
            raise RuntimeError(f"initdb failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
        pwfile.unlink()
        with open(data / "postgresql.conf", "a") as f:
            f.write(f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
                    "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 50\n")
        p = subprocess.run([pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", str(int(timeout)), "start"],
                           capture_output=True, text=True, timeout=timeout + 10, env=env, cwd=base, start_new_session=True, **kw)
        started = True
        if p.returncode != 0:
            raise RuntimeError(f"PostgreSQL did not start ({p.returncode}):\n{p.stderr[-2000:]}\nlog:\n{_tail(log)}")
        penv = {**env, "PGPASSWORD": password}
        p = subprocess.run([createdb, "-h", "127.0.0.1", "-p", str(port), "-U", user, database],
                           capture_output=True, text=True, timeout=timeout, env=penv)
        if p.returncode != 0:
            raise RuntimeError(f"createdb failed: {p.stderr[-2000:]}")
        yield PostgresServer("127.0.0.1", port, user, password, database, data, log)
    finally:
        if started:
            _stop_postgres(pg_ctl, data, env, kw)
        if log.exists():
            shutil.copy(log, Path(tmp_path) / "postgres.log")
        shutil.rmtree(base, ignore_errors=True)


def _stop_postgres(pg_ctl: str, data: Path, env: dict, kw: dict) -> None:
    try:
        p = subprocess.run([pg_ctl, "-D", str(data), "-m", "fast", "-w", "-t", "20", "stop"],
                           capture_output=True, text=True, timeout=30, env=env, **kw)
        if p.returncode == 0:
            return
    except subprocess.TimeoutExpired:
        pass
    try:  # the postmaster's pid is the first line of postmaster.pid
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


# ---------------------------------------------------------------- MLflow
@dataclass
class MlflowServer:
    url: str
    admin_username: str | None
    admin_password: str | None
    log_path: Path
    artifacts_dir: Path

    def client_env(self, username: str | None = None, password: str | None = None) -> dict[str, str]:
        """Environment for an MLflow client of this server (admin credentials by default)."""
        env = {"MLFLOW_TRACKING_URI": self.url}
        user = username or self.admin_username
        if user:
            env["MLFLOW_TRACKING_USERNAME"] = user
            env["MLFLOW_TRACKING_PASSWORD"] = password if username else self.admin_password
        return env


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before answering:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer {url} within {timeout:.0f} s:\n{_tail(log)}")
        time.sleep(0.5)


@contextmanager
def mlflow_server(backend_uri: str, tmp_path: Path, *, auth: bool = True, workers: int = 1,
                  allowed_hosts: str | None = None, timeout: float = 90.0) -> Iterator[MlflowServer]:
    """`mlflow server` on 127.0.0.1 with `backend_uri`, artifacts proxied
    (--serve-artifacts) to a folder in `tmp_path`.

    With `auth`, the server is started the way docker-compose.yml starts it
    (cluster/bin/awnn-mlflow-server: the basic-auth app, its user store in
    the same database) with a fresh admin password."""
    if auth:
        try:
            import flask_wtf  # noqa: F401 - the basic-auth app needs it (mlflow[auth])
        except ImportError:
            raise ServerUnavailable("MLflow's basic-auth app needs Flask-WTF: pip install 'mlflow[auth]'") from None
    if backend_uri.startswith("postgresql"):
        try:
            import psycopg2  # noqa: F401
        except ImportError:
            raise ServerUnavailable("MLflow on PostgreSQL needs psycopg2: pip install psycopg2-binary") from None
    tmp_path = Path(tmp_path)
    port = free_port()
    artifacts = tmp_path / "mlflow-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "mlflow-server.log"
    args = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
            "--artifacts-destination", artifacts.as_uri()]
    if allowed_hosts:
        args += ["--allowed-hosts", allowed_hosts]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AWS_"))}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path)
    # no background job runner (GenAI evaluation jobs): seven worker processes a test does not need
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    admin = admin_password = None
    if auth:
        admin, admin_password = "admin", secrets.token_hex(16)
        env.update(MLFLOW_BACKEND_STORE_URI=backend_uri, MLFLOW_AUTH_ADMIN_USERNAME=admin,
                   MLFLOW_AUTH_ADMIN_PASSWORD=admin_password, MLFLOW_FLASK_SERVER_SECRET_KEY=secrets.token_hex(24))
        cmd = ["bash", str(CLUSTER_BIN / "awnn-mlflow-server"), *args]
    else:
        cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri, *args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_http(url + "/health", proc, log, timeout, "mlflow server")
        yield MlflowServer(url, admin, admin_password, log, artifacts)
    finally:
        stop_process_group(proc.pid, timeout=10, proc=proc)


# ---------------------------------------------------------------- Ray
@dataclass
class RayCluster:
    address: str
    token: str
    temp_dir: Path
    node_count: int
    node_ids: list[str] = field(default_factory=list)  # hex ids of the live nodes, head first
    pgids: list[int] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)  # the nodes kill_node ended (no longer expected alive)
    killed_ids: set[str] = field(default_factory=set)  # their node ids (the GCS may show them alive for a while)
    _start: Callable[..., None] | None = None  # ray_cluster's node starter (add_node)
    _marker: str = ""  # the environment marker of this cluster's processes

    def add_node(self, num_cpus: int, timeout: float = 90.0, env: dict[str, str] | None = None,
                 wrap: list[str] | None = None) -> None:
        """Start one more node with `num_cpus` CPUs (as a machine that joins
        the cluster, or an autoscaler's node) and wait until it is alive.
        `env`: variables set for that node's processes alone (its workers
        inherit them: e.g. a PYTHONPATH that makes its Python differ).
        `wrap`: a command its `ray start` runs under (its daemons and workers
        inherit what it sets up: e.g. `unshare -m` and a bind mount, a
        filesystem of that node's own)."""
        self._start(self.node_count, num_cpus, env, wrap)
        self.node_count += 1
        self.node_ids = _wait_for_nodes(self, _ray_env(self.token, self._marker), timeout)

    def client_env(self) -> dict[str, str]:
        """Environment for a driver of this cluster (`ray.init()` / `awnn --address`)."""
        return {"RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token,
                "RAY_USAGE_STATS_ENABLED": "0"}

    def kill_node(self, i: int) -> list[int]:
        """SIGKILL every process of node `i` at once, as a machine that dies:
        its daemons (the group `ray start` left) and every process they
        started.  Ray 2.60 puts each worker in a process group of its own, so
        a SIGKILL to the node's group alone leaves the workers running (a
        trial went on to finish after its node was "killed").  Returns the
        pids signalled."""
        pgid = self.pgids[i]
        self.killed.add(i)
        parent = {}
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = open(stat).read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(stat.split("/")[2])] = (int(fields[1]), int(fields[2]))  # pid -> (ppid, pgid)
        doomed = {pid for pid, (_, g) in parent.items() if g == pgid}
        grew = True
        while grew:  # and their descendants
            more = {pid for pid, (pp, _) in parent.items() if pp in doomed} - doomed
            doomed |= more
            grew = bool(more)
        ids = _raylet_node_ids(doomed)
        if not ids:
            raise RuntimeError(f"node {i} of {self.address}: no raylet with --node_id= among its processes {sorted(doomed)}")
        self.killed_ids |= ids
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return sorted(doomed)


def _ray_env(token: str, marker: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_USAGE_STATS_ENABLED="0", AWNN_TEST_RAY_CLUSTER=marker)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _processes_with_marker(marker: str) -> list[int]:
    """Pids of our own processes whose environment carries `marker` (Linux)."""
    needle = f"AWNN_TEST_RAY_CLUSTER={marker}".encode()
    pids = []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            if needle in Path(environ).read_bytes().split(b"\0"):
                pids.append(int(environ.split("/")[2]))
        except (OSError, ValueError):
            continue
    return [p for p in pids if p != os.getpid()]


@contextmanager
def ray_cluster(tmp_path: Path, *, nodes: int = 2, cpus_per_node: int = 1, object_store_bytes: int = 80 * 1024 * 1024,
                timeout: float = 90.0, default_temp_dir: bool = False) -> Iterator[RayCluster]:
    """A Ray cluster of `nodes` nodes on this machine (`ray start --head` plus
    `ray start --address` per extra node), all on 127.0.0.1, with token
    authentication on.  Its temp dir is private, so `ray stop` and other
    users' clusters are never involved; on exit every process of this
    cluster (and only those) is terminated.  `default_temp_dir`: in Ray's
    default temp dir instead, as a user's plain `ray start` is, which then
    names it in /tmp/ray/ray_current_cluster for any bare `ray.init()` here
    to join (removed on exit while it still names this cluster's port)."""
    ray_cli = VENV_BIN / "ray"
    if not ray_cli.exists():
        raise ServerUnavailable(f"the ray command is not installed next to {sys.executable}")
    # short path: Ray's Unix socket paths must stay under ~100 characters
    temp_dir = Path(tempfile.mkdtemp(prefix="awnn-ray-", dir="/tmp"))
    token, marker = secrets.token_hex(32), secrets.token_hex(8)
    env = _ray_env(token, marker)
    port = free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-gpus", "0",
              *([] if default_temp_dir else ["--temp-dir", str(temp_dir)]), "--object-store-memory", str(object_store_bytes),
              "--disable-usage-stats"]
    cluster = RayCluster(f"127.0.0.1:{port}", token, temp_dir, nodes, _marker=marker)
    logs = Path(tmp_path)

    def start(i: int, num_cpus: int, extra: dict[str, str] | None = None, wrap: list[str] | None = None) -> None:
        if i == 0:
            cmd = [str(ray_cli), "start", "--head", "--port", str(port), "--include-dashboard", "false",
                   "--dashboard-port", str(free_port()), *common]
        else:
            cmd = [str(ray_cli), "start", "--address", cluster.address, *common]
        cmd += ["--num-cpus", str(num_cpus), "--dashboard-agent-listen-port", str(free_port())]
        cmd = [*(wrap or []), *cmd]
        log = logs / f"ray-node-{i}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**env, **(extra or {})}, cwd=temp_dir,
                                    start_new_session=True)
        cluster.pgids.append(proc.pid)  # the node's daemons stay in this group after `ray start` returns
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`ray start` of node {i} did not return within {timeout:.0f} s:\n{_tail(log)}") from None
        if rc != 0:
            raise RuntimeError(f"`ray start` of node {i} failed ({rc}):\n{_tail(log)}")

    cluster._start = start
    try:
        for i in range(nodes):
            start(i, cpus_per_node)
        cluster.node_ids = _wait_for_nodes(cluster, env, timeout)
        yield cluster
    finally:
        for pgid in reversed(cluster.pgids):
            stop_process_group(pgid, timeout=5)  # gcs_server may sit out SIGTERM; `ray stop` waits 16 s
        for pid in _processes_with_marker(marker):  # anything that left its group
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
        if default_temp_dir:
            current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
            try:
                if current.read_text().strip().rpartition(":")[2] == str(port):  # (Ray writes the machine's address there)
                    current.unlink()
            except OSError:
                pass


def _raylet_node_ids(pids) -> set[str]:
    """The node ids of the raylets among `pids` (Ray 2.60 starts each raylet with --node_id=<hex>)."""
    ids = set()
    for pid in pids:
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        ids |= {a.partition("=")[2] for a in args if a.startswith("--node_id=")} if "raylet" in args[0] else set()
    return ids


def _wait_for_nodes(cluster: RayCluster, env: dict, timeout: float) -> list[str]:
    """Wait until the cluster shows exactly its nodes alive, those kill_node ended aside (the GCS shows a killed node
    alive until its health checks fail, which may be before or after the wait: on CI's machine it was before, here
    after); return their ids (head first)."""
    expected = cluster.node_count - len(cluster.killed)
    probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); "
             "nodes = [n for n in ray.nodes() if n['Alive']]; "
             "nodes.sort(key=lambda n: 'node:__internal_head__' not in n['Resources']); "
             "print(' '.join(n['NodeID'] for n in nodes))")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        p = subprocess.run([sys.executable, "-c", probe, cluster.address], capture_output=True, text=True,
                           timeout=timeout, env={k: v for k, v in env.items() if k != "AWNN_TEST_RAY_CLUSTER"})
        last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-1500:]
        alive = [n for n in last.split() if n not in cluster.killed_ids]
        if p.returncode == 0 and len(alive) == expected:
            return alive
        time.sleep(1)
    raise RuntimeError(f"the Ray cluster at {cluster.address} did not show {expected} live nodes within {timeout:.0f} s: {last}")
