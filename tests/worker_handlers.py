"""Request handlers for the worker tests (imported by name in spawned worker processes)."""
import os
import time


def handle(name, payload):
    if name == "echo":
        return payload
    if name == "sleep":
        time.sleep(payload)
        return payload
    if name == "crash":
        os._exit(7)
    if name == "raise":
        raise ValueError(f"bad config {payload}")
    return os.getpid()
