"""``model=onnx model.path=net.onnx``: an ONNX file imported through TVM's ONNX frontend, tuned, each
task output-checked, the whole model checked against ONNX Runtime and timed against it; bad files and
operators TVM cannot import are one line before any run."""

from __future__ import annotations

import json

import mlflow
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from tunebench.errors import UserError
from tunebench.harness.experiment import run_experiment
from tunebench.harness.setup.compose import compose_config
from tunebench.harness.setup.preflight import preflight

FAST = ["budget.trials_per_task=2", "progress=false", "target.runner.repeat=2", "target.runner.min_repeat_ms=5",
        "e2e.rounds=1", "e2e.n_runs=1", "e2e.default_n_runs=0", "e2e.min_sample_ms=1"]


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("onnx") / "net.onnx")
    with pytest.warns(DeprecationWarning):  # the TorchScript exporter: the dynamo one needs onnxscript
        torch.onnx.export(_net(), (torch.randn(1, 3, 12, 12),), path, dynamo=False, input_names=["image"],
                          dynamic_axes={"image": {0: "batch"}})
    return path


def test_an_onnx_model_is_tuned_checked_and_timed_against_onnx_runtime(onnx_file, tmp_path):
    cfg = compose_config([f"workdir={tmp_path}", "model=onnx", f"model.path={onnx_file}",
                          "model.input_shapes=[[1,3,12,12]]", *FAST])
    run_id = run_experiment(cfg)
    tasks = json.loads((tmp_path / "records" / run_id / "tasks.json").read_text())
    assert sorted(t["kind"] for t in tasks) == ["conv2d", "dense"] and all(t["check"]["ok"] for t in tasks)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    metrics = mlflow.get_run(run_id).data.metrics
    assert metrics["e2e_rel_err"] < 1e-4 and metrics["onnxruntime_latency_ms"] > 0
    assert "speedup_vs_onnxruntime" in metrics and "torch_latency_ms" not in metrics


def _graph_file(folder, nodes, inputs, outputs, name="g.onnx") -> str:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 18)])
    path = str(folder / name)
    onnx.save(model, path)
    return path


def _bad_files(folder, good: str) -> dict[str, str]:
    data = open(good, "rb").read()
    (folder / "truncated.onnx").write_bytes(data[: len(data) // 2])
    (folder / "corrupt.onnx").write_bytes(b"\x08\x07garbage" * 50)
    shape = helper.make_node("Constant", [], ["s"], value=helper.make_tensor("s", TensorProto.INT64, [2], [4, 4]))
    block = helper.make_node("Constant", [], ["b"], value=helper.make_tensor("b", TensorProto.INT64, [2], [2, 2]))
    col2im = _graph_file(folder, [shape, block, helper.make_node("Col2Im", ["x", "s", "b"], ["y"])],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])], "col2im.onnx")
    ints = _graph_file(folder, [helper.make_node("Relu", ["x"], ["y"])],
                       [helper.make_tensor_value_info("x", TensorProto.INT32, [1, 4])],
                       [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 4])], "ints.onnx")
    return {"missing": str(folder / "nope.onnx"), "truncated": str(folder / "truncated.onnx"),
            "corrupt": str(folder / "corrupt.onnx"), "col2im": col2im, "ints": ints}


@pytest.mark.parametrize(("case", "extra", "message"), [
    ("missing", [], "no such file"),
    ("truncated", [], "not a valid ONNX model"),
    ("corrupt", [], "not a valid ONNX model"),
    ("col2im", [], "TVM's ONNX importer does not support the operator\\(s\\) Col2Im"),
    ("ints", [], "model input 'x' has ONNX element type 6: only float inputs"),
    ("good", [], "model input 'image' has shape \\[None, 3, 12, 12\\] \\(symbolic dimensions\\)"),
    ("good", ["model.input_shapes=[[1,3,12,12],[1,3]]"], "2 shape\\(s\\) for 1 input\\(s\\) \\(image\\)"),
    ("good", ["model.input_shapes=[[1,0]]"], "model.input_shapes\\[0\\]=\\[1, 0\\]: must be a list"),
])
def test_a_bad_onnx_model_is_one_line_before_any_run(onnx_file, tmp_path, case, extra, message):
    path = onnx_file if case == "good" else _bad_files(tmp_path, onnx_file)[case]
    with pytest.raises(UserError, match=message):
        preflight(["model=onnx", f"model.path={path}", *extra, f"workdir={tmp_path}"])
    assert not (tmp_path / "mlflow.db").exists()
