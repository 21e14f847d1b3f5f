"""``target=cuda``: a CUDA GPU (or one behind ``target.rpc``) through TVM's CUDA backend."""

from __future__ import annotations

import platform

from tunebench.errors import UserError
from tunebench.search_space import TraceConfig
from tunebench.targets.tvm.gpu_limits import compute_capability, device_limits, tag_attrs, tag_limits, tightest
from tunebench.targets.tvm.offline import OfflineTasks
from tunebench.targets.tvm.remote import driver_version
from tunebench.targets.tvm.settings import CUDASettings
from tunebench.targets.tvm.target import TVMTarget
from tunebench.targets.tvm.variants import VARIANTS


class CUDATarget(OfflineTasks, TVMTarget):
    """``target=cuda``: a CUDA GPU (or one behind ``target.rpc``); configs that break the GPU's limits
    (the device's, and those of ``target.tag`` where it is set) are rejected before they are built
    (:meth:`static_check`); PyTorch baselines run on the GPU with TF32 off. Besides the TVM targets'
    capabilities it describes the GPUs TVM knows by a tag (:class:`~tunebench.targets.capabilities.DescribesGPUs`)
    and extracts tasks offline (:class:`~tunebench.targets.capabilities.ExtractsTasks`)."""

    kind = "cuda"
    Settings = CUDASettings
    templates = VARIANTS["cuda"]
    device_type = "cuda"
    gpu = True
    torch_device = "cuda"
    tf32_baseline = True
    gpu_tag_attrs = staticmethod(tag_attrs)
    gpu_tag_limits = staticmethod(tag_limits)
    compute_capability = staticmethod(compute_capability)

    def run_tags(self) -> dict[str, str]:
        return {"precision": "float32 (TF32 off)", "threads": "GPU"}

    def threads_label(self) -> str:
        return "GPU"

    def static_check(self, task, config) -> str | None:
        """The GPU's limits (threads per block, each thread dimension, virtual threads, shared memory per
        block: :attr:`limits`) from the template's knobs, and from the lowered kernel where the knobs do not
        tell (``target.template=flex``); a MetaSchedule trace is checked when it is built. A config's verdict is
        computed once for the current limits (the loop's screening and ``measure``'s own check share it)."""
        from tunebench.targets.tvm.templates import get_template

        if isinstance(config, TraceConfig):
            return None
        key = (task.id, config.index)
        if key not in self._verdicts:
            tpl = get_template(task.kind, self.kind, task.template)
            self._verdicts[key] = tpl.static_check(task.mod, config, self.limits)
        return self._verdicts[key]

    def _probe_local(self) -> None:
        import tvm

        dev = tvm.cuda(self.device_id)
        if not dev.exist:
            raise UserError(f"target=cuda: no CUDA GPU found (tvm.cuda({self.device_id}).exist is False); "
                            "use target=llvm on this machine")
        self._set_gpu({"name": dev.device_name, "compute_version": dev.compute_version,
                       "driver_version": driver_version(dev),
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
        """TVM target, schedule limits and description of a CUDA GPU (``gpu``: its properties). With
        ``target.tag`` each limit is the smaller of the tag's and the device's."""
        limits = device_limits(gpu, int(self.settings.max_vthread))
        tag = self.settings.tag
        if tag:
            _check_tag_matches(tag, gpu)
            limits = tightest(limits, tag_limits(tag, int(self.settings.max_vthread)))
        major, minor = str(gpu["compute_version"]).split(".")
        self.tvm_target = {"kind": "cuda", "arch": f"sm_{major}{minor}",
                           "max_threads_per_block": limits["max_threads_per_block"],
                           "max_shared_memory_per_block": limits["max_shared_memory_per_block"],
                           "thread_warp_size": gpu["warp_size"]}
        self.limits = limits
        self._verdicts: dict[tuple[str, int], str | None] = {}  # static_check's, for these limits
        self.device = {"kind": "cuda", "name": gpu["name"], "compute_version": gpu["compute_version"],
                       "driver": gpu.get("driver_version"), "host": host, **({"tag": tag} if tag else {}), **self.limits}


def _check_tag_matches(tag: str, gpu: dict) -> None:
    """``target.tag`` names a GPU of the device's compute capability (its kernels are compiled for the
    device's architecture, its limits apply to the device)."""
    tagged = compute_capability(str(tag_attrs(tag)["arch"]))
    found = float(str(gpu["compute_version"]))
    if abs(tagged - found) > 1e-6:
        raise UserError(f"target.tag={tag}: a GPU of compute capability {tagged:.1f}, but the GPU found ({gpu['name']}) "
                        f"has {gpu['compute_version']}; name its tag, or target.tag=null for the device's own limits")
