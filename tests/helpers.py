"""Helpers tests in several folders share (pure Python: no TVM)."""

import os
import subprocess
import sys
import time

from tunebench.space import ChoiceKnob, Space, SplitKnob
from tunebench.task import Task

HOLD = """
import sys, time
from tunebench.targets.devicelock import DeviceLock
with DeviceLock(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def hold_lock(key: str, lock_dir, seconds: float) -> subprocess.Popen:
    """A separate process that holds the device lock for ``seconds`` (returns once it holds it)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, key, str(lock_dir), str(seconds)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def small_task(size_split=12):
    """A task with a 2-knob space (a split of ``size_split`` and a 3-way choice), no workload."""
    t = Task(id="00000000abcd", name="t", kind="conv2d", mod=None, shape={}, flops=10)
    t.space = Space([SplitKnob("a", size_split, 2), ChoiceKnob("b", (0, 1, 2))])
    return t


def wait_for_records(workdir, proc, n: int, timeout_s: float = 300) -> str:
    """The record file under ``workdir/records`` once it holds ``n`` lines, while ``proc`` (the run)
    still runs; an AssertionError when the run ends first or after ``timeout_s``."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        found = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(workdir, "records")) for f in fs
                 if f == "records.jsonl"]
        if found:
            with open(found[0]) as fh:
                if len(fh.read().splitlines()) >= n:
                    return found[0]
        assert proc.poll() is None, "the run ended before it could be stopped"
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} records after {timeout_s} s")
