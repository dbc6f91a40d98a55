"""Joining a Ray cluster that refuses the driver: the line says why and what to do (search/errors.py connect_error),
from Ray's own texts (tests/ray_texts.py, taken from real runs).  Before (2026-12-07): a cluster of another Ray
version was `cannot join the Ray cluster (Version mismatch: The cluster was started with:)`, the versions cut off;
a cluster that refused the driver's token, 20 lines of Ray's C++ warnings over 20 s, then `cannot join the Ray
cluster (Failed to connect to Ray cluster at ...)`, the token never named.  The real cluster's case:
tests/system/test_fault_bad_input.py."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from ray_texts import AUTH_REFUSED_CAUSE, AUTH_REFUSED_LINE, VERSION_MISMATCH
from search.errors import SearchError, TokenRefused, client_address_error, connect_error


def _raised_from(cause: str) -> ConnectionError:
    try:
        try:
            raise RuntimeError(cause)
        except RuntimeError as e:
            raise ConnectionError("Failed to connect to Ray cluster at 192.0.2.2:6412") from e
    except ConnectionError as e:
        return e


def test_another_ray_version_names_both_versions_and_the_install_that_matches():
    line = str(connect_error("10.0.0.5:6379", RuntimeError(VERSION_MISMATCH)))
    assert line == ("--address 10.0.0.5:6379: cannot join the Ray cluster: it runs Ray 2.59.0 on Python 3.11.2, this "
                    "driver Ray 2.60.0 on Python 3.11.7, and Ray joins only the same versions: run the driver with the "
                    "cluster's (pip install 'ray[tune]==2.59.0' in Python 3.11.2; a Python 3.11 other than 3.11.2 joins "
                    "with RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor) or start the cluster from this driver's "
                    "(cluster/Dockerfile pins the image's Ray)")


@pytest.mark.parametrize("cluster_python, expected", [
    ("3.11.2", "the Pythons differ only in their patch version, so set RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor"),
    ("3.12.1", "run the driver with the cluster's (pip install 'ray[tune]==2.60.0' in Python 3.12.1; a Python 3.12 other")])
def test_the_same_ray_on_another_python(cluster_python, expected):
    text = VERSION_MISMATCH.replace("2.59.0", "2.60.0").replace("3.11.2", cluster_python)
    line = str(connect_error("h:1", RuntimeError(text)))
    assert f"it runs Ray 2.60.0 on Python {cluster_python}, this driver Ray 2.60.0 on Python 3.11.7" in line
    assert expected in line, line


def test_a_message_of_several_lines_is_one_line_with_all_of_it():
    text = "Something failed:\n    reason one\n    reason two\n"
    assert str(connect_error("h:1", RuntimeError(text))) == "--address h:1: cannot join the Ray cluster (Something failed: reason one reason two)"
    long = str(connect_error("h:1", RuntimeError("x " * 400)))
    assert long.endswith(" ...)") and len(long) < 600 and "\n" not in long


@pytest.mark.parametrize("environ, sent", [
    ({}, "it sent none, as RAY_AUTH_MODE is not `token`: set RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN"),
    ({"RAY_AUTH_MODE": "disabled", "RAY_AUTH_TOKEN": "abc"},
     "it sent none, as RAY_AUTH_MODE is not `token` (RAY_AUTH_TOKEN is set, but Ray sends it only with RAY_AUTH_MODE=token)"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "abc"}, "the token in RAY_AUTH_TOKEN is not the cluster's"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/run/secrets/ray"},
     "the token in /run/secrets/ray (RAY_AUTH_TOKEN_PATH) is not the cluster's"),
    ({"RAY_AUTH_MODE": "TOKEN"}, "the token in ~/.ray/auth_token is not the cluster's")])
def test_a_refused_token_is_named_from_the_error_or_from_rays_output(environ, sent):
    head = "--address h:1: the Ray cluster there requires a token (its token authentication is on) and refused this driver: "
    for error, output in ((_raised_from(AUTH_REFUSED_CAUSE), ""),  # the error Ray raises, after its retries
                          (ConnectionError("Failed to connect to Ray cluster at h:1"), AUTH_REFUSED_LINE + "\n")):  # its stderr
        line = connect_error("h:1", error, output, environ)
        assert isinstance(line, TokenRefused) and str(line).startswith(head + sent), str(line)
        assert "ray get-auth-token" in str(line)
    plain = connect_error("h:1", _raised_from("Failed to connect to GCS. Last connection error: timed out"), "", {})
    assert type(plain) is SearchError and "(Failed to connect to Ray cluster at 192.0.2.2:6412)" in str(plain)


HELD = """
import os, sys
sys.path.insert(0, {root!r})
from search.tune import _stderr_held
with _stderr_held() as held:
    os.write(2, b"from C\\n")
    print("from Python", file=sys.stderr)
    assert held.text() == "from C\\nfrom Python\\n", repr(held.text())
    held.drop = {drop}
