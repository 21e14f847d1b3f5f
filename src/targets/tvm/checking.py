"""The output check of the TVM targets: a candidate run once on fixed inputs against the unscheduled task.

The reference is the unscheduled PrimFunc compiled for the host CPU (or PyTorch, for a single operator of
``model=ops``); the comparison runs on the target's runner worker while the device lock is held
(:func:`tunebench.targets.tvm.worker.handle`, request ``"check"``).
"""

from __future__ import annotations

import logging
import os

from tunebench.safe_files import private_dir, user_dir
from tunebench.space import Config, TraceConfig
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

