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
    if name == "crash":
        os._exit(7)
    if name == "raise":
        raise ValueError(f"bad config {payload}")
    return os.getpid()
