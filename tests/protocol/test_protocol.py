"""The measurement protocol's pieces: statistics and intervals, the noise verdict, what other processes
do (CPU monitor, settle), the machine cache, the device lock and worker start-up."""

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import hold_lock
from tunebench.errors import UserError
from tunebench.protocol.machine import MachineCache
from tunebench.protocol.noise import CpuMonitor, NoisePolicy, judge, settle
from tunebench.protocol.stats import bootstrap_ci, geomean, paired_ratio_ci, ratio_of_means_ci, summarize, verdict
from tunebench.targets.devicelock import DeviceLock, holder_of

SPIN = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < {s}: pass\ntime.sleep({idle})"


# ---- statistics -------------------------------------------------------------------------------

def test_summarize_median_min_cv_and_robust_cv():
    st = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert (st.n, st.median, st.min) == (5, 3.0, 1.0)
    assert st.mean == pytest.approx(22.0) and st.std == pytest.approx(np.std([1, 2, 3, 4, 100]))
    assert st.cv == pytest.approx(st.std / 22.0)
    assert st.rcv == pytest.approx(1.4826 * 1.0 / 3.0)  # MAD of |x - 3| = median(2, 1, 0, 1, 97) = 1
    assert st.scaled(1e3).median == 3000.0 and st.scaled(1e3).rcv == st.rcv
    with pytest.raises(ValueError):
        summarize([math.inf])


def test_bootstrap_interval_is_reproducible_and_contains_the_estimate():
    x = np.random.default_rng(1).normal(10.0, 1.0, size=30)
    lo, hi = bootstrap_ci(x, seed=3)
    assert (lo, hi) == bootstrap_ci(x, seed=3)
    assert lo < np.mean(x) < hi and hi - lo < 1.5
    # the same percentile bootstrap written out
    idx = np.random.default_rng(3).integers(0, 30, size=(2000, 30))
    means = x[idx].mean(axis=1)
    assert (lo, hi) == pytest.approx((np.quantile(means, 0.025), np.quantile(means, 0.975)))
    assert all(math.isnan(v) for v in bootstrap_ci([5.0]))


def test_paired_ratios_geometric_mean_and_interval():
    ratio, lo, hi = paired_ratio_ci([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])
    assert (ratio, lo, hi) == pytest.approx((2.0, 2.0, 2.0))  # every pair says exactly 2x
    ratio, lo, hi = paired_ratio_ci([1.0, 4.0], [1.0, 1.0])
    assert ratio == pytest.approx(geomean([1.0, 4.0])) == pytest.approx(2.0)
    assert lo <= ratio <= hi
    with pytest.raises(ValueError):
        paired_ratio_ci([1.0], [1.0, 2.0])


def test_ratio_of_means_interval_matches_a_written_out_bootstrap():
    a, b = [10.0, 12.0, 11.0, 13.0], [20.0, 22.0, 19.0]
    point, lo, hi = ratio_of_means_ci(a, b, seed=0)
    assert point == pytest.approx(np.mean(a) / np.mean(b))
    rng = np.random.default_rng(0)
    ra = np.mean(np.asarray(a)[rng.integers(0, 4, size=(2000, 4))], axis=1)
    rb = np.mean(np.asarray(b)[rng.integers(0, 3, size=(2000, 3))], axis=1)
    assert (lo, hi) == pytest.approx((np.quantile(ra / rb, 0.025), np.quantile(ra / rb, 0.975)))
    assert hi < 1.0 and verdict(lo, hi) == "better" and verdict(lo, hi, better_below=False) == "worse"
    assert math.isnan(ratio_of_means_ci([1.0], [2.0, 3.0])[1])  # one seed: no interval
    assert verdict(0.9, 1.1) == "n.s." and verdict(math.nan, math.nan) == "n.s." and verdict(1.1, 1.3) == "worse"


# ---- noise verdict ------------------------------------------------------------------------------

def test_noise_policy_from_settings_and_their_errors():
    from tunebench.config.experiment import NoiseSettings
    from tunebench.config.load import typed

    p = NoisePolicy.from_settings(typed(NoiseSettings, {"cv_max": 0.1, "remeasure": 2}, "measure.noise"))
    assert (p.cv_max, p.remeasure, p.slowdown_max) == (0.1, 2, NoisePolicy().slowdown_max)
    for bad, match in (({"cv_maxx": 1}, r"measure\.noise\.cv_maxx is unknown; valid: cv_max"),
                       ({"cv_max": -1}, r"measure\.noise\.cv_max=-1\.0: must be a number >= 0"),
                       ({"remeasure": 1.5}, r"measure\.noise\.remeasure=1\.5: must be an integer"),
                       ({"drift_max": "x"}, r"drift_max='x'")):
        with pytest.raises(UserError, match=match):
            typed(NoiseSettings, bad, "measure.noise")


