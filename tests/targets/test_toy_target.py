"""The worked example of docs/ARCHITECTURE.md: a target added in one file and one registration runs
through the real driver, sweeps over methods and is checked like the shipped ones."""

import pytest
from mlflow.tracking import MlflowClient
from toy_target import ToyReplayTarget

from tunebench.errors import UserError
from tunebench.harness.experiment import run_experiment
from tunebench.harness.setup.compose import compose_config
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG
from tunebench.targets import TARGETS, register_target


@pytest.fixture
def toy():
    register_target(ToyReplayTarget)
    yield
    TARGETS.pop(ToyReplayTarget.kind)


def _latencies(n: int = 40) -> dict:
    """Recorded latencies of configs 0..n-1 of both layers; the other configs have none."""
    return {f"layer{t}_{i}": 1e-3 * (1 + (7 * i) % n) * (t + 1) for t in (0, 1) for i in range(n)}


@pytest.mark.parametrize("method", ["random", "autotvm"])
def test_a_registered_target_runs_through_the_driver(toy, tmp_path, method):
    cfg = compose_config([f"workdir={tmp_path}", "experiment=toy", "progress=false", "target=toy_replay",
                          f"method={method}", "budget.trials_per_task=12", "check_correctness=false"]
                         + (["method.plan_size=4"] if method == "autotvm" else []))
    cfg.target.latencies = _latencies()
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED" and run.data.tags["target"] == "toy_replay"
    recs = read_records(run.data.tags[RECORD_TAG])
    assert len(recs) == 24 and {r["task_name"] for r in recs} == {"layer0", "layer1"}
    valid = [r for r in recs if r["valid"]]
    assert valid and all(r["index"] < 40 for r in valid)
    assert run.data.metrics["search_time_s"] >= sum(r["latency_s"] for r in valid)  # replayed seconds on the clock


def test_its_facts_are_checked_before_anything_runs(toy, tmp_path):
    with pytest.raises(UserError, match="model=hls_gemm and target=toy_replay do not go together"):
        run_experiment(compose_config([f"workdir={tmp_path}", "target=toy_replay", "model=hls_gemm"]))
    with pytest.raises(UserError, match="method=cgp cannot run on target=toy_replay"):
        run_experiment(compose_config([f"workdir={tmp_path}", "target=toy_replay", "method=cgp"]))
    with pytest.raises(UserError, match="target.latencies is unknown|target.latencie is unknown"):
        compose_config([f"workdir={tmp_path}", "target=toy_replay", "target.latencie={}"])
