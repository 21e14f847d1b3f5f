"""The networks HMCOS was evaluated on ([Wang-DAC22] §4), built here from their description as whole
PyTorch networks (one graph each; written here, nothing taken from HMCOS's scripts, whose repository has
no licence):

- ``hmcos_randwire``: RandWire ([Xie-ICCV19]) at ImageNet size, C = 78: a stem of two 3x3/2 convs
  (C/2, then C channels; the first followed by a ReLU), three cells of C, 2C, 4C channels, each a
  32-node WS(k=4, p=0.75) random graph, then a 1x1 conv to 1280 channels, global average pooling and
  a 1000-way dense layer. A cell node aggregates several inputs by a weighted sum (the inputs stacked,
  times the sigmoid of learned weights), then ReLU - separable 3x3 conv (depthwise, pointwise); nodes
  without a predecessor read the cell input at stride 2; the cell output is the mean of the stacked
  nodes without a successor. The WS graph: the ring lattice of n nodes, each joined to its k/2
  neighbours on either side; then for each node i and each of its k/2 clockwise edges, with
  probability p the edge is moved to a node i is not joined to (uniform); edges point from the lower to
  the higher index.
- ``hmcos_<nasnet|amoebanet|darts>_<cifar|imagenet>``: cell-stacked NAS networks ([Zoph-CVPR18],
  [Real-AAAI19], [Liu-ICLR19]): a stem conv (CIFAR: 3x3, 32 channels on 32x32; ImageNet: 3x3/2 on
  224x224), then N normal cells, a reduction cell (channels doubled), N normal, a reduction, N normal
  (ImageNet: two reduction cells first), then ReLU, global pooling and a dense layer. A cell reads the
  two previous cells' outputs, each through a 1x1 squeeze (ReLU - conv) to the cell's width (the older
  one through a factorized reduction, two offset 1x1/2 convs concatenated and batch-normed, when its size
  differs); each block adds two operations of the genotype; the cell output concatenates the listed
  blocks. N and the widths are those the paper's networks used: NASNet (6, 32) / (4, 11), AmoebaNet
  (6, 36) / (4, 12.5), DARTS (6, 36) / (4, 12) for CIFAR / ImageNet.

Batch normalization after a convolution is folded into it (a conv with bias), as HMCOS's models were
(so it is no graph node); a dilated separable conv is computed undilated, which does not change any
tensor's size.
"""

from __future__ import annotations

import torch
import torch.nn as nn

HMCOS_RANDWIRE = {"channels": 78, "cells": 3, "nodes": 32, "k": 4, "p": 0.75, "side": 224}

# genotypes: per block two (operation, input) pairs (input 0: the older cell input, 1: the newer, 2+: blocks)
GENOTYPES = {
    "nasnet": {"normal": [[("sep5x5", 1), ("sep3x3", 0)], [("sep5x5", 0), ("sep3x3", 0)], [("avg3x3", 1), ("id", 0)],
                          [("avg3x3", 0), ("avg3x3", 0)], [("sep3x3", 1), ("id", 1)]],
               "normal_concat": [0, 2, 3, 4, 5, 6],
               "reduction": [[("sep5x5", 1), ("sep7x7", 0)], [("max3x3", 1), ("sep5x5", 0)],
                             [("avg3x3", 1), ("sep5x5", 0)], [("id", 3), ("avg3x3", 2)], [("sep3x3", 2), ("max3x3", 1)]],
               "reduction_concat": [3, 4, 5, 6]},
    "amoebanet": {"normal": [[("avg3x3", 0), ("max3x3", 0)], [("id", 0), ("avg3x3", 1)], [("sep5x5", 2), ("sep3x3", 1)],
                             [("sep3x3", 2), ("id", 1)], [("avg3x3", 4), ("sep3x3", 0)]],
                  "normal_concat": [3, 5, 6],
                  "reduction": [[("avg3x3", 0), ("sep3x3", 1)], [("max3x3", 1), ("max3x3", 0)],
                                [("max3x3", 0), ("sep7x7", 2)], [("sep7x7", 0), ("avg3x3", 1)],
                                [("sep3x3", 3), ("1x77x1", 0)]],
                  "reduction_concat": [4, 5, 6]},
    "darts": {"normal": [[("sep3x3", 0), ("sep3x3", 1)], [("sep3x3", 0), ("sep3x3", 1)], [("sep3x3", 1), ("id", 0)],
                         [("id", 0), ("dil3x3", 2)]],
              "normal_concat": [2, 3, 4, 5],
              "reduction": [[("max3x3", 0), ("max3x3", 1)], [("id", 2), ("max3x3", 1)], [("max3x3", 0), ("id", 2)],
                            [("id", 2), ("max3x3", 1)]],
              "reduction_concat": [2, 3, 4, 5]},
}
# (stacked normal cells N, initial width) per network and dataset
NAS_SIZES = {("nasnet", "cifar"): (6, 32), ("nasnet", "imagenet"): (4, 11), ("amoebanet", "cifar"): (6, 36),
             ("amoebanet", "imagenet"): (4, 12.5), ("darts", "cifar"): (6, 36), ("darts", "imagenet"): (4, 12)}
