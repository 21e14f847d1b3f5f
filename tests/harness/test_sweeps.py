"""Sweeps: Hydra's basic and joblib launchers; measurements serialized per device across jobs."""
import multiprocessing as mp
import os
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, TINY_LAYER_ARG
from tunebench.record_file import read_records
from tunebench.targets.devicelock import device_lock


def _hold(lock_dir, q):
    with device_lock("test-device", lock_dir):
        start = time.time()
        time.sleep(0.3)
        q.put((start, time.time()))


def test_device_lock_serializes_processes(tmp_path):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_hold, args=(str(tmp_path), q)) for _ in range(3)]
    for p in procs:
        p.start()
    spans = sorted(q.get(timeout=60) for _ in procs)
    for p in procs:
        p.join()
    assert all(a_end <= b_start + 1e-3 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def _intervals(records):
    # a measurement's run ends when its Measurement is created (its timestamp) and lasted run_s
    return [(r["timestamp"] - r["run_s"], r["timestamp"]) for r in records if r["run_s"] > 0]


@pytest.mark.slow  # ~30-60 s; the device lock across processes: tests/protocol (held lock) and test_measurement
def test_joblib_sweep_runs_jobs_in_parallel_without_overlapping_measurements(tmp_path):
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "method=random", "seed=0,1",
            "budget.trials_per_task=6", "target.batch_size=2", "e2e.enabled=false", "progress=false", TINY_LAYER_ARG,
            "target.runner.repeat=3", "target.runner.min_repeat_ms=20"]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in runs)
    per_job = [_intervals(read_records(r.data.tags["tunebench.record_file"])) for r in runs]
    assert all(len(j) == 6 for j in per_job)
    # the two jobs ran at the same time (their MLflow runs overlap) ...
    (a0, a1), (b0, b1) = [(r.info.start_time, r.info.end_time) for r in runs]
    assert a0 < b1 and b0 < a1
    # ... but no two measurements did
    spans = sorted(per_job[0] + per_job[1])
    assert all(e1 <= s2 + 0.01 for (_, e1), (s2, _) in zip(spans, spans[1:]))
