"""A wrong kernel is an error, never a result."""
import json
import os

import numpy as np
import pytest
import tvm

from conftest import TINY_LAYER
from tunebench.harness.experiment import run_experiment
from tunebench.record_file import read_records
from tunebench.targets.tvm import worker as tvm_worker
from tunebench.targets.tvm.messages import CheckInput, TaskSpec
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.workloads.tasks import model_tasks


@pytest.fixture(scope="module")
def tasks():
    right, _ = model_tasks({"name": "layers", "layers": [TINY_LAYER]}, "llvm")
    wrong, _ = model_tasks({"name": "layers", "layers": [dict(TINY_LAYER, relu=False)]}, "llvm")
    return right[0], wrong[0]


def _request(task, index, ref_cache_dir=None):
    spec = TaskSpec(key=task.id, mod_json=tvm.ir.save_json(task.mod), kind=task.kind, target_kind="llvm")
    return CheckInput(task=spec, index=index, target={"kind": "llvm", "num-cores": 2}, device=["cpu", 0],
                      ref_target={"kind": "llvm", "num-cores": 2}, ref_cache_dir=ref_cache_dir)


def test_check_passes_scheduled_configs_and_catches_a_wrong_kernel(tasks, monkeypatch):
    right, wrong = tasks
    tpl = get_template(right.kind, "llvm")
    space = tpl.make_space(right.mod)
    for i in np.random.default_rng(0).integers(space.size, size=4):
        res = tvm_worker._check(_request(right, int(i)))
        assert res.ref_max_abs > 1.0 and res.rel_err <= 1e-4

    class ComputesSomethingElse:  # the same signature, but no ReLU: a wrong kernel
        def apply(self, mod, config):
            return tpl.apply(wrong.mod, config)

    monkeypatch.setitem(tvm_worker._TASKS, right.id, (right.mod, ComputesSomethingElse(), space))
    res = tvm_worker._check(_request(right, 5))
    assert res.rel_err > 0.1


def test_a_wrong_best_config_is_not_the_result(tiny_cfg):
    tiny_cfg.target.handler = "faulty_handlers:handle_wrong_first_check"
    tiny_cfg.e2e.enabled = False  # the checks of the search's best configs are the point (test_e2e: the model's)
    run_id = run_experiment(tiny_cfg)
    run_dir = os.path.join(tiny_cfg.workdir, "records", run_id)
    checks = [json.loads(line) for line in open(os.path.join(run_dir, "checks.jsonl"))]
    assert [c["ok"] for c in checks] == [False, True]
    # the top configs of the search are re-timed; the checks follow the re-timed ranking
    retimed = sorted((json.loads(line) for line in open(os.path.join(run_dir, "retimed.jsonl"))),
                     key=lambda r: r["latency_s"])
    recs = read_records(os.path.join(run_dir, "records.jsonl"))
    top3 = {r["index"] for r in sorted((r for r in recs if r["valid"]), key=lambda r: r["latency_s"])[:3]}
    assert {r["index"] for r in retimed} == top3
    assert checks[0]["index"] == retimed[0]["index"] and checks[1]["index"] == retimed[1]["index"]
    summary = json.load(open(os.path.join(run_dir, "tasks.json")))[0]
    assert summary["best_index"] == retimed[1]["index"]  # the fastest config gave a wrong output
    assert [r["chosen"] for r in retimed] == [False, True, False]
    from mlflow.tracking import MlflowClient

    m = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db").get_run(run_id).data.metrics
    tid = summary["id"]
    assert m[f"{tid}.check_ok"] == 1.0
    assert m[f"{tid}.best_latency_ms"] == pytest.approx(retimed[1]["latency_s"] * 1e3)
    search = next(r for r in recs if r["trial"] == retimed[1]["trial"])  # the record keeps the search timing
    assert summary["best_latency_search_ms"] == pytest.approx(search["latency_s"] * 1e3)


def test_reference_outputs_are_cached_and_read_back(tasks, tmp_path):
    from tunebench.safe_files import read_hashed

    right, _ = tasks
    request = _request(right, 3, ref_cache_dir=str(tmp_path))
    first = tvm_worker._check(request)
    files = list(tmp_path.glob("*.ref"))
    assert len(files) == 1 and first.rel_err <= 1e-4 and first.reference_note is None
    meta, data = read_hashed(str(files[0]))
    ref = np.frombuffer(data, dtype=meta["dtype"]).reshape(meta["shape"])
    assert np.max(np.abs(ref)) == pytest.approx(first.ref_max_abs)
    # the next check reads the file: its mtime stays, the result is the same
    mtime = files[0].stat().st_mtime_ns
    assert tvm_worker._check(request).reference_note is None and files[0].stat().st_mtime_ns == mtime
    # a tampered reference fails its hash: discarded and computed again, never trusted
    blob = files[0].read_bytes()
    files[0].write_bytes(blob[:-len(data)] + (ref + 10.0).astype(ref.dtype).tobytes())
    again = tvm_worker._check(request)
    assert again.rel_err <= 1e-4 and "discarded" in again.reference_note
    assert files[0].read_bytes() == blob  # stored again
    # another workload (other layer) gets its own file
    other, _ = model_tasks({"name": "layers", "layers": [dict(TINY_LAYER, out_channels=8)]}, "llvm")
    tvm_worker._check(_request(other[0], 0, ref_cache_dir=str(tmp_path)))
    assert len(list(tmp_path.glob("*.ref"))) == 2
