"""The output check of the TVM targets: a candidate run once on fixed inputs against the unscheduled task.

The reference is the unscheduled PrimFunc compiled for the host CPU (or PyTorch, for a single operator of
``model=ops``); the comparison runs on the target's runner worker while the device lock is held
(:func:`tunebench.targets.tvm.worker.handle`, request ``"check"``). The worker keeps computed references in
files (:func:`save_reference`, :func:`load_reference`).
"""

from __future__ import annotations

import logging
import os

import numpy as np

from tunebench.safe_files import private_dir, user_dir
from tunebench.search_space import Config, TraceConfig
from tunebench.targets.tvm.messages import CheckInput
from tunebench.targets.tvm.scheduling import trace_of
from tunebench.task import Task

log = logging.getLogger(__name__)


def reference_cache_dir(setting) -> str | None:
    """The folder of cached reference outputs for ``target.check.reference_cache``: ``default`` =
    this user's ``user_dir("references")``, a path (must be private to this user), null = none."""
    if setting == "default":
        return user_dir("references")
    return private_dir(str(setting)) if setting else None


class OutputCheck:
    """Mixin of :class:`~tunebench.targets.tvm.target.TVMTarget` (uses its runner, lock, settings and
    reference cache)."""

    def check(self, task: Task, config: Config | TraceConfig) -> tuple[bool | None, str]:
        """Run ``config`` once and compare its output with the unscheduled task on the host CPU.

        Returns ``(ok, detail)``: ``ok`` True (output matches), False (wrong output) or None (the
        check could not be performed: a worker error, crash or timeout, a reference that could not be
        computed); ``detail`` gives the error (relative to the reference's largest magnitude) or the
        reason. A cached reference that was discarded (failed its hash) is logged as a warning.
        """
        import tvm

        self.start()
        tol = float(self.settings.check.tolerance)
        request = CheckInput(task=self._task_spec(task), index=config.index, trace=trace_of(config),
                             target=self.tvm_target, device=self.device_spec, ref_cache_dir=self.ref_cache_dir,
                             op_reference=_op_reference(task),
                             ref_target={"kind": "llvm", "num-cores": os.cpu_count() or 1,
                                         "mcpu": tvm.target.codegen.llvm_get_system_cpu()})
        with self.lock:
            ok, res, wall = self.runner_call("check", request, float(self.settings.check.timeout_s))
        self._stats["check_s"] += wall
        if not ok:
            return None, f"check not performed: {res}"
        if res.reference_note:
            log.warning("task %s: %s", task.name, res.reference_note)
        detail = f"max abs err {res.max_abs_err:.3g} (relative {res.rel_err:.3g}, tolerance {tol:g})"
        return res.rel_err <= tol, detail


def _op_reference(task: Task) -> dict | None:
    """A single operator of ``model=ops`` is checked against PyTorch: ``{"op", "shape"}``; else None
    (the unscheduled task, compiled for the host CPU, is the reference)."""
    from tunebench.datasets.operators import task_operator

    op = task_operator(task.shape)
    return {"op": op[0], "shape": op[1]} if op else None


def save_reference(path: str, ref: np.ndarray) -> None:
    """Write ``ref`` atomically with the sha256 of its dtype, shape and bytes."""
    from tunebench.safe_files import write_hashed

    ref = np.ascontiguousarray(ref)
    write_hashed(path, {"dtype": ref.dtype.str, "shape": list(ref.shape)}, ref.tobytes())


def load_reference(path: str, shape: tuple, dtype: str) -> tuple[np.ndarray | None, str | None]:
    """``(array, None)`` from a file of :func:`save_reference` whose hash, dtype and shape hold;
    ``(None, None)`` when there is none; ``(None, why)`` when the file there must not be used."""
    from tunebench.safe_files import IntegrityError, read_hashed

    try:
        meta, payload = read_hashed(path)
    except FileNotFoundError:
        return None, None
    except IntegrityError as exc:
        why = str(exc).removeprefix(f"{path}: ")
        return None, f"reference {path} discarded, corrupt or tampered with ({why}); computed again"
    except OSError as exc:
        return None, f"reference {path} unreadable ({exc.strerror or exc}); computed again"
    want = np.dtype(dtype)
    fits = (meta.get("dtype") == want.str and meta.get("shape") == list(shape)
            and len(payload) == want.itemsize * int(np.prod(shape)))
    if not fits:
        return None, (f"reference {path} discarded: dtype/shape {meta.get('dtype')}/{meta.get('shape')}, "
                      f"expected {want.str}/{list(shape)}; computed again")
    return np.frombuffer(payload, dtype=want).reshape(shape).copy(), None
