"""A worker handler for tests: the real TVM handler, except that some configs fail to build.

Configs whose index is divisible by 3 raise during the build (a build error); those divisible by
7 kill the worker process (a crash). Everything else goes through the real build and run.
"""
import os

from tunebench.targets.tvm_worker import handle as real_handle


def handle(name, payload):
    if name == "build":
        if payload["index"] % 7 == 0:
            os._exit(9)
        if payload["index"] % 3 == 0:
            raise RuntimeError(f"injected build failure for config {payload['index']}")
    return real_handle(name, payload)
