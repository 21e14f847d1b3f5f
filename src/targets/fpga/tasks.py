"""FPGA tasks: ``model=hls_gemm`` / ``hls_conv`` / ``hls_spmv`` give one :class:`Task` each."""

from __future__ import annotations

import hashlib
import json
import math

from tunebench.errors import UserError
from tunebench.targets.fpga.kernels import KERNELS, get_kernel
from tunebench.task import Task


def fpga_tasks(model, target_kind: str) -> list[Task]:
    """The task of an FPGA kernel model (:class:`~tunebench.datasets.models.KernelModel`); its space is
    the kernel's pruned directive space.

    ``Task.mod`` is the kernel spec dict, ``shape`` the loop trip counts, ``flops`` 2 x MACs."""
    if model.kernel not in KERNELS:
        raise UserError(f"model.kernel={model.kernel!r} is unknown; valid: {', '.join(KERNELS)}")
    k = get_kernel(model.kernel)
    shape = {lp: k.loops[lp]["trip"] for lp in k.loop_order}
    key = json.dumps({"spec": k.spec, "target": "fpga"}, sort_keys=True)
    tid = hashlib.sha256(key.encode()).hexdigest()[:16]
    t = Task(id=tid, name=model.kernel, kind=k.kind, mod=k.spec, shape=shape, flops=2 * math.prod(shape.values()),
             weight=1, target_kind=target_kind)
    t.space = k.space
    return [t]
