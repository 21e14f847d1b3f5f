"""``target=llvm``: this machine's CPU (or a CPU behind ``target.rpc``) through TVM's LLVM backend."""

from __future__ import annotations

import os
import platform

from tunebench.errors import UserError
from tunebench.targets.tvm.host_isa import cpuinfo_field, fits_triple, host_problem, mcpu_features, triple_cpus
from tunebench.targets.tvm.offline import OfflineTasks
from tunebench.targets.tvm.settings import LLVMSettings
from tunebench.targets.tvm.target import TVMTarget
from tunebench.targets.tvm.variants import VARIANTS


def llvm_cpu(mcpu: str) -> str:
    """The LLVM CPU name for ``target.mcpu`` (``native``: this machine's); an unknown name, or a 32-bit one
    on x86_64, is a :class:`UserError` listing the valid ones (LLVM would print an error per function and
    fall back to a generic CPU, or abort)."""
    from tvm.target import codegen

    if mcpu == "native":
        return codegen.llvm_get_system_cpu()
    triple = codegen.llvm_get_system_triple()
    if not codegen.llvm_is_valid_cpu(str(mcpu), triple) or not fits_triple(str(mcpu)):
        valid = ", ".join(triple_cpus())
        raise UserError(f"target.mcpu={mcpu!r} is not an LLVM CPU for {triple}; valid: native, {valid}")
    return str(mcpu)


def refuse_unrunnable(mcpu: str | None, rpc: bool = False, remote_cpu: str | None = None) -> None:
    """A :class:`UserError` when code for ``target.mcpu`` needs instruction sets this machine (or, with
    ``rpc``, the device's CPU model ``remote_cpu``) lacks. ``native`` always runs; a remote that does not
    name its CPU, or names one of another triple, is not compared."""
    if mcpu in (None, "native") or (rpc and remote_cpu not in triple_cpus()):
        return
    problem = host_problem(llvm_cpu(mcpu), remote_cpu)
    if problem:
        raise UserError(f"target.mcpu={mcpu!r} {problem}")


def cpu_model_name() -> str:
    return cpuinfo_field("model name") or platform.processor() or "unknown"


def remote_cpu(settings: LLVMSettings, info: dict, rpc: dict) -> tuple[str, int]:
    """``(LLVM CPU name, threads)`` of a remote CPU: ``target.mcpu`` (``native``: the remote's own)
    and ``target.num_cores`` (null: the remote's CPU count)."""
    mcpu = settings.mcpu or "native"
    if mcpu == "native":
        if not info.get("cpu"):
            raise UserError(f"target.mcpu=native: the RPC device ({rpc['key']}) cannot report its CPU (its TVM has "
                            "no LLVM); set target.mcpu to its LLVM CPU name")
        mcpu = str(info["cpu"])
    refuse_unrunnable(settings.mcpu, rpc=True, remote_cpu=info.get("cpu"))
    threads = settings.num_cores or info.get("cpu_count")
    if not threads:
        raise UserError(f"target.num_cores=null: the RPC device ({rpc['key']}) cannot report its CPU count; "
                        "set target.num_cores")
    if info["max_threads"] < int(threads):
        from tunebench.targets.tvm.remote import threads_hint

        raise UserError(f"target.num_cores={settings.num_cores}: "
                        + threads_hint(info["server"], rpc["key"], info["max_threads"], int(threads)))
    return llvm_cpu(mcpu), int(threads)


class LLVMTarget(OfflineTasks, TVMTarget):
    """``target=llvm``: this machine's CPU (or a CPU behind ``target.rpc``) through TVM's LLVM backend.
    Besides the TVM targets' capabilities it describes CPU models
    (:class:`~tunebench.targets.capabilities.DescribesCPUs`) and extracts tasks offline
    (:class:`~tunebench.targets.capabilities.ExtractsTasks`)."""

    kind = "llvm"
    Settings = LLVMSettings
    templates = VARIANTS["llvm"]
    cpu_model = staticmethod(llvm_cpu)
    cpu_isa = staticmethod(mcpu_features)

    def _threads(self) -> int:
        return int(self.settings.num_cores or os.cpu_count() or 1)

    @property
    def sees_device_load(self) -> bool:
        return not self.rpc

    def _probe_local(self) -> None:
        mcpu = llvm_cpu(self.settings.mcpu or "native")
        refuse_unrunnable(self.settings.mcpu)
        self.tvm_target = {"kind": "llvm", "num-cores": int(self.threads), "mcpu": mcpu}
        self.device_spec = [self.device_type, 0]
        self.device = {"kind": "llvm", "name": cpu_model_name(), "mcpu": mcpu, "num_cores": int(self.threads),
                       "host": platform.node()}
        self.device_key = f"cpu-{platform.node()}"

    def _remote_device(self, info: dict, where: dict) -> None:
        mcpu, self.threads = remote_cpu(self.settings, info, self.rpc)
        self.tvm_target = {"kind": "llvm", "num-cores": self.threads, "mcpu": mcpu}
        self.device = {"kind": "llvm", "name": f"{mcpu} via RPC ({self.rpc['key']})", "mcpu": mcpu,
                       "num_cores": self.threads, "host": info["server"], **where}
