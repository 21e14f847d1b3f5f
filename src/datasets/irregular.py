"""Irregularly wired networks whose cells ``target=memory`` schedules ([Ahn-PhD] Table 3.1):

- RandWire ([Xie-ICCV19]): a stage is a Watts-Strogatz graph WS(n=32, k=4, p=0.75) (networkx's
  ``connected_watts_strogatz_graph``), its edges directed from the lower to the higher node index;
  a node sums its inputs, then ReLU - separable 3x3 conv - BN; nodes without a predecessor read the
  stage input (stride 2 from stage 2 on), the stage output is the mean of the nodes without a
  successor. CIFAR sizes: stages of C, 2C, 4C channels at 32x32, 16x16, 8x8 (C = 42 for CIFAR-10, 84
  for CIFAR-100: about the weight counts of the thesis's Table 3.1, 1.2M and 4.7M, for three stages).
- DARTS ([Liu-ICLR19]): the DARTS_V2 ImageNet normal cell (genotype of the DARTS repository), C = 48,
  the first normal cell after the ImageNet stem (56x56 and 28x28 inputs), with the next cell's
  preprocessing (ReLU - 1x1 conv - BN on the cell's concatenated output) written as separate ops.

Each RandWire node, each DARTS operation and each stem is one graph node (a leaf module when traced:
:data:`LEAVES`); additions, concatenations and the 1x1 preprocessing are graph nodes of their own.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class SepConv(nn.Module):
    """ReLU - depthwise kxk - pointwise 1x1 - BN (RandWire's node operation; DARTS applies it twice)."""

    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, dilation: int = 1, repeat: int = 1):
        super().__init__()
        layers: list[nn.Module] = []
        for r in range(repeat):
            c_in, s = (cin, stride) if r == 0 else (cout, 1)
            pad = dilation * (kernel - 1) // 2
            layers += [nn.ReLU(), nn.Conv2d(c_in, c_in, kernel, s, pad, dilation=dilation, groups=c_in, bias=False),
                       nn.Conv2d(c_in, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.op = nn.Sequential(*layers)

    def forward(self, x):
        return self.op(x)


class RandWireNode(nn.Module):
    """Sum of the inputs, then ReLU - separable 3x3 conv - BN."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv = SepConv(cin, cout, 3, stride)

    def forward(self, *xs):
        x = xs[0]
        for y in xs[1:]:
            x = x + y
        return self.conv(x)


class Mean(nn.Module):
    """The mean of the inputs (a RandWire stage's output)."""

    def forward(self, *xs):
        x = xs[0]
        for y in xs[1:]:
            x = x + y
        return x / len(xs)


def ws_dag(n: int, k: int, p: float, seed: int) -> list[list[int]]:
    """Predecessors of each node of WS(n, k, p), edges directed from lower to higher index."""
    import networkx as nx

    g = nx.connected_watts_strogatz_graph(n, k, p, seed=seed)
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in g.edges():
        lo, hi = min(a, b), max(a, b)
        preds[hi].append(lo)
    return [sorted(ps) for ps in preds]


class RandWireStage(nn.Module):
    """One or more RandWire stages in a row (each its own WS graph; stage ``s`` has ``C * 2**(s-1)``
    channels). ``stages``: which stages (1-based, consecutive)."""

    def __init__(self, channels: int, stages: tuple[int, ...], nodes: int, k: int, p: float, seed: int):
        super().__init__()
        self.graphs, self.blocks, self.means = [], nn.ModuleList(), nn.ModuleList()
        for s in stages:
            preds = ws_dag(nodes, k, p, seed + s)
            cin, cout = channels * 2 ** (s - 2) if s > 1 else channels, channels * 2 ** (s - 1)
            stride = 1 if s == 1 else 2
            self.graphs.append(preds)
            self.blocks.append(nn.ModuleList(RandWireNode(cin if not ps else cout, cout, stride if not ps else 1)
                                             for ps in preds))
            self.means.append(Mean())
        self.input_channels = channels * 2 ** (stages[0] - 2) if stages[0] > 1 else channels

    def forward(self, x):
        for preds, block, mean in zip(self.graphs, self.blocks, self.means):
            outs = []
            for i, ps in enumerate(preds):
                outs.append(block[i](*(outs[j] for j in ps)) if ps else block[i](x))
            sinks = [outs[i] for i in range(len(preds)) if not any(i in q for q in preds)]
            x = mean(*sinks)
        return x


# DARTS_V2 (genotypes.py of the DARTS repository): (op, input state) pairs, two per intermediate node
DARTS_V2_NORMAL = [("sep_conv_3x3", 0), ("sep_conv_3x3", 1), ("sep_conv_3x3", 0), ("sep_conv_3x3", 1),
                   ("sep_conv_3x3", 1), ("skip_connect", 0), ("skip_connect", 0), ("dil_conv_3x3", 2)]
DARTS_V2_CONCAT = (2, 3, 4, 5)


class FactorizedReduce(nn.Module):
    """DARTS's stride-2 preprocessing: ReLU, two offset 1x1/2 convs concatenated, BN."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.relu = nn.ReLU()
        self.c1 = nn.Conv2d(cin, cout // 2, 1, 2, bias=False)
        self.c2 = nn.Conv2d(cin, cout // 2, 1, 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = self.relu(x)
        return self.bn(torch.cat([self.c1(x), self.c2(x[:, :, 1:, 1:])], dim=1))


class ReLUConvBN(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.op = nn.Sequential(nn.ReLU(), nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return self.op(x)


class Skip(nn.Module):
    def forward(self, x):
        return x


def _darts_op(name: str, c: int) -> nn.Module:
    if name == "sep_conv_3x3":
        return SepConv(c, c, 3, 1, repeat=2)
    if name == "dil_conv_3x3":
        return SepConv(c, c, 3, 1, dilation=2)
    return Skip()


class DartsNormalCell(nn.Module):
    """The DARTS_V2 normal cell fed by the ImageNet stem's two outputs; then the next cell's 1x1
    preprocessing of the concatenated output as separate ReLU, conv and BN nodes."""

    def __init__(self, c: int = 48):
        super().__init__()
        self.stem1 = ReLUConvBN(c, c, 2)  # 56x56 -> 28x28 (the ImageNet network's stem1: a 3x3/2 conv there)
        self.pre0 = FactorizedReduce(c, c)
        self.pre1 = ReLUConvBN(c, c)
        self.ops = nn.ModuleList(_darts_op(name, c) for name, _ in DARTS_V2_NORMAL)
        self.next_relu = nn.ReLU()
        self.next_conv = nn.Conv2d(c * len(DARTS_V2_CONCAT), c, 1, bias=False)
        self.next_bn = nn.BatchNorm2d(c)

    def forward(self, x):
        states = [self.pre0(x), self.pre1(self.stem1(x))]
        for i in range(4):
            (_, a), (_, b) = DARTS_V2_NORMAL[2 * i], DARTS_V2_NORMAL[2 * i + 1]
            states.append(self.ops[2 * i](states[a]) + self.ops[2 * i + 1](states[b]))
        y = torch.cat([states[i] for i in DARTS_V2_CONCAT], dim=1)
        return self.next_bn(self.next_conv(self.next_relu(y)))


#: module classes that stay one graph node each when traced
LEAVES = (SepConv, RandWireNode, Mean, FactorizedReduce, ReLUConvBN, Skip)


def init_bn(module: nn.Module) -> None:
    """Non-trivial BatchNorm statistics (outputs of different orders and rewrites are compared)."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
