"""The settings of the TVM targets: ``target=llvm`` (this CPU) and ``target=cuda`` (a GPU), each
optionally timing on a device behind a TVM RPC tracker (``target.rpc``)."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import (
    NAME,
    NONNEG_INT,
    NONNEG_NUM,
    POS_INT,
    POS_NUM,
    Settings,
    bad,
    choice,
    join,
    knob,
    opt,
    rule,
)
from tunebench.targets.tvm.variants import template_problem


@dataclass
class BuilderSettings(Settings):
    n_parallel: int | None = knob(None, opt(POS_INT), "build worker processes; null = os.cpu_count(); never more "
                                  "than the configs built at once (batch_size, or measure.retime.top_k if larger)")
    timeout_s: float = knob(60.0, POS_NUM, 'a build slower than this is an invalid measurement ("timeout")')
    overlap: bool | None = knob(None, opt(choice(True, False)), "time each config as soon as it is built, while the "
                                "batch's others still compile (the device lock is taken before the builds); null "
                                "= on for a GPU, off for a CPU (compiling on the cores a CPU kernel is timed on "
                                "slows it down)")


@dataclass
class RunnerSettings(Settings):
    number: int = knob(1, POS_INT, "runs per repeat (raised automatically to reach min_repeat_ms)")
    repeat: int = knob(5, POS_INT, "repeats; the latency is their median (statistic), the spread their std")
    min_repeat_ms: float = knob(50.0, NONNEG_NUM, "AutoTVM's min_repeat_ms default for CPUs (100 for GPUs)")
    timeout_s: float = knob(60.0, POS_NUM, 'a run slower than this is an invalid measurement ("timeout")')
    cooldown_s: float = knob(0.0, NONNEG_NUM, "pause after each measurement")
    statistic: str = knob("median", choice("median", "mean"), "median | mean of the repeats")


@dataclass
class CheckSettings(Settings):
    reference_cache: str | None = knob(
        "default", opt(NAME),
        "reference outputs kept for later checks of the same task: default = ~/.cache/tunebench/references "
        "($XDG_CACHE_HOME honoured; per user, mode 0700); a path (must be yours, not group/world-writable); null = "
        "none. Each file holds the sha256 of its bytes: a changed one is discarded and recomputed")
    tolerance: float = knob(1e-4, POS_NUM, "max |out - ref| / max |ref| for the best config's output to count as "
                                           "correct")
    timeout_s: float = knob(900.0, POS_NUM, "reference + candidate check of one task (the reference is unscheduled "
                                            "TIR)")


@dataclass
class RpcSettings(Settings):
    """Time on a device registered with a TVM RPC tracker instead of this machine's (builds stay here, in
    parallel; runs, output checks, calibration and the whole model run there). Both null = this machine.
    docs/USAGE.md §Scale out; :mod:`tunebench.targets.tvm.rpc`."""

    tracker: str | None = knob(None, opt(NAME), "host:port of the tracker (python -m tvm.exec.rpc_tracker --host "
                                                "... --port 9190)")
    key: str | None = knob(None, None, "the device key its servers registered with (python -m tvm.exec.rpc_server "
                                       "--key ...)")
    priority: int = knob(1, NONNEG_INT, "tracker request priority (AutoTVM's RPCRunner default)")
    wait_s: float = knob(300.0, POS_NUM, "seconds to wait for a free device of the key (not charged to the search "
                                         "clock); none by then: the run stops, FAILED and resumable (exit code 1)")

    @property
    def enabled(self) -> bool:
        return self.tracker is not None or self.key is not None

    def check(self, prefix: str) -> None:
        """Tracker and key: both or neither; the tracker a ``host:port``, the key a name."""
        if not self.enabled:
            return
        from tunebench.targets.tvm.remote import parse_address

        try:
            parse_address(self.tracker)
        except ValueError:
            raise bad(join(prefix, "tracker"), self.tracker, "must be host:port of a TVM RPC tracker "
                      "(python -m tvm.exec.rpc_tracker)") from None
        if not isinstance(self.key, str) or not self.key.strip():
            raise bad(join(prefix, "key"), self.key, "must name the device key the RPC servers registered with "
                      "(rpc_server --key)")


LOCK_DIR_DOC = (
    "per-device measurement lock files; null = ~/.cache/tunebench/locks (per user, mode 0700: runs of one user "
    "never overlap). Runs of several users on one device only exclude each other with a shared folder an admin "
    "creates: `mkdir -m 1777 /var/lock/tunebench` (sticky: nobody deletes another's lock file) or a folder "
    "writable by their common group, set here for all of them. World-writable without the sticky bit: refused. "
    "Lock files are opened without following symlinks")


@dataclass
class TVMTargetSettings(TargetSettings):
    """What the two TVM targets share: a device, its lock, the worker processes, timing and checks."""

    device_id: int = knob(0, NONNEG_INT, "which device of the kind (tvm.cpu(i) / tvm.cuda(i))")
    batch_size: int = knob(8, POS_INT, "configs built (in parallel) and then measured (one at a time) per round")
    lock_dir: str | None = knob(None, opt(NAME), LOCK_DIR_DOC)
    rpc: RpcSettings = knob(factory=RpcSettings, doc="time on a remote device (docs/USAGE.md §Scale out)")
    handler: str | None = knob(None, opt(rule(lambda v: isinstance(v, str) and ":" in v, 'must be "module:function"')),
                               'worker request handler "module:function"; null = tunebench.targets.tvm.worker:handle')
    builder: BuilderSettings = knob(factory=BuilderSettings, doc="the build workers")
    runner: RunnerSettings = knob(factory=RunnerSettings, doc="the runner (timing) worker")
    # the field ``check`` shadows Settings.check on instances; validate() calls the class's hook
    check: CheckSettings = knob(factory=CheckSettings, doc="the output check of each task's best config")


def _template(kind: str):
    """The check of ``target.template`` for ``kind``: one of its variants, or null (the default)."""
    return lambda v: template_problem(kind, v)


def _cuda_tag(value) -> str | None:
    """The check of ``target.tag``: null or a CUDA tag this TVM knows (TVM is imported only for a tag)."""
    if value is None:
        return None
    from tunebench.targets.tvm.gpu_limits import tag_problem

    return tag_problem(value)


TEMPLATE_DOC = {
    "llvm": "conv2d/dense schedule template: packed = weights pre-packed once per model, AutoTVM's x86 conv2d_NCHWc "
            "/ dense_pack knobs (tile_ic, tile_oc, tile_ow, tile_oh, unroll_kw; tile_y, tile_x, tile_k; output channels "
            "without a vector-wide divisor padded to a multiple of 16); nchw = tiled "
            "NCHW loops on the weights as they are (tile_f, tile_y, tile_x, tile_rc, order, unroll_kw); flex = no "
            "template, a space from any task's loop nest ([Zheng-ASPLOS20]). Depthwise: the NCHW template in "
            "packed and nchw",
    "cuda": "schedule templates: direct = AutoTVM's CUDA conv2d_nchw direct / depthwise / dense (a batch-1 "
            "dense: split-K GEMV, warp-shuffle reduction); winograd = as direct, but 3x3 stride-1 conv2d by Winograd "
            "F(4x4,3x3) (F(2x2,3x3) below 8x8 outputs), AutoTVM's conv2d_nchw_winograd knobs, the weight transform "
            "lifted out of the model ([Lavin-CVPR16]); flex = no template, a space from any task's loop nest "
            "([Zheng-ASPLOS20])",
}


@dataclass
class LLVMSettings(TVMTargetSettings):
    """This machine's CPU through TVM's LLVM backend: real compile and time_evaluator runs."""

    name: str = knob("llvm", NAME, "the target")
    kind: str = knob("llvm", NAME, "the target class")
    mcpu: str | None = knob("native", opt(NAME), "LLVM CPU name; native = tvm.target.codegen.llvm_get_system_cpu(). "
                                                      "A 64-bit one whose instruction sets the machine has (this "
                                                      "one's /proc/cpuinfo; through target.rpc, the remote CPU "
                                                      "model's): checked before the run")
    template: str | None = knob("packed", _template("llvm"), TEMPLATE_DOC["llvm"])
    num_cores: int | None = knob(None, opt(POS_INT), "threads for the kernels; null = os.cpu_count()")


@dataclass
class CUDASettings(TVMTargetSettings):
    """A CUDA GPU through TVM's CUDA backend (NVRTC by default)."""

    name: str = knob("cuda", NAME, "the target")
    kind: str = knob("cuda", NAME, "the target class")
    template: str | None = knob("direct", _template("cuda"), TEMPLATE_DOC["cuda"])
    max_vthread: int = knob(8, POS_INT, "AutoTVM's limit on virtual threads per axis, for template configs; a "
                            "MetaSchedule trace has none (MetaSchedule checks after virtual-thread injection)")
    tag: str | None = knob(None, _cuda_tag, "a TVM target tag of the GPU (e.g. nvidia/nvidia-h100): its per-block "
                           "limits (threads, thread dims, shared memory, static 48 KiB at most) bound the configs "
                           "tried, with the device's own; its compute capability must be the device's; null = the "
                           "device's limits only")
    runner: RunnerSettings = knob(factory=lambda: RunnerSettings(min_repeat_ms=100.0, timeout_s=30.0),
                                  doc="the runner: AutoTVM's GPU setting min_repeat_ms=100; 30 s timeout")
