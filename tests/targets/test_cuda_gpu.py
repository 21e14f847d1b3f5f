"""CUDA end to end: real builds and runs on a GPU (skipped where there is none)."""
import pytest
from mlflow.tracking import MlflowClient

from conftest import gpu, target_settings
from tunebench.harness.experiment import run_experiment


@pytest.mark.gpu
@gpu
def test_tiny_run_on_cuda_checks_its_best_config(tiny_cfg):
    tiny_cfg.target = target_settings("cuda", runner={"repeat": 3, "min_repeat_ms": 5})
    tiny_cfg.budget.trials_per_task = 16
    run_id = run_experiment(tiny_cfg)
    run = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db").get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["target"] == "cuda"
    checks = [v for k, v in run.data.metrics.items() if k.endswith(".check_ok")]
    assert checks == [1.0]
