"""The two whole networks of [Zheng-ASPLOS20] §6.6 (FlexTensor's end-to-end case study), batch 1:

- ``yolo_v1``: YOLO-v1 (Redmon et al., "You Only Look Once: Unified, Real-Time Object Detection",
  CVPR 2016, Fig. 3): 448x448 input, 24 convolutions with leaky ReLU (slope 0.1) and four 2x2 max
  pools, then FC 50176-4096 (leaky ReLU) and FC 4096-1470 (the 7x7x30 detection tensor); its 15
  distinct convolutions are [Zheng-ASPLOS20] Table 4.
- ``overfeat``: OverFeat's fast model (Sermanet et al., "OverFeat: Integrated Recognition, Localization
  and Detection using Convolutional Networks", ICLR 2014, Table 1): 231x231 input, 5 convolutions
  (96 11x11/4, 256 5x5, 512, 1024, 1024 3x3 padded) with ReLU and 2x2 max pools after the 1st, 2nd and
  5th, then FC 36864-3072-4096-1000.

No dropout (inference). Each model class has ``input_shape``, the NCHW shape of its one input.
"""

from __future__ import annotations

import torch
import torch.nn as nn

#: YOLO-v1's convolutions in order: (out channels, kernel, stride); "M" is a 2x2 max pool
_YOLO = ((64, 7, 2), "M", (192, 3, 1), "M", (128, 1, 1), (256, 3, 1), (256, 1, 1), (512, 3, 1), "M",
         *((256, 1, 1), (512, 3, 1)) * 4, (512, 1, 1), (1024, 3, 1), "M", *((512, 1, 1), (1024, 3, 1)) * 2,
         (1024, 3, 1), (1024, 3, 2), (1024, 3, 1), (1024, 3, 1))


class YOLOv1(nn.Module):
    """YOLO-v1: (1, 3, 448, 448) -> (1, 1470)."""

    input_shape = (1, 3, 448, 448)

    def __init__(self):
        super().__init__()
        layers, cin = [], 3
        for item in _YOLO:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            cout, k, s = item
            layers += [nn.Conv2d(cin, cout, k, stride=s, padding=k // 2), nn.LeakyReLU(0.1)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(7 * 7 * 1024, 4096), nn.LeakyReLU(0.1), nn.Linear(4096, 7 * 7 * 30))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class OverFeat(nn.Module):
    """OverFeat (fast model): (1, 3, 231, 231) -> (1, 1000)."""

    input_shape = (1, 3, 231, 231)

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(96, 256, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
            nn.Conv2d(256, 512, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(512, 1024, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(1024, 1024, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(nn.Linear(6 * 6 * 1024, 3072), nn.ReLU(inplace=True),
                                        nn.Linear(3072, 4096), nn.ReLU(inplace=True), nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))
