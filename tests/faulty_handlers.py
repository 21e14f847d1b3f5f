"""A worker handler for tests: the real TVM handler, except that some configs fail to build.

Configs whose index is divisible by 3 raise during the build (a build error); those divisible by
7 kill the worker process (a crash). Everything else goes through the real build and run.
"""
import dataclasses
import os

from tunebench.targets.tvm.worker import handle as real_handle


def handle(name, request):
    if name == "build":
        if request.index % 7 == 0:
            os._exit(9)
        if request.index % 3 == 0:
            raise RuntimeError(f"injected build failure for config {request.index}")
    return real_handle(name, request)


_checked = []


def handle_wrong_first_check(name, request):
    """The real handler, except that the first config checked in this worker reports a wrong output
    (as a kernel that computes something else would): the harness must not report it as a result."""
    res = real_handle(name, request)
    if name == "check" and not _checked:
        _checked.append(request.index)
        res = dataclasses.replace(res, max_abs_err=1.0, rel_err=0.5)
    return res


#: seconds the fake slow compile of :func:`handle_slow_build` adds to every build
SLOW_BUILD_S = 0.6


def handle_slow_build(name, request):
    """The real handler with a slow compile: every build first sleeps :data:`SLOW_BUILD_S` (as a GPU kernel's
    NVRTC/nvcc compile takes its time), and configs whose index is divisible by 3 then fail to build."""
    if name == "build":
        import time

        time.sleep(SLOW_BUILD_S)
        if request.index % 3 == 0:
            raise RuntimeError(f"injected build failure for config {request.index}")
    return real_handle(name, request)
