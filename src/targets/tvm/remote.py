"""Devices reached through a TVM RPC tracker (``target.rpc``): sessions, libraries, lost devices.

A TVM RPC *tracker* (``python -m tvm.exec.rpc_tracker``) keeps a queue of RPC servers, each
registered under a *key* that names a kind of device (``python -m tvm.exec.rpc_server --tracker
host:port --key name``). A client asks the tracker for a server of a key and gets one that no other
client holds: a session on a server is exclusive, so holding a session is what holding a local
device's lock is. The tracker hands servers out first come, first served, and a server goes back to
the end of the queue when its session ends, so successive sessions visit the servers of a key in
turn.

This module is what a worker process (the target's runner, a whole-model row) uses to time on such
a device: :class:`RemoteDevice` requests a session, with a time limit on the wait (TVM's own client
waits forever), sets the server's thread pool to the run's thread count, uploads and loads
libraries, and turns a broken connection into :class:`DeviceLost`; :func:`summary` and
:func:`probe` ask the tracker and a device what they have. :class:`DeviceResult` is the base of the
workers' answers to requests that run on a device (which remote one, how long its session took).

Nothing here runs in the harness process except :func:`probe`, :func:`summary` and
:func:`parse_address`: sessions live in worker processes, so a device that hangs or disappears
costs at most a worker.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import tempfile
import time
from dataclasses import dataclass

CONNECT_TIMEOUT_S = 10.0  # connecting to the tracker or a server


class NoDevice(RuntimeError):
    """No server of the key became free within the wait limit (message names tracker, key, servers)."""


class DeviceLost(RuntimeError):
    """The session's server stopped answering (it died, or the network went); the session is gone."""


@dataclass(frozen=True, kw_only=True)
class DeviceResult:
    """Base of a worker's answer to a request that ran on a device: on a remote device, the worker
    fills in which one and how long the request waited for its session."""

    server: str | None = None  # the remote device that ran the request; None on a local device
    session_wait_s: float | None = None  # seconds the request waited for a session (not the method's); None locally


class DeviceUnfit(RuntimeError):
    """The server cannot run the run's kernels as configured (fewer threads than the run's count)."""


def threads_hint(server: str, key: str, have: int, want: int) -> str:
    """Why a server's thread pool is too small, and the fix."""
    return (f"the RPC server {server} (key {key}) runs at most {have} TVM thread(s), the run needs {want}: start it "
            f"with TVM_NUM_THREADS={want} (TVM's default is half the logical CPUs on x86), or set target.num_cores")


