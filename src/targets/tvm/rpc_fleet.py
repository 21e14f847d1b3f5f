"""A TVM RPC tracker and RPC servers on this machine: ``python -m tunebench rpc``.

For trying ``target.rpc`` without a board, for the tests and for the RPC benchmark: one tracker
(``python -m tvm.exec.rpc_tracker``) and ``n`` servers registered under one key
(``python -m tvm.exec.rpc_server``), all on ``127.0.0.1`` by default, each in its own process
group, stopped by pid. A real fleet runs the same two TVM commands on its machines (docs/USAGE.md
§Scale out).

Servers on one machine share its CPU: runs that use two of them at once measure each other. One run
is fine (it holds one session at a time).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

from tunebench.errors import UserError


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` (now)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


class LocalFleet:
    """A tracker and ``n_servers`` RPC servers of ``key`` on ``host``; a context manager. Each server
    runs up to ``threads`` TVM threads (default: this machine's logical CPUs, like a local run).

    Attributes: ``tracker`` ("host:port"), ``servers`` ("host:port" per server), ``procs``
    (tracker first, then the servers; :class:`subprocess.Popen`).
    """

    def __init__(self, n_servers: int = 2, key: str = "cpu", host: str = "127.0.0.1", port: int | None = None,
                 log_dir: str | None = None, threads: int | None = None):
        if n_servers < 1:
            raise UserError(f"--servers={n_servers}: must be a positive integer")
        self.n_servers, self.key, self.host = n_servers, key, host
        self.port = port or free_port(host)
        self.tracker = f"{host}:{self.port}"
        self.log_dir = log_dir
        self.threads = threads or os.cpu_count() or 1  # TVM_NUM_THREADS of the servers (TVM's default: half on x86)
        self.servers: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self.killed: list[subprocess.Popen] = []  # stopped on purpose (kill)

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        out = open(os.path.join(self.log_dir, f"{name}.log"), "w") if self.log_dir else subprocess.DEVNULL
        env = {**os.environ, "TVM_NUM_THREADS": str(self.threads)}  # a server's largest thread pool
        try:
            return subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        finally:
            if out is not subprocess.DEVNULL:
                out.close()

    def start(self, timeout_s: float = 120.0) -> LocalFleet:
        """Start the tracker and the servers; return once every server has registered."""
        with socket.socket() as s:
            try:
                s.bind((self.host, self.port))
            except OSError as exc:
                raise UserError(f"--host {self.host} --port {self.port}: cannot listen there ({exc.strerror})") from None
        self.procs.append(self._spawn(["tvm.exec.rpc_tracker", "--host", self.host, "--port", str(self.port),
                                       "--port-end", str(self.port + 1), "--silent"], "tracker"))
        self._wait(lambda info: True, timeout_s, "the tracker")
        self.add_servers(self.n_servers, timeout_s)
        return self

    def add_servers(self, n: int = 1, timeout_s: float = 120.0) -> list[str]:
        """Start ``n`` more servers of the key (together); returns their ``host:port`` once all registered."""
        from tunebench.targets.tvm.remote import servers_of

        new = []
        for _ in range(n):
            port = free_port(self.host)
            self.procs.append(self._spawn(["tvm.exec.rpc_server", "--host", self.host, "--port", str(port),
                                           "--port-end", str(port + 1), "--tracker", self.tracker, "--key",
                                           self.key, "--silent"], f"server{len(self.servers)}"))
            self.servers.append(f"{self.host}:{port}")
            new.append(self.servers[-1])
        self._wait(lambda info: set(new) <= set(servers_of(info, self.key)), timeout_s, f"servers {', '.join(new)}")
        return new

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        from tunebench.targets.tvm.remote import summary

        deadline = time.monotonic() + timeout_s
        while True:
            dead = [p.args[2] for p in self.procs if p.poll() is not None and p not in self.killed]
            if dead:
                raise RuntimeError(f"{dead[0]} exited while starting {what}")
            try:
                if ready(summary(self.tracker)):
                    return
            except (OSError, RuntimeError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not come up within {timeout_s:g} s")
            time.sleep(0.2)

    def server_proc(self, server: str) -> subprocess.Popen:
        return self.procs[1 + self.servers.index(server)]

    def busy(self) -> list[str]:
        """The servers serving a session now: TVM's server listens in a child process and serves each
        session in a child of that one."""
        def serving(proc) -> bool:
            return proc.poll() is None and any(_children(child) for child in _children(proc.pid))
        return [s for s in self.servers if serving(self.server_proc(s))]

    def kill(self, server: str) -> None:
        """Kill one server and its session (SIGKILL to its process group): a device that disappears."""
        proc = self.server_proc(server)
        self.killed.append(proc)
        _kill_group(proc)

    def stop(self) -> None:
        """Stop every process started here (servers first), by pid and process group."""
        for proc in reversed(self.procs):
            _kill_group(proc)
        self.procs.clear()

    def __enter__(self) -> LocalFleet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own group (start_new_session): server and session children
        except ProcessLookupError:
            pass
    proc.wait(timeout=30)


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--servers", type=int, default=2, help="RPC servers to start (default 2)")
    parser.add_argument("--key", default="cpu", help="the device key they register with (default cpu)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=9190, help="tracker port (default 9190, TVM's)")
    parser.add_argument("--threads", type=int, default=None,
                        help="TVM_NUM_THREADS of every server (default: this machine's logical CPUs)")


def cmd_fleet(args: argparse.Namespace) -> None:
    """Start the fleet, print the overrides that use it, wait for Ctrl-C, stop it."""
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads={args.threads}: must be a positive integer")
    with LocalFleet(args.servers, args.key, args.host, args.port, threads=args.threads) as fleet:
        print(f"tracker {fleet.tracker}: {len(fleet.servers)} server(s) of key {fleet.key!r} "
              f"({', '.join(fleet.servers)}); Ctrl-C stops them", flush=True)
        print(f"use: python run.py target.rpc.tracker={fleet.tracker} target.rpc.key={fleet.key}", flush=True)
        try:
            while all(p.poll() is None for p in fleet.procs):
                time.sleep(1.0)
        except KeyboardInterrupt:
            pass