NAS_NETS = {f"hmcos_{net}_{data}": (net, data) for net, data in NAS_SIZES}


def ws_edges(n: int, k: int, p: float, seed: int) -> list[tuple[int, int]]:
    """The WS(n, k, p) graph as the module text describes, edges ``(lo, hi)`` sorted."""
    import networkx as nx
    import numpy as np

    rng = np.random.default_rng(seed)
    g = nx.circulant_graph(n, range(1, k // 2 + 1))
    for i in range(n):
        for j in range(1, k // 2 + 1):
            if rng.random() < p:
                free = [x for x in range(n) if x != i and not g.has_edge(i, x)]
                if g.has_edge(i, (i + j) % n):
                    g.remove_edge(i, (i + j) % n)
                g.add_edge(i, int(free[rng.integers(len(free))]))
    return sorted((min(a, b), max(a, b)) for a, b in g.edges())


class SepConv(nn.Module):
    """Keras's SeparableConv2D with the following batch norm folded: depthwise kxk, pointwise 1x1 (bias)."""

    def __init__(self, cin: int, cout: int, kernel, stride: int = 1):
        super().__init__()
        kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
        self.dw = nn.Conv2d(cin, cin, kernel, stride, (kernel[0] // 2, kernel[1] // 2), groups=cin, bias=False)
        self.pw = nn.Conv2d(cin, cout, 1)

    def forward(self, x):
        return self.pw(self.dw(x))


class WeightedSum(nn.Module):
    """RandWire's aggregation: the inputs stacked on a last axis, times sigmoid(weights)."""

    def __init__(self, n: int):
        super().__init__()
        self.register_buffer("w", torch.sigmoid(torch.randn(n)))

    def forward(self, *xs):
        return torch.matmul(torch.stack(xs, -1), self.w)


class RandWireCell(nn.Module):
    def __init__(self, cin: int, cout: int, preds: list[list[int]]):
        super().__init__()
        self.preds = preds
        self.aggs = nn.ModuleList(WeightedSum(max(len(ps), 1)) for ps in preds)
        self.relus = nn.ModuleList(nn.ReLU() for _ in preds)
        self.convs = nn.ModuleList(SepConv(cout if ps else cin, cout, 3, 1 if ps else 2) for ps in preds)

    def forward(self, x):
        outs = []
        for i, ps in enumerate(self.preds):
            y = self.aggs[i](*(outs[j] for j in ps)) if len(ps) > 1 else (outs[ps[0]] if ps else x)
            outs.append(self.convs[i](self.relus[i](y)))
        sinks = [outs[i] for i in range(len(self.preds)) if not any(i in q for q in self.preds)]
        return torch.stack(sinks).mean(0)


class RandWireNet(nn.Module):
    """HMCOS's RandWire network (module text)."""

    def __init__(self, channels: int = 78, cells: int = 3, nodes: int = 32, k: int = 4, p: float = 0.75, seed: int = 0):
        super().__init__()
        c = channels
        self.stem = nn.Sequential(nn.Conv2d(3, c // 2, 3, 2, 1), nn.ReLU(), nn.Conv2d(c // 2, c, 3, 2, 1))
        self.graphs = []
        cells_ = []
        for i in range(cells):
            preds: list[list[int]] = [[] for _ in range(nodes)]
            for lo, hi in ws_edges(nodes, k, p, seed + i):
                preds[hi].append(lo)
            self.graphs.append(preds)
            cells_.append(RandWireCell(c * 2 ** max(i - 1, 0), c * 2 ** i, preds))
        self.cells = nn.ModuleList(cells_)
        self.head = nn.Conv2d(c * 2 ** (cells - 1), 1280, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(1280, 1000)

    def forward(self, x):
        x = self.stem(x)
        for cell in self.cells:
            x = cell(x)
        return self.fc(torch.flatten(self.pool(self.head(x)), 1))


def _op(name: str, c: int, stride: int) -> nn.Module | None:
    """One genotype operation on c channels (None: the identity)."""
    if name == "id":
        return None
    if name.startswith("sep"):
        k = int(name[3])
        return nn.Sequential(nn.ReLU(), SepConv(c, c, k, stride), nn.ReLU(), SepConv(c, c, k))
    if name == "dil3x3":
        return nn.Sequential(nn.ReLU(), SepConv(c, c, 3))
    if name == "1x77x1":
        return nn.Sequential(nn.Conv2d(c, c, (1, 7), stride, (0, 3)), nn.Conv2d(c, c, (7, 1), 1, (3, 0)))
    size = int(name[3])
    if name.startswith("avg"):
        return nn.AvgPool2d(size, stride, size // 2, count_include_pad=False)
    return nn.MaxPool2d(size, stride, size // 2)


class FactorizedReduce(nn.Module):
    """An older input of twice the size brought to the cell's: ReLU, two 1x1/2 convs (one shifted by a
    pixel) concatenated, batch norm."""

    def __init__(self, cin: int, c: int):
        super().__init__()
        self.relu = nn.ReLU()
        self.c1, self.c2 = nn.Conv2d(cin, c // 2, 1, 2, bias=False), nn.Conv2d(cin, c // 2, 1, 2, bias=False)
        self.bn = nn.BatchNorm2d(c // 2 * 2)

    def forward(self, x):
        x = self.relu(x)
        shifted = nn.functional.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:]
        return self.bn(torch.cat([self.c1(x), self.c2(shifted)], 1))


class NasCell(nn.Module):
    def __init__(self, c_pp: int | None, c_p: int, c: int, geno: dict, reduction: bool, fit_reduce: bool):
        super().__init__()
        kind = "reduction" if reduction else "normal"
        self.blocks_geno, self.concat = geno[kind], geno[f"{kind}_concat"]
        self.squeeze = nn.Sequential(nn.ReLU(), nn.Conv2d(c_p, c, 1))
        self.fit = None if c_pp is None else (FactorizedReduce(c_pp, c) if fit_reduce else
                                              nn.Sequential(nn.ReLU(), nn.Conv2d(c_pp, c, 1)))
        self.ops = nn.ModuleList()
        self.ids = []
        for block in self.blocks_geno:
            for name, arg in block:
                op = _op(name, c, 2 if reduction and arg < 2 else 1)
                self.ids.append(op is None)
                self.ops.append(op if op is not None else nn.Identity())
        self.out_channels = c * len(self.concat)

    def forward(self, prev, cur):
        cur = self.squeeze(cur)
        prev = cur if self.fit is None else self.fit(prev)
        states, i = [prev, cur], 0
        for block in self.blocks_geno:
            pair = []
            for _, arg in block:
                pair.append(states[arg] if self.ids[i] else self.ops[i](states[arg]))
                i += 1
            states.append(pair[0] + pair[1])
        return torch.cat([states[j] for j in self.concat], 1)


class NasNet(nn.Module):
    """A cell-stacked NAS network (module text)."""

    def __init__(self, net: str, data: str):
        super().__init__()
        n, width = NAS_SIZES[(net, data)]
        geno = GENOTYPES[net]
        self.stem = nn.Conv2d(3, 32, 3, 1 if data == "cifar" else 2, 1)
        normal = ["n"] * n
        kinds = (normal + ["r"] + normal + ["r"] + normal) if data == "cifar" else \
            (["r", "r"] + normal + ["r"] + normal + ["r"] + normal)
        cells, c_pp, c_p, f, side_pp, side_p = [], None, 32, width, None, 1
        for kind in kinds:
            red = kind == "r"
            if red:
                f *= 2
            cell = NasCell(c_pp, c_p, int(f), geno, red, c_pp is not None and side_pp != side_p)
            cells.append(cell)
            side_pp, side_p = side_p, side_p * (2 if red else 1)
            c_pp, c_p = c_p, cell.out_channels
        self.cells = nn.ModuleList(cells)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_p, 100 if data == "cifar" else 1000)
        self.input_side = 32 if data == "cifar" else 224

    def forward(self, x):
        prev, cur = None, self.stem(x)
        for cell in self.cells:
            prev, cur = cur, cell(prev, cur)
        return self.fc(torch.flatten(self.pool(self.relu(cur)), 1))


#: module classes that stay one graph node each when traced (the rest is traced op by op)
LEAVES = (nn.Conv2d, nn.Linear, nn.AvgPool2d, nn.MaxPool2d, nn.BatchNorm2d, nn.AdaptiveAvgPool2d)
