"""The ``model`` group: every model a run can tune, as typed settings (``model=<name>``).

- zoo models (``alexnet``, ``vgg16``, ``resnet18``, ``mobilenet_v1``, ``yolo_v1``, ``overfeat``:
  :mod:`tunebench.datasets.zoo`): batch 1, 3x224x224 float32 (YOLO-v1: 448x448), written in PyTorch;
  BatchNorm is folded into the convolutions, the model imported into Relax and fused; the tasks are
  the unique conv2d / depthwise conv2d / dense fused functions, each with its weight (occurrences);
- ``layers``: conv2d / dense layers given as specs (:mod:`tunebench.datasets.layer_spec`);
- ``accel_paper``: the matrix product and convolution of [Dinh-MLArchSys23] §III-A as layer specs
  (``target=accel``; they run on every target that takes layer specs);
- ``dosa_firesim``: DOSA's layers with the mappings FireSim measured on Gemmini's RTL ([Hong-MICRO23];
  ``data/dosa_firesim/``), replayed by ``target=accel`` (``targets/accel/dosa_target.py``);
- ``ops``: single operators of FlexTensor's suite (:mod:`tunebench.datasets.operators`);
- ``hls_<kernel>``: an FPGA kernel's directive space (``datasets/hls/<kernel>.yaml``), measured by
  the FPGA targets;
- graph models (``randwire_cifar10``, ``randwire_cifar100``, ``darts_v2``, ``graph_<zoo model>``:
  :mod:`tunebench.datasets.graph_models`): networks as graphs of operations, scheduled by ``target=memory``.

A model's ``workload`` says which targets can measure its tasks (``Target.workloads``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

from omegaconf import MISSING

from tunebench.config.experiment import ModelSettings
from tunebench.config.knobs import NAME, NONNEG_INT, bad, choice, is_int, knob, rule
from tunebench.config.plugins import GROUPS, PATH_FORM, is_import_path
from tunebench.datasets.graph_models import graph_options

HLS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hls")
HLS_KERNELS = tuple(sorted(f[:-5] for f in os.listdir(HLS_DIR) if f.endswith(".yaml")))
ZOO = ("alexnet", "vgg16", "resnet18", "mobilenet_v1", "yolo_v1", "overfeat")  # datasets.zoo.MODELS
SEED_DOC = "weight initialization seed (weights do not change tuning; they make outputs checkable)"


@dataclass
class ZooModel(ModelSettings):
    """A network of the zoo (:data:`tunebench.datasets.zoo.MODELS`), random weights from ``seed``."""

    name: str = knob("resnet18", choice(*ZOO), "the network")
    seed: int = knob(0, NONNEG_INT, SEED_DOC)


@dataclass
class LayersModel(ModelSettings):
    """Layers given as specs (``model.layers=[{in_channels: 32, height: 28, ...}, ...]``)."""

    name: str = knob("layers", NAME, "the model")
    seed: int = knob(0, NONNEG_INT, SEED_DOC)
    layers: list[Any] = knob(
        [{"in_channels": 32, "height": 28, "width": 28, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1},
         {"in_channels": 32, "height": 28, "width": 28, "out_channels": 64, "kernel": 1, "stride": 2, "padding": 0}],
        None, "conv2d or dense layer specs (datasets/layer_spec.py); default: two small ResNet-18-style layers "
              "(28x28 stage, scaled down)")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.layer_spec import check_layer_list

        check_layer_list(self.layers)


@dataclass
class OpsModel(ModelSettings):
    """Single operators of FlexTensor's suite ([Zheng-ASPLOS20] §6; datasets/operators.py), each case a
    task, each checked against PyTorch."""

    name: str = knob("ops", NAME, "the model")
    operators: list[str] = knob(["c2d"], None, "which operators (abbreviations: datasets/operators.py); c2d: the "
                                                "15 YOLO-v1 layers of [Zheng-ASPLOS20] Table 4")
    cases: list[int] = knob([], None, "1-based case numbers taken from every listed operator; [] = all of them")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.operators import select_cases

        select_cases(self.operators, self.cases)


def _is_shape(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(is_int(d) and 0 < d <= 65536 for d in v)


@dataclass
class TorchModel(ModelSettings):
    """Any PyTorch module of yours: ``factory`` is an importable callable returning an ``nn.Module``
    (called without arguments, torch's generator seeded with ``seed``), run on one random input of
    ``input_shape``. Loading it runs your code, by design."""

    name: str = knob("torch", NAME, "the model")
    factory: str = knob(MISSING, rule(is_import_path, f"must be an import path {PATH_FORM} (a callable that "
                                                      "returns an nn.Module)"),
                        "the callable that builds the module: package.module:function")
    input_shape: list[int] = knob([1, 3, 224, 224], rule(_is_shape, "must be a non-empty list of positive integers "
                                                                     "up to 65536"),
                                  "the example input's shape (batch first); its size is bounded by this machine's "
                                  "memory, and so is every tensor its forward makes")
    seed: int = knob(0, NONNEG_INT, "seeds torch's generator while the factory runs and the example input")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.zoo import check_factory

        check_factory(self.factory, f"{prefix}.factory")


@dataclass
class OnnxModel(ModelSettings):
    """An ONNX file (datasets/onnx_file.py), imported through TVM's ONNX frontend (targets/tvm/workloads/); its
    output is checked against ONNX Runtime's, which is also a row of the end-to-end step."""

    name: str = knob("onnx", NAME, "the model")
    path: str = knob(MISSING, NAME, "the .onnx file (data only: nothing in it is executed)")
    input_shapes: list[Any] = knob([], None, "one shape per input, in the graph's order, for inputs with "
                                              "symbolic dimensions (default, []: the shapes the file declares)")
    seed: int = knob(0, NONNEG_INT, "seeds the random example input")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.onnx_file import check_onnx

        for i, shape in enumerate(self.input_shapes):
            if not (isinstance(shape, list) and shape and all(is_int(d) and 0 < d <= 65536 for d in shape)):
                raise bad(f"{prefix}.input_shapes[{i}]", shape, "must be a list of positive integers up to 65536")
        check_onnx(self.path, self.input_shapes)


@dataclass
class MeasuredModel(ModelSettings):
    """A space measured once and replayed (``target=replay``): a tunebench space file or a Kernel Tuner
    cache, one task."""

    workload: ClassVar[str] = "measured_space"
    name: str = knob("measured", NAME, "the model")
    path: str = knob("kernel_tuner/convolution_MI50.json.gz", NAME,
                     "a space file (python -m tunebench space measure: .jsonl or .jsonl.gz) or a Kernel Tuner cache "
                     "(.json or .json.gz); a relative path that is no file names a shipped one under data/ "
                     "(spaces/: this project's CPU spaces; kernel_tuner/: GPU caches, convolution_milo_<GPU>.json.gz and "
                     "dedispersion_milo_<GPU>.json.gz for A100, A4000, MI250X, W6600, and the default, Kernel Tuner's "
                     "convolution kernel on an AMD MI50)")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.space_file import read_measured

        read_measured(self.path)

    def run_label(self) -> str:
        """``measured:<file name without extensions>``: each measured space its own leaderboard group."""
        return f"{self.name}:{os.path.basename(self.path).split('.json')[0]}"


@dataclass
class KernelModel(ModelSettings):
    """An FPGA kernel: its directive space (datasets/hls/<kernel>.yaml), one task, measured by an FPGA
    target."""

    workload: ClassVar[str] = "hls_kernel"
    name: str = knob("hls_gemm", NAME, "the model")
    kernel: str = knob("gemm", choice(*HLS_KERNELS), "the kernel (datasets/hls/<kernel>.yaml)")


@dataclass
class RecordedModel(ModelSettings):
    """A design space measured by others (data/fpga_recorded/: HGBO-DSE's MachSuite kernels on Vivado,
    Spector's OpenCL kernels on a DE5 board), one task, replayed by ``target=table``."""

    workload: ClassVar[str] = "fpga_recorded"
    name: str = knob("machsuite_gemm", NAME, "the model")
    kernel: str = knob("machsuite_gemm", NAME, "the recorded design space (data/fpga_recorded/MANIFEST.json)")

    def check(self, prefix: str) -> None:
        from tunebench.datasets.fpga_recorded import entry, verify

        entry(self.kernel)
        verify(self.kernel)


def _layer_numbers(v) -> bool:
    return isinstance(v, list) and len(set(v)) == len(v) and all(is_int(n) and n > 0 for n in v)


@dataclass
class DosaModel(ModelSettings):
    """DOSA's FireSim measurements of Gemmini ([Hong-MICRO23]; data/dosa_firesim/): one task per layer, whose
    space is the layer's recorded mappings that ``target=accel`` can express, at fidelities ``zigzag`` (ZigZag's
    cycles) and ``firesim`` (the cycles FireSim measured, replayed)."""

    workload: ClassVar[str] = "dosa_firesim"
    name: str = knob("dosa_firesim", NAME, "the model")
    layers: list[int] = knob([], rule(_layer_numbers, "must be a list of distinct positive integers"),
                             "DOSA layer numbers to tune (1-based, in order of each layer's first row of dataset.csv; "
                             "1..71); [] = every layer with a mapping target=accel can express (65)")


def _recorded_options() -> dict:
    from tunebench.datasets.fpga_recorded import recorded_names

    return {k: RecordedModel(name=k, kernel=k) for k in recorded_names()}


#: [Dinh-MLArchSys23] §III-A's problems as layer specs: the 64 x 512 x 128 matrix product (M = batch 64,
#: K = in_features 128, N = out_features 512) and a 2D convolution; the paper does not give the
#: convolution's shape, ours is ResNet-18's conv4_x 3x3 layer (256 -> 256 channels at 14 x 14), whose
#: weights alone exceed Gemmini's 256 KiB scratchpad, so that tiling matters
ACCEL_PAPER_LAYERS = [{"batch": 64, "in_features": 128, "out_features": 512, "relu": False},
                      {"in_channels": 256, "height": 14, "width": 14, "out_channels": 256, "kernel": 3, "stride": 1,
                       "padding": 1}]

#: option name -> its settings (the ``model`` group's options)
MODEL_OPTIONS: dict[str, ModelSettings] = {
    **{name: ZooModel(name=name) for name in ZOO},
    "layers": LayersModel(),
    "accel_paper": LayersModel(name="accel_paper", layers=ACCEL_PAPER_LAYERS),
    "dosa_firesim": DosaModel(),
    "ops": OpsModel(),
    "torch": TorchModel(),
    "onnx": OnnxModel(),
    "measured": MeasuredModel(),
    **{f"hls_{k}": KernelModel(name=f"hls_{k}", kernel=k) for k in HLS_KERNELS},
    **_recorded_options(),
    **graph_options(ZOO),
}


@cache
def installed_models() -> tuple[str, ...]:
    """The models installed packages declare (entry point group ``tunebench.models``: name =
    ``package.module:function``, a callable returning an ``nn.Module``), added as ``model=<name>``
    options (:class:`TorchModel`); returns their names. Nothing is imported here: a factory that fails
    is one error line when a run asks for its model. A name a shipped model has is refused (a warning)."""
    import sys
    from importlib.metadata import entry_points

    added = []
    for ep in entry_points(group=GROUPS["model"]):
        if ep.name in MODEL_OPTIONS and not isinstance(MODEL_OPTIONS[ep.name], TorchModel):
            print(f"warning: entry point {GROUPS['model']}:{ep.name}: model={ep.name} is a shipped model; "
                  "yours is not available", file=sys.stderr, flush=True)
            continue
        MODEL_OPTIONS[ep.name] = TorchModel(name=ep.name, factory=ep.value)
        added.append(ep.name)
    return tuple(added)


def model_settings(model, default: str | None = None) -> ModelSettings:
    """``model`` as typed settings: settings as they are; a mapping (a script's dict, a saved run's
    ``model`` config) typed and checked like a composed config, its option found by ``name``
    (``default`` when it names none)."""
    if isinstance(model, ModelSettings):
        return model
    from tunebench.config.load import typed

    name = model.get("name", default)
    if name not in MODEL_OPTIONS:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(MODEL_OPTIONS)}")
    return typed(type(MODEL_OPTIONS[name]), {"name": name, **model}, "model")
