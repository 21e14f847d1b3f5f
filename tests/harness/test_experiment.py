"""End-to-end: real tuning runs on this CPU through the harness, MLflow and the record file."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, TINY_LAYER_ARG
from helpers import wait_for_records
from tunebench.harness.experiment import run_experiment
from tunebench.methods.random_search import RandomSettings
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG


def _client(workdir):
    return MlflowClient(f"sqlite:///{workdir}/mlflow.db")


def test_run_logs_params_tags_metrics_curves_and_records(tiny_cfg):
    run_id = run_experiment(tiny_cfg)
    run = _client(tiny_cfg.workdir).get_run(run_id)
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    for key in ("method", "model", "target", "device", "seed", "git_commit"):
        assert tags[key]
    assert (tags["method"], tags["model"], tags["target"], tags["seed"]) == ("random", "layers", "llvm", "0")
    assert run.data.params["budget.trials_per_task"] == "6" and run.data.params["target.kind"] == "llvm"
    m = run.data.metrics
    task_ids = {k.split(".")[0] for k in m if k.endswith(".trials")}
    assert len(task_ids) == 1
    (tid,) = task_ids
    assert m[f"{tid}.trials"] == 6 and m[f"{tid}.check_ok"] == 1.0
    assert m[f"{tid}.best_latency_ms"] > 0 and m[f"{tid}.best_gflops"] > 0 and m[f"{tid}.search_s"] > 0
    assert m["n_measurements"] == 6 and 0 <= m["harness_overhead_share"] < 1
    # where the trials' time went, per task and per run: compile, upload (none locally), run, protocol, overlap
    for key in ("time_compile_s", "time_run_s", "time_protocol_s"):
        assert m[f"{tid}.{key}"] > 0 and m[key] >= m[f"{tid}.{key}"]
    assert m[f"{tid}.time_upload_s"] == m["time_upload_s"] == 0.0 and m["time_overlap_s"] == 0.0  # llvm: no overlap
    # end-to-end rows of the same run: tuned model (output checked against PyTorch), TVM default, PyTorch
    assert m["e2e_latency_ms"] > 0 and m["e2e_rel_err"] <= 1e-4 and m["e2e_latency_std_ms"] >= 0
    assert m["tvm_default_latency_ms"] > 0 and m["torch_latency_ms"] > 0
    assert m["e2e_latency_min_ms"] <= m["e2e_latency_ms"] and m["speedup_vs_torch"] > 0
    assert m["e2e_noisy"] in (0.0, 1.0) and m["torch_noisy"] in (0.0, 1.0)
    # the protocol: machine peak, calibration around the task, noise counts, lock waits, conditions
    assert m["peak_gflops"] > 0 and m["peak_mem_gbps"] > 0 and 0 < m["pct_peak"] < 100
    assert m[f"{tid}.calib_pre_ms"] > 0 and m[f"{tid}.calib_post_ms"] > 0 and m[f"{tid}.best_noisy"] in (0.0, 1.0)
    assert m["n_noisy_tasks"] in (0, 1) and m["lock_wait_s"] >= 0
    assert m.get("calib_max_slowdown", 1.0) > 0  # logged once the machine has a quiet calibration reference
    assert tags["precision"] == "float32" and tags["threads"] == str(os.cpu_count())
    curve = _client(tiny_cfg.workdir).get_metric_history(run_id, f"{tid}.search_best_latency_ms")
    values = [p.value for p in sorted(curve, key=lambda p: (p.step, p.timestamp))]
    assert len(values) >= 2 and all(a >= b for a, b in zip(values, values[1:]))  # best so far never rises
    recs = read_records(tags[RECORD_TAG])
    assert len(recs) == 6 and [r["trial"] for r in recs] == list(range(6))
    assert len({r["index"] for r in recs}) == 6  # random search never repeats a config
    assert all("noisy" in r and "latency_min_s" in r for r in recs)
    # the reported best is the re-timed fastest of the search's top 3 (the records keep the search timings)
    retimed = [json.loads(line) for line in open(os.path.join(os.path.dirname(tags[RECORD_TAG]), "retimed.jsonl"))]
    top3 = sorted((r for r in recs if r["valid"]), key=lambda r: r["latency_s"])[:3]
    assert sorted(r["trial"] for r in retimed) == sorted(r["trial"] for r in top3)
    chosen = min(retimed, key=lambda r: r["latency_s"])
    assert chosen["chosen"] and chosen["n"] == 15  # 5 rounds x 3 repeats
    assert m[f"{tid}.best_latency_ms"] == pytest.approx(chosen["latency_s"] * 1e3)
    arts = {a.path for a in _client(tiny_cfg.workdir).list_artifacts(run_id)}
    assert {"records.jsonl", "config.yaml", "tasks.json", "retimed.jsonl"} <= arts
    # the end-to-end step's kernel choice (tuned or TVM's default, the faster) in tasks.json and the metrics
    (entry,) = json.load(open(os.path.join(os.path.dirname(tags[RECORD_TAG]), "tasks.json")))
    assert entry["e2e_kernel"]["kernel"] in ("tuned", "default")
    assert m[f"{tid}.kernel_default_taken"] == float(entry["e2e_kernel"]["kernel"] == "default")


def test_same_seed_same_configs(tiny_cfg, tmp_path):
    tiny_cfg.check_correctness = False
    tiny_cfg.e2e.enabled = False
    first = read_records(_client(tiny_cfg.workdir).get_run(run_experiment(tiny_cfg)).data.tags[RECORD_TAG])
    tiny_cfg.workdir = str(tmp_path / "again")
    os.makedirs(tiny_cfg.workdir)
    second = read_records(_client(tiny_cfg.workdir).get_run(run_experiment(tiny_cfg)).data.tags[RECORD_TAG])
    assert [r["index"] for r in first] == [r["index"] for r in second]


def test_configs_that_cannot_build_are_invalid_and_the_run_finishes(tiny_cfg):
    tiny_cfg.target.handler = "faulty_handlers:handle"
    tiny_cfg.budget.trials_per_task = 12
    tiny_cfg.method = RandomSettings()
    tiny_cfg.e2e.enabled = False  # the search's invalid configs are the point (the test above: the model's rows)
    run_id = run_experiment(tiny_cfg)
    run = _client(tiny_cfg.workdir).get_run(run_id)
    assert run.info.status == "FINISHED"
    recs = read_records(run.data.tags[RECORD_TAG])
    assert len(recs) == 12
    for r in recs:
        if r["index"] % 7 == 0:
            assert not r["valid"] and "worker crashed" in r["error"]
        elif r["index"] % 3 == 0:
            assert not r["valid"] and "injected build failure" in r["error"] and r["error"].startswith("build:")
        else:
            assert r["valid"] and r["latency_s"] > 0
    assert run.data.metrics["n_invalid"] == sum(not r["valid"] for r in recs)


def _run_py(args, cwd, **kw):
    return subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, **kw)


FAST = [TINY_LAYER_ARG, "target.runner.repeat=2", "target.runner.min_repeat_ms=5", "progress=false"]


@pytest.mark.slow  # ~45 s; the stopped-run test below resumes a run the same way, test_resume its record file
def test_sigkill_then_resume_keeps_every_measurement(tmp_path):
    args = [*FAST, "budget.trials_per_task=12", "target.batch_size=2", "target.runner.cooldown_s=0.4",
            "e2e.enabled=false"]  # the records are the point; the end-to-end step has its own tests
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        rec_path = wait_for_records(tmp_path, proc, 4)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert rec_path, "no records appeared"
    first = open(rec_path).read().splitlines()
    first_recs = read_records(rec_path)
    assert 4 <= len(first_recs) < 12
    run_id = os.path.basename(os.path.dirname(rec_path))
    assert _client(tmp_path).get_run(run_id).info.status == "RUNNING"  # killed: never ended

    res = _run_py([f"resume={run_id}", "progress=false"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = open(rec_path).read().splitlines()
    complete = [ln for ln in first if ln.endswith("}")]
    assert lines[: len(first_recs)] == complete[: len(first_recs)]  # first attempt kept, byte for byte
    recs = read_records(rec_path)
    assert len(recs) == 12 and [r["trial"] for r in recs] == list(range(12))
    assert len({r["index"] for r in recs}) == 12  # nothing measured twice
    run = _client(tmp_path).get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["n_measurements"] == 12


def _group_gone(pgid: int, wait_s: float = 5.0) -> bool:
    """No process of the group is left (the run and its workers), zombies aside."""
    deadline = time.time() + wait_s
    while time.time() < deadline:
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                left.append(pid)
        if not left:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_killed_in_one_line_and_resume_finishes_it(tmp_path, sig):
    """SIGTERM (``kill <pid>``) or SIGINT to the whole process group (a terminal's Ctrl-C) while the run
    measures: one line with the resume command, the MLflow run KILLED, the workers gone, the build folder
    removed, no traceback from any process; ``resume=`` then finishes the run."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    args = [*FAST, "budget.trials_per_task=12", "target.batch_size=2", "target.runner.cooldown_s=0.4",
            "e2e.enabled=false"]
    proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rec_path = wait_for_records(tmp_path, proc, 2)
        assert rec_path and list(tmp.glob("tunebench-build-*")), "no records or no build folder"
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run_id = os.path.basename(os.path.dirname(rec_path))
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert proc.returncode == 128 + sig, out[-3000:]
    assert lines[-1] == (f"run {run_id} stopped by {sig.name} (MLflow status KILLED, every measurement kept); "
                         f"resume with: python run.py resume={run_id}"), out[-3000:]
    assert not any(word in out for word in ("Traceback", "KeyboardInterrupt", "BrokenPipeError")), out[-3000:]
    assert sum("resume" in ln for ln in lines) == 1, out[-3000:]
    assert _group_gone(proc.pid), "worker processes outlived the run"
    assert not list(tmp.glob("tunebench-*")), list(tmp.iterdir())
    assert _client(tmp_path).get_run(run_id).info.status == "KILLED"

    if sig == signal.SIGINT:
        return  # resuming a stopped run is the same for both signals: once is enough
    kept = read_records(rec_path)
    res = _run_py([f"resume={run_id}", "progress=false"], tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = read_records(rec_path)
    assert recs[: len(kept)] == kept and [r["trial"] for r in recs] == list(range(12))
    assert _client(tmp_path).get_run(run_id).info.status == "FINISHED"
