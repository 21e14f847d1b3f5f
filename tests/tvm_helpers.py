"""Helpers of the tests that use TVM (schedule templates on a GPU target, without a GPU)."""

import re

import tvm

CUDA = tvm.target.Target({"kind": "cuda", "arch": "sm_80"})
LIMITS = {"max_threads_per_block": 1024, "max_shared_memory_per_block": 49152, "max_thread_x": 1024,
          "max_thread_y": 1024, "max_thread_z": 64, "max_vthread": 8}


def serialize_gpu_schedule(mod: tvm.IRModule) -> tvm.IRModule:
    """The scheduled function with every thread binding made a serial loop and every buffer
    global, so that it runs on llvm (see the module docstring)."""
    text = re.sub(r'T\.thread_binding\(([^,]+), thread="[^"]+"(, annotations=\{[^}]*\})?\)', r"range(\1)",
                  mod.script())
    text = text.replace('scope="shared"', 'scope="global"').replace('scope="local"', 'scope="global"')
    assert "thread_binding" not in text
    return tvm.script.from_source(text)
