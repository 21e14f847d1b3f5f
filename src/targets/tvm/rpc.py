"""``target.rpc``: the llvm and cuda targets timing on a device registered with a TVM RPC tracker.

Builds stay on this machine (in parallel, as for a local device); the runner worker holds a session
on one remote device while it times, checks outputs, calibrates and runs the whole model
(:mod:`tunebench.targets.tvm.remote`). What changes against a local device:

- **the device lock is the session** (:class:`SessionHold`): a tracker hands a server to one client
  at a time, so holding a session excludes every other client of that tracker from that device; the
  wait for a free device is counted like a wait for a local lock (``lock_wait_s``, not charged to
  the search clock). The session is taken for one batch (or one protocol step) and given back, so
  the runs sharing a pool of devices take turns, and successive batches of one run may land on
  different devices of the key (each measurement records which: ``device`` in its record).
- **the device is described by the remote**: its LLVM CPU name (``mcpu: native``) and CPU count
  (``num_cores: null``) are asked of its TVM, the GPU's name and limits of its CUDA device; every
  session's thread pool is set to the run's count, which needs a server started with at least that
  many (``TVM_NUM_THREADS``; TVM cannot grow a pool past its process's setting); a
  remote TVM built without LLVM or MetaSchedule cannot answer, and then ``target.mcpu`` /
  ``target.num_cores`` must be set. The remote CPU must share this machine's instruction set
  (the libraries are compiled and linked here): another one is refused.
- **no foreign-CPU signal**: the other processes of a remote machine cannot be seen from here; noise
  is judged on the spread of the repeats and on the calibration kernel timed on the device.
- **a device that disappears** fails the request running on it (an invalid measurement whose error
  names the device) and the next request gets another device of the key; when none comes free within
  ``target.rpc.wait_s`` the run stops with :class:`~tunebench.errors.DeviceUnavailable` (resumable).
"""

from __future__ import annotations

import logging
import threading
import time

from tunebench.config.load import plain
from tunebench.errors import DeviceUnavailable, UserError
from tunebench.targets.tvm.messages import AcquireInput, ReleaseInput
from tunebench.targets.tvm.settings import RpcSettings

log = logging.getLogger(__name__)
REMOTE_RETRIES = 2  # a protocol step whose remote device was lost is repeated on up to this many others


def rpc_settings(rpc: RpcSettings) -> dict | None:
    """``target.rpc`` as the mapping the worker processes are given, or None when the target measures
    on this machine (tracker and key null; :class:`~.settings.RpcSettings` checks the rest)."""
    return plain(rpc) if rpc.enabled else None


def probe_remote(rpc: dict, device_type: str, device_id: int, gpu: bool = False) -> dict:
    """What the remote device is (:func:`tunebench.targets.tvm.remote.probe`), every problem a UserError:
    an unreachable tracker, a key no server registered, no free device within ``wait_s``, no such
    device on the server, a CPU of another instruction set."""
    from tunebench.targets.tvm import remote

    where = f"target.rpc.tracker={rpc['tracker']}"
    try:
        registered = remote.servers_of(remote.summary(rpc["tracker"]), rpc["key"])
    except (OSError, RuntimeError) as exc:
        raise UserError(f"{where}: no TVM RPC tracker answers there ({exc})") from None
    if not registered:
        raise UserError(f"target.rpc.key={rpc['key']!r}: no RPC server registered with this key on tracker "
                        f"{rpc['tracker']} (python -m tvm.exec.rpc_server --tracker {rpc['tracker']} --key "
                        f"{rpc['key']})")
    try:
        info = remote.probe(rpc, device_type, device_id, gpu)
    except remote.NoDevice as exc:
        raise UserError(f"target.rpc: {exc}") from None
    except (OSError, RuntimeError) as exc:
        raise UserError(f"{where}: the {rpc['key']!r} device did not answer ({exc})") from None
    if not info["exists"]:
        raise UserError(f"target.device_id={device_id}: the {device_type} device {device_id} does not exist on the RPC "
                        f"server {info['server']} (key {rpc['key']})")
    _same_isa(info, rpc)
    return info


def _same_isa(info: dict, rpc: dict) -> None:
    from tvm.target import codegen

    here = codegen.llvm_get_system_triple()
    there = info.get("triple")
    if there and str(there).split("-")[0] != str(here).split("-")[0]:
        raise UserError(f"target.rpc.key={rpc['key']!r}: the device's CPU is {there}, this machine's {here}; "
                        "libraries are compiled and linked here, so the remote CPU must share this one's "
                        "instruction set")


class SessionHold:
    """The lock of a remote device: while held, the target's runner worker holds a tracker session.

    Re-entrant in this process, like :class:`~tunebench.targets.devicelock.DeviceLock`, with the same
    ``wait_s`` (seconds waited for a free device, left out of the search clock) and ``notice_s``
    (a wait longer than this is logged once the session is there).
    """

    def __init__(self, target, notice_s: float = 3.0):
        self.target = target
        self.notice_s = notice_s
        self.wait_s = 0.0
        self.server = ""
        self._depth = 0
        self._mutex = threading.RLock()

    def __enter__(self) -> SessionHold:
        self._mutex.acquire()
        try:
            if self._depth == 0:
                self._acquire()
        except BaseException:
            self._mutex.release()
            raise
        self._depth += 1
        return self

    def _acquire(self) -> None:
        spec = self.target.device_spec
        self.target.start()
        t0 = time.perf_counter()
        ok, res, _ = self.target.runner_call("acquire", AcquireInput(device=spec), float(spec[1]["wait_s"]) + 60.0)
        if not ok:
            raise DeviceUnavailable(f"target.rpc: {res}")
        self.wait_s += res.waited_s
        self.server = res.server
        if res.waited_s >= self.notice_s:
            log.warning("got the %s device %s after waiting %.1f s for it (not charged to the search clock)",
                        spec[1]["key"], self.server, time.perf_counter() - t0)

    def __exit__(self, *exc) -> None:
        try:
            self._depth -= 1
            if self._depth == 0 and self.target.runner_alive():
                self.target.runner_call("release", ReleaseInput(), 30.0)
        finally:
            self._mutex.release()
