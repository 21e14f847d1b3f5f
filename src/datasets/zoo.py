"""Model zoo: standard ImageNet CNNs written as plain PyTorch modules, plus a per-layer model.

Every zoo model takes one NCHW float32 input, ``(1, 3, 224, 224)`` unless its class says otherwise
(``input_shape``: YOLO-v1 448x448, OverFeat 231x231), and returns its logits (YOLO-v1: its detection
tensor, 1470 values). Weights are random but deterministic: ``build_model(name, seed)`` seeds
``torch`` before constructing the module, so the same seed gives bit-identical parameters
(no downloads are possible here, and tuning never depends on weight values).

Models (layer shapes as in the original papers / torchvision):

- ``alexnet``: torchvision's AlexNet (64-192-384-256-256 channels, 11x11/4 pad 2, 5x5 pad 2,
  3x3 pad 1, 3x3/2 max pools, adaptive avgpool 6x6, FC 9216-4096-4096-1000, no dropout).
- ``vgg16``: VGG configuration D (13 3x3 convs pad 1, 5 max pools), FC 25088-4096-4096-1000.
- ``resnet18``: ResNet-18 with BatchNorm and basic blocks (7x7/2 stem, 3x3/2 max pool,
  stages of 64/128/256/512 channels, 1x1/2 downsample convs), global avgpool, FC 512-1000.
- ``yolo_v1``, ``overfeat``: the networks of [Zheng-ASPLOS20] §6.6 (:mod:`.yolo_overfeat`).
- ``mobilenet_v1``: MobileNet-v1 (Howard et al. 2017, width 1.0): 3x3/2 conv 32, then 13
  depthwise-separable blocks (dw3x3+BN+ReLU, pw1x1+BN+ReLU), global avgpool, FC 1024-1000.

``layers_model(shapes)`` builds one independent conv(+bias)(+ReLU) per shape dict, so every
layer becomes one task after import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn as nn

from tunebench.datasets.layer_spec import check_layer_list, is_dense
from tunebench.datasets.yolo_overfeat import OverFeat, YOLOv1

IMAGENET_INPUT = (1, 3, 224, 224)
NUM_CLASSES = 1000


class AlexNet(nn.Module):
    """torchvision AlexNet without dropout: (N, 3, 224, 224) -> (N, 1000)."""

    def __init__(self, num_classes: int = NUM_CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


VGG16_CFG: list[int | str] = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
                              512, 512, 512, "M", 512, 512, 512, "M"]
"""VGG configuration D: output channels of each 3x3 conv, ``"M"`` = 2x2/2 max pool."""


class VGG16(nn.Module):
    """VGG-16 (configuration D) without BN or dropout: (N, 3, 224, 224) -> (N, 1000)."""

    def __init__(self, num_classes: int = NUM_CLASSES):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in VGG16_CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, stride=2))
            else:
                layers += [nn.Conv2d(cin, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                cin = int(v)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv+BN, identity or 1x1/stride conv+BN shortcut, ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016, torchvision layout): (N, 3, 224, 224) -> (N, 1000)."""

    def __init__(self, num_classes: int = NUM_CLASSES):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


MOBILENET_V1_BLOCKS: list[tuple[int, int]] = [
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
]
"""MobileNet-v1 depthwise-separable blocks: (pointwise output channels, depthwise stride)."""


def _conv_bn_relu(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class MobileNetV1(nn.Module):
    """MobileNet-v1, width multiplier 1.0: (N, 3, 224, 224) -> (N, 1000)."""

    def __init__(self, num_classes: int = NUM_CLASSES):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu(3, 32, 3, 2)]
        cin = 32
        for cout, stride in MOBILENET_V1_BLOCKS:
            layers.append(_conv_bn_relu(cin, cin, 3, stride, groups=cin))  # depthwise 3x3
            layers.append(_conv_bn_relu(cin, cout, 1, 1))                   # pointwise 1x1
            cin = cout
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


MODELS: dict[str, Callable[[], nn.Module]] = {
    "alexnet": AlexNet,
    "vgg16": VGG16,
    "resnet18": ResNet18,
    "mobilenet_v1": MobileNetV1,
    "yolo_v1": YOLOv1,
    "overfeat": OverFeat,
}
"""Zoo registry: model name -> constructor taking no arguments (ImageNet, 1000 classes)."""


def init_batchnorm(module: nn.Module) -> None:
    """Give BatchNorm non-trivial running statistics, so BN folding is actually exercised.

    Conv/Linear keep PyTorch's default (seeded) Kaiming-uniform init.
    """
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)


