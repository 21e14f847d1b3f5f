"""``python -m tunebench server start|stop`` (``make server``): an MLflow tracking server whose store
is PostgreSQL, for runs of several workers or machines (``tracking.uri=http://host:port``).

``start`` runs in the foreground: it starts PostgreSQL (``pgserver``'s pip-installed server on a unix
socket under ``<data>/pgdata``, or an existing one named by ``--postgres-uri``, e.g. the system
package's), creates the database ``mlflow`` if missing, starts ``mlflow server`` bound to ``--host``
(127.0.0.1 by default) with artifacts under ``<data>/artifacts``, writes both pids to
``<data>/server.json``, prints the ``tracking.uri=...`` to pass to ``run.py`` and serves until
Ctrl-C or SIGTERM, then stops what it started. ``stop`` (another shell) stops them by the pids in
``server.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

from tunebench.errors import UserError
from tunebench.harness.tracking.tracker import check_reachable
from tunebench.safe_files import atomic_write_bytes

STATE = "server.json"


def add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--data", default="tracking", help="folder of pgdata/, artifacts/, server.json (default ./tracking)")
    parser.add_argument("--host", default="127.0.0.1", help="address the MLflow server binds (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="its port (default 5000)")
    parser.add_argument("--postgres-uri", default=None,
                        help="an existing PostgreSQL server's database URI (postgresql://user:pw@host/db) "
                             "instead of starting pgserver")
    parser.add_argument("--workers", type=int, default=2, help="MLflow server worker processes (default 2)")


def cmd_server(args: argparse.Namespace) -> None:
    data = os.path.abspath(args.data)
    if args.action == "stop":
        stop(data)
        return
    _check_port(args.host, args.port)
    if args.workers < 1:
        raise UserError(f"--workers={args.workers}: must be >= 1")
    os.makedirs(data, exist_ok=True)
    postgres_pid, store = _postgres(data, args.postgres_uri)
    mlflow = _mlflow(data, store, args.host, args.port, args.workers)
    atomic_write_bytes(os.path.join(data, STATE), json.dumps(
        {"mlflow_pid": mlflow.pid, "postgres_pid": postgres_pid, "uri": f"http://{args.host}:{args.port}"}).encode())
    try:
        _wait_healthy(mlflow, args.host, args.port)
        print(f"tracking.uri=http://{args.host}:{args.port}   (stop: Ctrl-C, or python -m tunebench server stop "
              f"--data {args.data})", flush=True)
        signal.signal(signal.SIGTERM, _interrupt)
        mlflow.wait()
    except KeyboardInterrupt:
        pass
    finally:
        stop(data, missing_ok=True)  # (a `stop` from another shell may have done it already)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _check_port(host: str, port: int) -> None:
    if not 0 < port < 65536:
        raise UserError(f"--port={port}: must be in 1..65535")
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UserError(f"--host={host} --port={port}: cannot listen there ({exc.strerror or exc})") from None


def _postgres(data: str, uri: str | None) -> tuple[int | None, str]:
    """(pid of the PostgreSQL server started here or None, SQLAlchemy URI of the database ``mlflow``)."""
    if uri is not None:
        if not uri.startswith(("postgresql://", "postgresql+psycopg://", "postgresql+psycopg2://")):
            raise UserError(f"--postgres-uri={uri!r}: must be a postgresql:// URI")
        _connect(uri)
        return None, uri
    try:
        import pgserver
    except ImportError:
        raise UserError("pgserver is not installed (a pip-only PostgreSQL): pip install -e '.[scale]', or pass "
                        "--postgres-uri of a PostgreSQL server you run") from None
    server = pgserver.get_server(os.path.join(data, "pgdata"), cleanup_mode=None)
    with _connect(server.get_uri("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'mlflow'").fetchone():
            conn.execute("CREATE DATABASE mlflow")
    return server.get_pid(), server.get_uri("mlflow").replace("postgresql://", "postgresql+psycopg://", 1)


def _connect(uri: str, autocommit: bool = False):
    import psycopg

    try:
        return psycopg.connect(uri.replace("+psycopg2", "").replace("+psycopg", ""), autocommit=autocommit,
                               connect_timeout=10)
    except psycopg.Error as exc:
        raise UserError(f"--postgres-uri: cannot connect ({str(exc).strip().splitlines()[0]})") from None


def _mlflow(data: str, store: str, host: str, port: int, workers: int) -> subprocess.Popen:
    log = open(os.path.join(data, "mlflow_server.log"), "ab")
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", store, "--artifacts-destination",
           os.path.join(data, "artifacts"), "--host", host, "--port", str(port), "--workers", str(workers)]
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_healthy(proc: subprocess.Popen, host: str, port: int, timeout_s: float = 180.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise UserError(f"mlflow server exited with code {proc.returncode}; see its log (mlflow_server.log)")
        try:
            check_reachable(f"http://{host}:{port}", timeout_s=2)
            return
        except UserError:
            time.sleep(0.5)
    raise UserError(f"mlflow server not answering on {host}:{port} after {timeout_s:.0f} s")


def stop(data: str, missing_ok: bool = False) -> None:
    """Stop the MLflow server (its process group) and the PostgreSQL server started by ``start``."""
    path = os.path.join(data, STATE)
    try:
        with open(path) as fh:
            state = json.load(fh)
        os.remove(path)
    except (OSError, ValueError):
        if missing_ok:
            return
        raise UserError(f"{path}: no running server recorded there") from None
    _kill(state.get("mlflow_pid"), signal.SIGTERM, group=True)
    _kill(state.get("postgres_pid"), signal.SIGINT)  # PostgreSQL's fast shutdown


def _kill(pid: int | None, sig: int, group: bool = False, timeout_s: float = 30.0) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, sig) if group else os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)
