"""Helpers tests in several folders share (pure Python: no TVM)."""

import os
import subprocess
import sys
import time

from tunebench.search_space import ChoiceKnob, Space, SplitKnob
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


TINY_TEMPLATE = "targets/tvm/templates/cpu_packed.py"


def tiny_space() -> Space:
    """The knobs of :func:`write_tiny_space`: a 2-way split of 8 (4 entities) and a 2-way choice."""
    return Space([SplitKnob("tile_x", 8, 2), ChoiceKnob("unroll", (0, 1))])


def write_tiny_space(path: str, sha: str | None = None, noisy_index: int = 1, scale: float = 1.0,
                     code_sha: str | None = None) -> list[dict]:
    """A space file of all 8 configs of :func:`tiny_space` (config 3 failed; config ``noisy_index`` marked
    noisy; latency ``scale`` x (1 + index) ms); returns its rows. ``sha`` and ``code_sha``: the template's
    whole-file and code digests to record (default: this checkout's, so that replay accepts it;
    ``code_sha=""``: none, a file written before the code digest existed)."""
    from tunebench.datasets.space_file import write_space_file
    from tunebench.targets.tvm.template_files import template_code_digest, template_source_digest

    space, rows = tiny_space(), []
    for i in range(space.size):
        failed = i == 3
        rows.append({"digits": space.digits(i), "config": space.get(i).to_dict(),
                     "latency_s": None if failed else scale * 1e-3 * (1 + i), "latency_std_s": 1e-5 * i,
                     "latency_min_s": None, "noisy": i == noisy_index, "noise": {}, "build_s": 0.5 + i,
                     "run_s": 0.25, "error": "build: boom" if failed else ""})
    header = {"name": "layers/tiny", "task": {"kind": "dense", "shape": {"batch": 1}, "flops": 2_000_000,
                                              "template": "packed", "template_file": TINY_TEMPLATE,
                                              "template_sha256": sha or template_source_digest(TINY_TEMPLATE)},
              "target": {"kind": "llvm", "tvm_target": {"kind": "llvm"}, "threads": 2, "precision": "float32"},
              "knobs": space.describe(), "space_size": space.size, "machine": {"cpu": "Test CPU", "cores": 2},
              "commit": "abc", "date": "2026-11-27T00:00:00Z", "subspace": {}}
    if code_sha != "":
        header["task"]["template_code_sha256"] = code_sha or template_code_digest(TINY_TEMPLATE)
    write_space_file(path, header, rows)
    return rows