def _seeded(ctor: Callable[[], nn.Module], seed: int) -> nn.Module:
    """Construct ``ctor()`` with torch's global RNG seeded, restoring the RNG state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = ctor()
        init_batchnorm(module)
    return module


def build_model(name: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """Build a zoo model in eval mode and a deterministic example input.

    Args:
        name: one of ``MODELS``.
        seed: seeds the weights and the example input.

    Returns:
        ``(module.eval(), x)`` with ``x`` a float32 tensor of the model's ``input_shape``
        (``(1, 3, 224, 224)`` unless the class sets one).

    Raises:
        ValueError: unknown ``name`` (one-line message listing the valid names).
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))}")
    module = _seeded(MODELS[name], seed).eval()
    gen = torch.Generator().manual_seed(seed)
    return module, torch.randn(getattr(module, "input_shape", IMAGENET_INPUT), generator=gen)


# ---- a user's module -------------------------------------------------------------------------

_CHECKED: dict[str, str] = {}  # factory -> class name of what it returned (checked once per process)


def _call_factory(path: str, key: str, seed: int) -> nn.Module:
    from tunebench.config.plugins import load_object
    from tunebench.errors import UserError

    factory = load_object(path, key)
    if not callable(factory):
        raise UserError(f"{key}={path}: {type(factory).__name__} is not callable")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            module = factory()
        except Exception as exc:  # the user's code: its error, in one line
            raise UserError(f"{key}={path}: calling it raised {type(exc).__name__}: {exc}".splitlines()[0]) from None
    if not isinstance(module, nn.Module):
        raise UserError(f"{key}={path}: returned a {type(module).__name__}, not a torch.nn.Module")
    return module


def check_factory(path: str, key: str) -> None:
    """Raise :class:`~tunebench.errors.UserError` unless ``path`` imports and returns an ``nn.Module``."""
    if path not in _CHECKED:
        _CHECKED[path] = type(_call_factory(path, key, 0)).__name__


def factory_model(path: str, input_shape: Sequence[int], seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """The module ``path`` (``package.module:function``) builds, in eval mode, and a random float32
    input of ``input_shape`` (both seeded by ``seed``)."""
    module = _call_factory(path, "model.factory", seed).eval()
    gen = torch.Generator().manual_seed(seed)
    return module, torch.randn(tuple(input_shape), generator=gen)


# ---- per-layer model -------------------------------------------------------------------------

# Layer specs (keys, defaults, checks): :mod:`tunebench.datasets.layer_spec`.


class LayersModel(nn.Module):
    """Independent conv2d(+bias)(+ReLU) or dense(+bias)(+ReLU) layers, one per shape dict.

    ``forward`` takes one input per layer, as separate positional arguments
    (``model(x0, x1, ...)``, ``x_i`` of shape ``(batch, in_channels, height, width)``, dense
    ``(batch, in_features)``), and returns the tuple of layer outputs. Layers do not feed each
    other, so every layer becomes one fused ``conv2d[_add][_relu]`` (``matmul_add[_relu]``) task; identical layers are deduplicated by
    MetaSchedule into one task whose weight is the number of copies.
    """

    def __init__(self, shapes: Sequence[dict]):
        super().__init__()
        self.shapes = check_layer_list(list(shapes))
        self.convs = nn.ModuleList(
            nn.Linear(s["in_features"], s["out_features"]) if is_dense(s) else
            nn.Conv2d(s["in_channels"], s["out_channels"], s["kernel"], stride=s["stride"],
                      padding=s["padding"], groups=s["groups"], bias=True) for s in self.shapes)

    def forward(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = []
        for conv, s, x in zip(self.convs, self.shapes, xs):
            y = conv(x)
            outs.append(torch.relu(y) if s["relu"] else y)
        return tuple(outs)

    def example_inputs(self, seed: int = 0) -> tuple[torch.Tensor, ...]:
        """One deterministic random input per layer, shape ``(batch, in_channels, height, width)``
        (dense: ``(batch, in_features)``)."""
        gen = torch.Generator().manual_seed(seed)
        return tuple(torch.randn((s["batch"], s["in_features"]) if is_dense(s) else
                                 (s["batch"], s["in_channels"], s["height"], s["width"]), generator=gen)
                     for s in self.shapes)


def layers_model(shapes: Sequence[dict], seed: int = 0) -> tuple[LayersModel, tuple[torch.Tensor, ...]]:
    """Build a :class:`LayersModel` (eval mode) and its example inputs (a tuple, one per layer)."""
    module = _seeded(lambda: LayersModel(shapes), seed).eval()
    return module, module.example_inputs(seed)