def test_judge_marks_each_signal_over_its_threshold():
    p = NoisePolicy(cv_max=0.05, foreign_cpu_max=0.3, slowdown_max=1.2, drift_max=0.1)
    assert not judge(p, rcv=0.01, foreign_cpu=0.1, slowdown=1.1, drift=-0.05, cv=0.9).noisy  # cv is only recorded
    for kw, name in (({"rcv": 0.2}, "rcv"), ({"foreign_cpu": 1.0}, "foreign_cpu"), ({"slowdown": 3.0}, "slowdown"),
                     ({"drift": -0.5}, "drift"), ({"rcv": math.nan}, "rcv")):
        v = judge(p, **kw)
        assert v.noisy and v.reasons[0].startswith(name), kw
    assert not judge(p, slowdown=0.5).noisy  # faster than the quiet reference is no noise
    v = judge(p, rcv=0.2, cv=0.3)
    assert v.to_dict()["cv"] == 0.3 and v.to_dict()["noisy"] is True


# ---- what other processes do ------------------------------------------------------------------

@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_cpu_monitor_counts_other_processes_but_not_ours():
    """Two monitors over the same second, one declaring the spinning child ours: they differ by what
    the child used (read from its /proc stat), whatever else the machine runs meanwhile."""
    import threading

    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=2.0, idle=0)])
    got = {}
    try:
        time.sleep(0.3)
        monitors = {"foreign": CpuMonitor(), "ours": CpuMonitor(lambda: [child.pid])}
        threads = [threading.Thread(target=lambda k=k, m=m: got.__setitem__(k, m.sample(1.0)))
                   for k, m in monitors.items()]
        used, t0 = _cpu_s(child.pid), time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        used = (_cpu_s(child.pid) - used) / (time.perf_counter() - t0)  # cores the child had
    finally:
        child.wait()
    assert got["foreign"] is not None and got["ours"] is not None
    if used < 0.3:
        pytest.skip(f"the machine is too busy: the spinning child got {used:.2f} of a core")
    assert got["foreign"] > 0.7 * used  # a busy core that is not ours
    assert got["foreign"] - got["ours"] == pytest.approx(used, abs=0.3)  # the same core, declared ours


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (the monitor's own reading of its /proc stat)."""
    from tunebench.protocol.noise import _process_ticks

    return _process_ticks(pid) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
def test_settle_waits_until_a_spinning_process_goes_idle():
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=0.6, idle=3)])
    try:
        time.sleep(0.2)  # the interpreter has started and spins
        waited = settle([child.pid], max_s=3.0)
    finally:
        child.kill()
        child.wait()
    assert 0.2 < waited < 2.5
    assert settle([child.pid]) < 0.2  # gone: nothing to wait for


# ---- machine cache --------------------------------------------------------------------------------

def test_machine_cache_keeps_the_fastest_calibration_and_the_peak(tmp_path):
    key = {"host": "h", "device": "d", "threads": 2}
    cache = MachineCache(key, str(tmp_path / "c"))
    assert cache.peak() is None and cache.calibration_reference() is None
    assert cache.offer_calibration(2e-4) == 2e-4
    assert cache.offer_calibration(3e-4) == 2e-4  # slower: the reference stays
    assert cache.offer_calibration(1e-4) == 1e-4
    cache.store_peak({"fma_gflops": 100.0, "mem_gbps": 10.0, "threads": 2})
    again = MachineCache(dict(key), str(tmp_path / "c"))
    assert again.peak()["fma_gflops"] == 100.0 and again.calibration_reference() == 1e-4
    assert MachineCache({**key, "threads": 1}, str(tmp_path / "c")).peak() is None  # another configuration
    assert oct(os.stat(tmp_path / "c").st_mode & 0o777) == "0o700"
    assert [p.name for p in (tmp_path / "c").iterdir()] == [os.path.basename(cache.path)]  # no temporary left
    with open(cache.path) as fh:
        assert json.load(fh)["key"] == key


# ---- device lock ----------------------------------------------------------------------------------