def parse_address(text) -> tuple[str, int]:
    """``"host:port"`` as ``(host, port)``; ValueError naming what is wrong."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not host:port")
    return host, int(port)


def _tracker_socket(host: str, port: int) -> socket.socket:
    """A connection to the tracker after its handshake; OSError/RuntimeError when there is none."""
    from tvm.rpc import base

    sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
    try:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        if magic != base.RPC_TRACKER_MAGIC:
            raise RuntimeError(f"{host}:{port} is not a TVM RPC tracker")
    except BaseException:
        sock.close()
        raise
    return sock


def summary(tracker: str) -> dict:
    """The tracker's summary: ``{"queue_info": {key: {"free", "pending"}}, "server_info": [...]}``.
    Raises OSError/RuntimeError when the tracker cannot be reached."""
    from tvm.rpc import base

    sock = _tracker_socket(*parse_address(tracker))
    try:
        base.sendjson(sock, [base.TrackerCode.SUMMARY])
        value = base.recvjson(sock)
    finally:
        sock.close()
    if value[0] != base.TrackerCode.SUCCESS:
        raise RuntimeError(f"tracker {tracker} answered {value!r}")
    return value[1]


def servers_of(info: dict, key: str) -> list[str]:
    """``host:port`` of every server registered under ``key`` in a :func:`summary` (free or busy)."""
    return sorted(f"{s['addr'][0]}:{s['addr'][1]}" for s in info.get("server_info", [])
                  if s.get("key") == f"server:{key}")


def request(tracker: str, key: str, priority: int, wait_s: float):
    """A session on a free server of ``key``: ``(tvm.rpc.RPCSession, "host:port", seconds waited)``.

    Raises :class:`NoDevice` after ``wait_s`` seconds without one (the pending request is dropped:
    the tracker skips a request whose client has gone), OSError when the tracker is unreachable."""
    from tvm import rpc
    from tvm.rpc import base

    t0 = time.perf_counter()
    sock = _tracker_socket(*parse_address(tracker))
    try:
        base.sendjson(sock, [base.TrackerCode.REQUEST, key, "", int(priority)])
        sock.settimeout(max(wait_s, 0.001))
        try:
            value = base.recvjson(sock)
        except TimeoutError:
            raise NoDevice(_no_device_text(tracker, key, wait_s)) from None
    finally:
        sock.close()
    if value[0] != base.TrackerCode.SUCCESS:
        raise RuntimeError(f"tracker {tracker} answered {value!r} to a request for {key!r}")
    url, port, matchkey = value[1]
    session = rpc.connect(url, port, matchkey)
    return session, f"{url}:{port}", time.perf_counter() - t0


def _no_device_text(tracker: str, key: str, wait_s: float) -> str:
    try:
        registered = servers_of(summary(tracker), key)
    except (OSError, RuntimeError) as exc:
        return f"tracker {tracker} stopped answering while waiting for a {key!r} device ({exc})"
    held = f"{len(registered)} registered, all held by other clients: {', '.join(registered)}" if registered \
        else "none registered"
    return f"no {key!r} device free on tracker {tracker} within {wait_s:g} s ({held})"


def driver_version(dev) -> str | None:
    """The CUDA driver version a TVM device reports (e.g. ``"12080"``: CUDA 12.8), or None where it reports none."""
    try:
        version = dev.driver_version
    except Exception:
        return None
    return None if version in (None, "", -1) else str(version)


def probe(rpc: dict, device_type: str, device_id: int, gpu: bool = False) -> dict:
    """What the device ``device_type`` (a TVM device type: ``cpu``, ``cuda``, ...) of ``rpc`` (tracker,
    key, priority, wait_s) is, from one short session: ``server``, ``exists``, ``cpu`` and ``triple``
    (its LLVM CPU name and target triple, when its TVM has LLVM), ``max_threads`` (its TVM thread
    pool's size), ``cpu_count`` (when its TVM has MetaSchedule) and, for a ``gpu``, ``name``,
    ``compute_version`` and the limits a schedule must respect."""
    session, server, _ = request(rpc["tracker"], rpc["key"], int(rpc["priority"]), float(rpc["wait_s"]))
    try:
        out: dict = {"server": server}
        dev = session.device(device_type, device_id)
        out["exists"] = bool(dev.exist)
        if gpu:
            if out["exists"]:
                out.update(name=dev.device_name, compute_version=dev.compute_version,
                           driver_version=driver_version(dev),
                           max_threads_per_block=dev.max_threads_per_block,
                           max_shared_memory_per_block=dev.max_shared_memory_per_block,
                           warp_size=dev.warp_size, max_thread_dimensions=list(dev.max_thread_dimensions))
        out["max_threads"] = int(session.get_function("runtime.NumThreads")())  # its pool as started
        out["cpu"] = _optional_call(session, "target.llvm_get_system_cpu")
        out["triple"] = _optional_call(session, "target.llvm_get_system_triple")
        count = _optional_call(session, "s_tir.meta_schedule.cpu_count", True)
        out["cpu_count"] = int(count) if count is not None else None
        return out
    finally:
        del session


def _optional_call(session, name: str, *args):
    """``name(*args)`` on the remote, or None when its TVM does not register ``name``."""
    try:
        return session.get_function(name)(*args)
    except Exception:
        return None


def _set_threads(session, server: str, spec: dict) -> None:
    """The session's thread pool to the run's thread count, as ``TVM_NUM_THREADS`` does locally (kBig
    affinity mode, TVM's default). TVM can lower a pool's size this way but not raise it past the
    server's own maximum (``TVM_NUM_THREADS`` of its process): a server below the count is unfit."""
    want = int(spec["threads"])
    try:
        session.get_function("runtime.config_threadpool")(1, want)
        have = int(session.get_function("runtime.NumThreads")())
    except Exception as exc:
        raise DeviceLost(f"remote device {server} (key {spec['key']}) lost while setting its threads: {exc}") from None
    if have != want:
        raise DeviceUnfit(threads_hint(server, spec["key"], have, want))


def is_remote(spec) -> bool:
    """A device spec of a remote device: ``["rpc", {...}]`` (local ones are ``["cpu", i]``/``["cuda", i]``)."""
    return bool(spec) and spec[0] == "rpc"


def remote_spec(rpc: dict, device_type: str, device_id: int, threads: int, set_threads: bool) -> list:
    """The device spec the target sends with its requests for a remote device (``rpc``: tracker, key,
    priority, wait_s, :func:`tunebench.targets.tvm.rpc.rpc_settings`; ``device_type``: TVM's, ``cpu``,
    ``cuda``, ...; ``set_threads``: the session's thread pool is set to ``threads``, for a CPU)."""
    return ["rpc", {"tracker": str(rpc["tracker"]), "key": str(rpc["key"]), "priority": int(rpc["priority"]),
                    "wait_s": float(rpc["wait_s"]), "device": device_type, "index": int(device_id),
                    "threads": int(threads), "set_threads": bool(set_threads)}]


class RemoteDevice:
    """The session of this worker process on a remote device (one at a time).

    :meth:`acquire` requests a session for a spec (:func:`remote_spec`) unless one for it is held;
    :meth:`release` ends it. ``generation`` counts sessions, so that caches of remote objects (input
    tensors, loaded libraries) can tell a new session from the one they were made in.
    """

    def __init__(self):
        self.session = None
        self.server = ""
        self.spec_key = ""
        self.generation = 0
        self._uploads = 0

    def acquire(self, spec: dict) -> float:
        """Hold a session for ``spec``; returns the seconds waited for it (0 when already held)."""
        key = json.dumps(spec, sort_keys=True)
        if self.session is not None and key == self.spec_key:
            return 0.0
        self.release()
        session, server, waited = request(spec["tracker"], spec["key"], spec["priority"], spec["wait_s"])
        if spec["set_threads"]:
            _set_threads(session, server, spec)
        self.session, self.server, self.spec_key = session, server, key
        self.generation += 1
        return waited

    def release(self) -> None:
        """End the held session: the connection closes with its last reference (remote modules and
        tensors refer to it, some through reference cycles: collected now, or the server would stay
        held until the next collection), and the server goes back to the tracker's queue."""
        import gc

        held, self.session = self.session, None
        self.server = ""
        self.spec_key = ""
        if held is not None:
            del held
            gc.collect()

    def device(self, spec: dict):
        """The held session's device of ``spec`` (``device``, ``index``)."""
        self.acquire(spec)
        return self.session.device(spec["device"], spec["index"])

    def load(self, path: str):
        """The library at the local ``path``, uploaded and loaded on the device; the remote copy is
        deleted once loaded (the loaded library stays)."""
        name = f"tunebench-{os.getpid()}-{self._uploads}{os.path.splitext(path)[1] or '.so'}"
        self._uploads += 1
        self.session.upload(path, name)
        mod = self.session.load_module(name)
        self.session.get_function("tvm.rpc.server.remove")(name)
        return mod

    def load_built(self, lib):
        """A library compiled in this process (``tvm.compile``'s result), exported and loaded remotely."""
        with tempfile.TemporaryDirectory(prefix="tunebench-rpc-") as tmp:
            path = os.path.join(tmp, "lib.so")
            lib.export_library(path)
            return self.load(path)

    def alive(self) -> bool:
        """Whether the held session still answers."""
        if self.session is None:
            return False
        try:
            self.session.get_function("runtime.NumThreads")()
            return True
        except Exception:
            return False

    def lost(self, exc: BaseException) -> BaseException:
        """The error to raise for ``exc`` raised by a remote call: :class:`DeviceLost` (and the
        session dropped) when the session no longer answers, else ``exc`` itself."""
        if self.session is None or self.alive():
            return exc
        server, key = self.server, json.loads(self.spec_key).get("key")
        self.release()
        text = str(exc).strip().splitlines()
        return DeviceLost(f"remote device {server} (key {key}) lost: {text[0] if text else type(exc).__name__}")


SESSION = RemoteDevice()  # this worker process's session


def device_of(spec):
    """The TVM device of a spec: ``tvm.cpu(i)`` / ``tvm.cuda(i)``, or the remote one of this process's session."""
    import tvm

    if is_remote(spec):
        return SESSION.device(spec[1])
    device_type, idx = spec
    return tvm.device(device_type, int(idx))


def load_library(path: str, spec):
    """The exported library at ``path`` loaded for the device of ``spec`` (uploaded when remote)."""
    import tvm

    if is_remote(spec):  # the session was taken with the device (device_of)
        return SESSION.load(path)
    return tvm.runtime.load_module(path)


def on_device(lib, spec):
    """A library compiled in this process, usable on the device of ``spec`` (exported and uploaded when remote)."""
    if is_remote(spec):  # the session was taken with the device (device_of)
        return SESSION.load_built(lib)
    return lib
