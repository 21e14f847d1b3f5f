"""Request handlers for the worker tests (imported by name in spawned worker processes)."""
import os
import time


def slow_prepare():
    """A start-up that takes longer than the test's request timeout."""
    time.sleep(1.5)


def handle(name, payload):
    if name == "echo":
        return payload
    if name == "env":
        return os.environ.get(payload)
    if name == "sleep":
        time.sleep(payload)
        return payload
    if name == "span":  # sleep, and say who ran it and when (wall clock shared by the processes)
        t0 = time.time()
        time.sleep(payload)
        return os.getpid(), t0, time.time()
    if name == "crash":
        os._exit(7)
    if name == "raise":
        raise ValueError(f"bad config {payload}")
    return os.getpid()


def inductor_cache(name, payload):
    """Where torch.compile's caches go in this worker (after the worker's ``prepare``), after compiling
    and running ``payload`` (a LoadTorchInput) through the end-to-end worker's handler."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from tunebench.targets.tvm.e2e.model_worker import handle as model_handle

    model_handle("load_torch", payload)
    return cache_dir()
