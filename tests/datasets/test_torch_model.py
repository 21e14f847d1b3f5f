"""``model=torch model.factory=package.module:function``: any PyTorch module of the user's, tuned like
a zoo model (tasks extracted, each best config checked against the module's output); its bad input."""

from __future__ import annotations

import json

import pytest

from tunebench.errors import UserError
from tunebench.harness.experiment import run_experiment
from tunebench.harness.setup.compose import compose_config
from tunebench.harness.setup.preflight import preflight
from tunebench.record_file import read_records

NET = '''
import torch.nn as nn


def make():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, groups=8),
                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def grouped():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1, groups=2))


def number():
    return 3


def fails():
    raise RuntimeError("no such checkpoint")


NOT_CALLABLE = 3
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_net.py").write_text(NET)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_factory_model_is_tuned_and_its_output_checked(user_module):
    cfg = compose_config([f"workdir={user_module}", "model=torch", "model.factory=user_net:make",
                          "model.input_shape=[1,3,16,16]", "budget.trials_per_task=2", "e2e.enabled=false",
                          "progress=false", "target.runner.repeat=2", "target.runner.min_repeat_ms=5"])
    run_id = run_experiment(cfg)
    records = read_records(str(user_module / "records" / run_id / "records.jsonl"))
    assert len(records) == 6 and all(r["valid"] for r in records)
    tasks = json.loads((user_module / "records" / run_id / "tasks.json").read_text())
    assert sorted(t["kind"] for t in tasks) == ["conv2d", "dense", "depthwise_conv2d"]
    assert all(t["check"]["ok"] for t in tasks), [t["check"] for t in tasks]


@pytest.mark.parametrize(("factory", "message"), [
    ("user_net:number", "model.factory=user_net:number: returned a int, not a torch.nn.Module"),
    ("user_net:fails", "model.factory=user_net:fails: calling it raised RuntimeError: no such checkpoint"),
    ("user_net:NOT_CALLABLE", "model.factory=user_net:NOT_CALLABLE: int is not callable"),
    ("no_such_pkg.net:make", "module 'no_such_pkg.net' does not import: ModuleNotFoundError"),
    ("user_net", "model.factory='user_net': must be an import path package.module:Class"),
])
def test_a_bad_factory_is_one_line_before_any_run(user_module, factory, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        preflight(["model=torch", f"model.factory={factory}", f"workdir={user_module}"])
    assert not (user_module / "mlflow.db").exists()


def test_a_torch_model_without_a_factory_says_so(user_module):
    with pytest.raises(UserError, match="model.factory"):
        preflight(["model=torch", f"workdir={user_module}"])


def test_a_layer_no_template_covers_is_reported_once_and_left_to_the_default_schedule(user_module, caplog):
    from tunebench.datasets.models import TorchModel
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    tasks, _ = model_tasks(TorchModel(factory="user_net:grouped", input_shape=[1, 3, 8, 8]))
    assert [t.kind for t in tasks] == ["conv2d"]
    lines = [r.getMessage() for r in caplog.records if "no template covers" in r.getMessage()]
    assert len(lines) == 1 and "group_conv2d_nchw" in lines[0] and "default schedule" in lines[0], lines