os.write(2, b"after\\n")
"""


@pytest.mark.parametrize("drop", [False, True])
def test_what_a_join_writes_to_stderr_is_held_then_written_back_unless_dropped(drop):
    p = subprocess.run([sys.executable, "-c", HELD.format(root=str(ROOT), drop=drop)], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert p.stderr == ("after\n" if drop else "from C\nfrom Python\nafter\n"), p.stderr


@pytest.mark.parametrize("address", ["ray://head:10001", "RAY://10.0.0.5:10001", " ray://h:1"])
def test_a_ray_client_address_is_refused_naming_the_gcs_address_to_give(address):
    line = client_address_error(address)
    assert line is not None and str(line).startswith(f"--address {address}: a Ray Client address, which awnn cannot use")
    assert "host:6379" in str(line)
    assert str(client_address_error(address, from_env=True)).startswith(f"RAY_ADDRESS={address}: a Ray Client address")
    for other in ("head:6379", "auto", "10.0.0.5:6379", "[::1]:6379"):
        assert client_address_error(other) is None


class _Server:
    """A TCP server on 127.0.0.1 that answers each connection with `reply` (None: says nothing; b"": closes)."""

    def __init__(self, reply: bytes | None):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply, self.held = reply, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.reply is None:
                self.held.append(conn)  # accepted, never answered
            else:
                conn.recv(64)
                conn.sendall(self.reply)
                conn.close()

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


SETTINGS = b"\x00\x00\x18\x04\x00\x00\x00\x00\x00" + b"\x00" * 24  # a gRPC server's first frame, as a Ray 2.60 GCS sends it


@pytest.mark.parametrize("reply, says", [
    (b"HTTP/1.0 400 Bad request\r\n\r\n", "is an HTTP server (a web page or an API: the dashboard's port, 8265?), not a Ray GCS"),
    (b"<!DOCTYPE HTML>\n<html>", "is an HTTP server (a web page or an API: the dashboard's port, 8265?), not a Ray GCS"),
    (b"-ERR unknown command 'PRI'\r\n", "answers in another protocol than a Ray GCS's (gRPC)"),
    (b"", "closed the connection instead of answering as a Ray GCS"),
    (None, "accepts connections but did not answer as a Ray GCS within 1 s")])
def test_what_answers_at_the_address_and_is_no_ray_gcs_is_one_line_in_seconds(reply, says, monkeypatch):
    from search.tune import _check_reachable

    monkeypatch.delenv("RAY_USE_TLS", raising=False)
    server = _Server(reply)
    try:
        for address in (f"127.0.0.1:{server.port}", f"http://127.0.0.1:{server.port}"):
            with pytest.raises(SearchError) as e:
                _check_reachable(address, answer_timeout=1.0)
            assert str(e.value) == (f"--address {address}: cannot join the Ray cluster (what listens at 127.0.0.1:"
                                    f"{server.port} {says}: give the cluster head's GCS address (host:6379, as `ray start "
                                    "--head` prints it))")
    finally:
        server.close()


def test_a_grpc_server_passes_and_under_rays_tls_nothing_is_probed(monkeypatch):
    from search.tune import _check_reachable

    monkeypatch.delenv("RAY_USE_TLS", raising=False)
    grpc_like, silent = _Server(SETTINGS), _Server(None)
    try:
        _check_reachable(f"127.0.0.1:{grpc_like.port}", answer_timeout=5.0)
        monkeypatch.setenv("RAY_USE_TLS", "1")  # (a TLS GCS waits for the client's handshake: no answer to a preface)
        _check_reachable(f"127.0.0.1:{silent.port}", answer_timeout=1.0)
    finally:
        grpc_like.close()
        silent.close()