def test_device_lock_is_reentrant_and_says_who_holds_it(tmp_path, caplog):
    lock = DeviceLock("dev", str(tmp_path), notice_s=0.5)
    with lock:
        with DeviceLock("dev", str(tmp_path)):  # the same process: no deadlock
            assert holder_of(lock.path).startswith(f"pid {os.getpid()} (")
    assert lock.wait_s < 0.5
    proc = hold_lock("dev", tmp_path, 2.0)
    try:
        with caplog.at_level("WARNING"):
            with lock:
                pass
    finally:
        proc.wait()
    assert 1.0 < lock.wait_s < 10
    lines = [r.getMessage() for r in caplog.records if "device lock" in r.getMessage()]
    assert len(lines) == 2 and f"held by pid {proc.pid} (" in lines[0] and "not charged" in lines[0]
    assert "got the dev device lock after waiting" in lines[1]


# ---- workers start before they report ready ------------------------------------------------------------

def test_worker_start_up_does_not_count_against_a_request_timeout():
    from tunebench.targets.workers import Worker

    w = Worker("worker_handlers:handle", env={"TB_TEST_ENV": "7"}, prepare="worker_handlers:slow_prepare")
    try:
        t0 = time.perf_counter()
        w.start()
        assert time.perf_counter() - t0 >= 1.5  # prepare ran before "ready"
        ok, res = w.call("env", "TB_TEST_ENV", timeout_s=1.0)
        assert ok and res == "7"
    finally:
        w.close()


# ---- the protocol's kernels ---------------------------------------------------------------------------

def test_calibration_and_peak_kernels_compute_what_they_claim():
    import tvm

    from tunebench.targets.tvm.fixed_kernels import calibration_kernel, fma_kernel, triad_kernel

    target = {"kind": "llvm", "num-cores": 1, "mcpu": tvm.target.codegen.llvm_get_system_cpu()}

    def run(built):
        lib, args, amount = built
        tensors = [tvm.runtime.tensor(a) for a in args]
        lib.mod["main"](*tensors)
        return args, tensors[-1].numpy(), amount

    args, out, flops = run(calibration_kernel(target))
    assert flops == 2 * 256 ** 3 and np.allclose(out, args[0] @ args[1], rtol=1e-3, atol=1e-3)
    args, out, flops = run(fma_kernel(target, threads=2, lanes=4, chains=3, steps=5))
    acc = np.stack([args[0] + c for c in range(3)]).astype(np.float64)
    for _ in range(5 * 8):
        acc = acc * np.float32(0.999) + 0.5
    assert flops == 2 * 8 * 3 * 5 * 8 and np.allclose(out, acc.sum(axis=0), rtol=1e-4)
    args, out, nbytes = run(triad_kernel(target, 1 << 16))
    assert nbytes == 12 * (1 << 16) and np.allclose(out, args[0] + 3 * args[1])


def test_the_cuda_kernels_compile_without_a_gpu():
    from tunebench.targets.tvm.fixed_kernels import calibration_kernel, fma_kernel, triad_kernel

    target = {"kind": "cuda", "arch": "sm_80"}
    for lib, _, amount in (calibration_kernel(target), fma_kernel(target, 1, 1, 8, 10), triad_kernel(target, 1 << 20)):
        assert amount > 0  # compiled for cuda (codegen needs no GPU): a CUDA kernel in the library
        assert any("__global__" in imp.inspect_source() for imp in lib.mod.imports)


def test_row_workers_keep_freed_memory_only_when_asked(monkeypatch):
    """glibc's mallopt is applied in a row worker with TUNEBENCH_KEEP_FREED_MEMORY=1 (the e2e default)."""
    from tunebench.targets.tvm.e2e.model_worker import keep_freed_memory

    monkeypatch.delenv("TUNEBENCH_KEEP_FREED_MEMORY", raising=False)
    assert keep_freed_memory() is False
    monkeypatch.setenv("TUNEBENCH_KEEP_FREED_MEMORY", "1")
    assert keep_freed_memory() is (sys.platform == "linux")


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")
def test_wait_for_quiet_waits_with_a_message_and_gives_up_at_its_limit(caplog):
    from tunebench.protocol.noise import wait_for_quiet

    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=6, idle=0)])
    try:
        time.sleep(0.2)
        with caplog.at_level("WARNING"):
            waited, foreign = wait_for_quiet(CpuMonitor(), max_foreign_cpu=0.3, max_wait_s=2.0, what="task t")
    finally:
        child.kill()
        child.wait()
    assert 2.0 <= waited < 5.0 and foreign > 0.3
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("waiting for a quiet machine before task t") for m in lines)
    assert any(m.startswith("machine still busy after") for m in lines)
