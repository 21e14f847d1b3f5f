"""``target=cuda``: a CUDA GPU (or one behind ``target.rpc``) through TVM's CUDA backend."""

from __future__ import annotations

import platform

from tunebench.errors import UserError
from tunebench.space import TraceConfig
from tunebench.targets.tvm.settings import CUDASettings
from tunebench.targets.tvm.target import TVMTarget
from tunebench.targets.tvm.variants import VARIANTS


class CUDATarget(TVMTarget):
    """``target=cuda``: a CUDA GPU (or one behind ``target.rpc``); configs that break the GPU's limits
    are rejected before they are built; PyTorch baselines run on the GPU with TF32 off."""

    kind = "cuda"
    Settings = CUDASettings
    templates = VARIANTS["cuda"]
    device_type = "cuda"
    gpu = True
    torch_device = "cuda"
    tf32_baseline = True

    def run_tags(self) -> dict[str, str]:
        return {"precision": "float32 (TF32 off)", "threads": "GPU"}

    def threads_label(self) -> str:
        return "GPU"

    def static_check(self, task, template, config) -> str | None:
        """The GPU's limits (threads per block, shared memory, ...) from a template's knobs alone; a
        MetaSchedule trace is checked when it is built."""
        return None if isinstance(config, TraceConfig) else template.check(task.mod, config, self.limits)

    def _probe_local(self) -> None:
        import tvm

        dev = tvm.cuda(self.device_id)
        if not dev.exist:
            raise UserError(f"target=cuda: no CUDA GPU found (tvm.cuda({self.device_id}).exist is False); "
                            "use target=llvm on this machine")
        self._set_gpu({"name": dev.device_name, "compute_version": dev.compute_version,
                       "max_threads_per_block": dev.max_threads_per_block,
                       "max_shared_memory_per_block": dev.max_shared_memory_per_block,
                       "warp_size": dev.warp_size, "max_thread_dimensions": list(dev.max_thread_dimensions)},
                      platform.node())
        self.device_spec = [self.device_type, self.device_id]
        self.device_key = f"cuda{self.device_id}-{platform.node()}"

    def _remote_device(self, info: dict, where: dict) -> None:
        self._set_gpu(info, info["server"])
        self.device.update(where)

    def _set_gpu(self, gpu: dict, host: str) -> None:
        """TVM target, schedule limits and description of a CUDA GPU (``gpu``: its properties)."""
        major, minor = str(gpu["compute_version"]).split(".")
        self.tvm_target = {"kind": "cuda", "arch": f"sm_{major}{minor}",
                           "max_threads_per_block": gpu["max_threads_per_block"],
                           "max_shared_memory_per_block": gpu["max_shared_memory_per_block"],
                           "thread_warp_size": gpu["warp_size"]}
        dims = gpu["max_thread_dimensions"]
        self.limits = {"max_threads_per_block": gpu["max_threads_per_block"],
                       "max_shared_memory_per_block": gpu["max_shared_memory_per_block"],
                       "max_thread_x": dims[0], "max_thread_y": dims[1], "max_thread_z": dims[2],
                       "max_vthread": int(self.settings.max_vthread)}
        self.device = {"kind": "cuda", "name": gpu["name"], "compute_version": gpu["compute_version"],
                       "host": host, **self.limits}
