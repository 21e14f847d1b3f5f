"""FPGA tasks: ``model=hls_gemm`` / ``hls_conv`` / ``hls_spmv`` give one :class:`Task` each."""

from __future__ import annotations

import hashlib
import json
import math

from tunebench.errors import UserError
from tunebench.targets.fpga.kernels import KERNELS, get_kernel
from tunebench.task import Task

FPGA_TARGETS = ("fpga_open", "table", "vivado")


def fpga_tasks(cfg_model: dict, target_kind: str) -> list[Task]:
    """The task of an FPGA model config (``kernel`` key); its space is the pruned directive space.

    ``Task.mod`` is the kernel spec dict, ``shape`` the loop trip counts, ``flops`` 2 x MACs."""
    kernel = cfg_model.get("kernel")
    if kernel not in KERNELS:
        raise UserError(f"model.kernel={kernel!r} is unknown; valid: {', '.join(KERNELS)}")
    if target_kind not in FPGA_TARGETS:
        raise UserError(f"model={cfg_model.get('name')} is an FPGA kernel; target must be one of "
                        f"{', '.join(FPGA_TARGETS)} (got {target_kind!r})")
    k = get_kernel(kernel)
    shape = {lp: k.loops[lp]["trip"] for lp in k.loop_order}
    key = json.dumps({"spec": k.spec, "target": "fpga"}, sort_keys=True)
    tid = hashlib.sha256(key.encode()).hexdigest()[:16]
    t = Task(id=tid, name=kernel, kind=k.kind, mod=k.spec, shape=shape, flops=2 * math.prod(shape.values()),
             weight=1, target_kind=target_kind)
    t.space = k.space
    return [t]


def is_fpga_model(cfg_model: dict) -> bool:
    return "kernel" in cfg_model
