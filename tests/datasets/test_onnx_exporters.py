"""A user's ONNX export of a common architecture imports: small ShuffleNet- (channel shuffle through
``view``), GhostNet- (cheap depthwise features, squeeze-excite with hardsigmoid) and DenseNet-style
(concatenations, BatchNorm) nets, each exported by both of PyTorch's exporters (TorchScript's,
``dynamo=False``, which writes ``x.view(b, g, c // g, h, w)`` as ``Shape -> Gather -> Div -> Reshape``,
and the default dynamo one), imported and checked against ONNX Runtime; tuned at 2 trials (slow)."""

from __future__ import annotations

import json
import warnings

import mlflow
import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tunebench.datasets.onnx_file import prepared_onnx
from tunebench.harness.experiment import run_experiment
from tunebench.harness.setup.compose import compose_config
from tunebench.targets.tvm.workloads.onnx_import import import_onnx
from tunebench.targets.tvm.workloads.relax_import import run_relax

FAST = ["budget.trials_per_task=2", "progress=false", "target.runner.repeat=2", "target.runner.min_repeat_ms=5",
        "e2e.rounds=1", "e2e.n_runs=1", "e2e.default_n_runs=0", "e2e.min_sample_ms=1"]


class ShuffleNetStyle(nn.Module):
    """A ShuffleNet-V2 unit: split, depthwise + pointwise branch, concat, channel shuffle through ``view``."""

    def __init__(self, groups: int = 2):
        super().__init__()
        self.groups = groups
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.dw, self.pw = nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Conv2d(4, 4, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = F.relu(self.stem(x))
        a, b = x.chunk(2, dim=1)
        x = torch.cat([a, F.relu(self.pw(self.dw(b)))], 1)
        n, c, h, w = x.shape
        x = x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
        return self.fc(x.mean((2, 3)))


class GhostNetStyle(nn.Module):
    """A Ghost module (primary 1x1 conv, cheap depthwise features, concat) and squeeze-excite with hardsigmoid."""

    def __init__(self):
        super().__init__()
        self.primary, self.cheap = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.se_reduce, self.se_expand = nn.Conv2d(8, 2, 1), nn.Conv2d(2, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        p = F.relu(self.primary(x))
        x = torch.cat([p, F.relu(self.cheap(p))], 1)
        s = F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(F.adaptive_avg_pool2d(x, 1)))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x * s, 1), 1))


class DenseNetStyle(nn.Module):
    """A dense block of two BN-ReLU-conv layers, each fed the concatenation of all before it."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.layer1 = nn.Sequential(nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1))
        self.layer2 = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3, padding=1))
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        x = self.stem(x)
        x = torch.cat([x, self.layer1(x)], 1)
        x = torch.cat([x, self.layer2(x)], 1)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


NETS = {"shufflenet": ShuffleNetStyle, "ghostnet": GhostNetStyle, "densenet": DenseNetStyle}
EXPORTS = [(net, dynamo) for net in NETS for dynamo in (False, True)]
IDS = [f"{net}-{'dynamo' if dynamo else 'torchscript'}" for net, dynamo in EXPORTS]


def _export(net: str, dynamo: bool, path: str) -> str:
    torch.manual_seed(0)
    module = NETS[net]().eval()
    with torch.no_grad():  # BatchNorm statistics that are not the identity
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated; the dynamo one warns of torchvision
        torch.onnx.export(module, (torch.randn(1, 3, 8, 8),), path, dynamo=dynamo, input_names=["image"],
                          verbose=False)
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[tuple[str, bool], str]:
    folder = tmp_path_factory.mktemp("exports")
    return {(net, dynamo): _export(net, dynamo, str(folder / f"{net}_{dynamo}.onnx")) for net, dynamo in EXPORTS}


def test_the_shape_a_torchscript_export_computes_is_folded_before_the_import(exports):
    """The graph TVM's importer could not convert ("emit_te now only supports Tensor that has ShapeExpr
    shape"): the channel shuffle's shape computed from ``Shape`` at run time, a constant once folded."""
    path = exports["shufflenet", False]
    assert {"Shape", "Gather", "Div", "Reshape"} <= {n.op_type for n in onnx.load(path).graph.node}
    folded, _, _ = prepared_onnx(path, [], 0)
    assert not {"Shape", "Gather", "Div"} & {n.op_type for n in folded.graph.node}


@pytest.mark.parametrize(("net", "dynamo"), EXPORTS, ids=IDS)
def test_an_export_imports_and_computes_what_onnx_runtime_computes(exports, net, dynamo):
    imported = import_onnx(exports[net, dynamo], [], 0, "llvm")
    out, ref = run_relax(imported), imported.reference_output()
    assert out.shape == ref.shape == (1, 5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # ~75 s each on 2 cores; the import and its output are checked by the test above
@pytest.mark.parametrize(("net", "dynamo"), EXPORTS, ids=IDS)
def test_an_export_is_tuned_and_its_output_checked_against_onnx_runtime(exports, tmp_path, net, dynamo):
    cfg = compose_config([f"workdir={tmp_path}", "model=onnx", f"model.path={exports[net, dynamo]}", *FAST])
    run_id = run_experiment(cfg)
    tasks = json.loads((tmp_path / "records" / run_id / "tasks.json").read_text())
    assert tasks and all(t["check"]["ok"] for t in tasks), [t["check"] for t in tasks]
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    metrics = mlflow.get_run(run_id).data.metrics
    assert metrics["e2e_rel_err"] < 1e-4 and metrics["onnxruntime_latency_ms"] > 0
