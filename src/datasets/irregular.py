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
- NASNet-A ([Zoph-CVPR18]) and PNASNet-5 ([Liu-ECCV18]) normal cells at the sizes of their large
  ImageNet models (``nasnetalarge``: C = 168 on 42x42 with 336- and 1008-channel inputs;
  ``pnasnet5large``: C = 216 on 42x42 with 540- and 1080-channel inputs), written here from the papers'
  cell diagrams (timm's models of the same names could not be installed here: docs/DESIGN_NOTES.md),
  also with the next cell's preprocessing as separate ops.

Each DARTS operation, each stem and each RandWire node's ReLU - separable conv - BN is one graph node (a
leaf module when traced: :data:`LEAVES`); additions, concatenations and the 1x1 preprocessing are graph
nodes of their own. A RandWire node's input sum and a stage's output mean are binary additions as the
forward runs them (and as TFLite's ADD runs them), each a graph node; with :data:`LEAVES_WHOLE_SUMS` a
RandWire node and the mean are one graph node each, the sum inside.
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


# ---- NASNet-A and PNASNet-5 cells ----------------------------------------------------------------
class Branch(nn.Module):
    """NASNet's and PNASNet's separable branch: (ReLU - depthwise kxk - pointwise 1x1 - BN) twice."""

    def __init__(self, c: int, kernel: int):
        super().__init__()
        self.op = SepConv(c, c, kernel, 1, repeat=2)

    def forward(self, x):
        return self.op(x)


class Pool(nn.Module):
    """3x3 stride-1 pooling that keeps the size (average without the padding, or max)."""

    def __init__(self, kind: str):
        super().__init__()
        self.op = (nn.AvgPool2d(3, 1, 1, count_include_pad=False) if kind == "avg" else nn.MaxPool2d(3, 1, 1))

    def forward(self, x):
        return self.op(x)


class _CellWithNext(nn.Module):
    """A cell on two inputs (the two previous cells' outputs), its inputs' 1x1 preprocessing
    (ReLUConvBN), and the next cell's 1x1 preprocessing of its concatenated output written as separate
    ReLU, conv and BN nodes (the concat -> conv pattern of [Ahn-PhD] §3.4.3)."""

    def __init__(self, c_prev_prev: int, c_prev: int, c: int, n_out: int):
        super().__init__()
        self.pre_prev, self.pre = ReLUConvBN(c_prev_prev, c), ReLUConvBN(c_prev, c)
        self.next_relu = nn.ReLU()
        self.next_conv = nn.Conv2d(c * n_out, c, 1, bias=False)
        self.next_bn = nn.BatchNorm2d(c)

    def next_cell(self, y):
        return self.next_bn(self.next_conv(self.next_relu(y)))


class NASNetANormalCell(_CellWithNext):
    """NASNet-A's normal cell ([Zoph-CVPR18] Fig. 4): five blocks on h (this cell's previous output, after
    its 1x1) and h_prev (the one before), output the concatenation of h_prev and the five blocks."""

    def __init__(self, c_prev_prev: int, c_prev: int, c: int):
        super().__init__(c_prev_prev, c_prev, c, 6)
        self.b0 = nn.ModuleList([Branch(c, 5), Branch(c, 3)])  # sep5x5(h) + sep3x3(h_prev)
        self.b1 = nn.ModuleList([Branch(c, 5), Branch(c, 3)])  # sep5x5(h_prev) + sep3x3(h_prev)
        self.b2 = Pool("avg")                                   # avg3x3(h) + h_prev
        self.b3 = nn.ModuleList([Pool("avg"), Pool("avg")])    # avg3x3(h_prev) + avg3x3(h_prev)
        self.b4 = Branch(c, 3)                                  # sep3x3(h) + h

    def forward(self, x_prev_prev, x_prev):
        p, h = self.pre_prev(x_prev_prev), self.pre(x_prev)
        y0 = self.b0[0](h) + self.b0[1](p)
        y1 = self.b1[0](p) + self.b1[1](p)
        y2 = self.b2(h) + p
        y3 = self.b3[0](p) + self.b3[1](p)
        y4 = self.b4(h) + h
        return self.next_cell(torch.cat([p, y0, y1, y2, y3, y4], dim=1))


class PNASNetCell(_CellWithNext):
    """PNASNet-5's cell ([Liu-ECCV18] Fig. 1), stride 1: five blocks on the left input p (the older one)
    and the right input h, output the concatenation of the five blocks."""

    def __init__(self, c_prev_prev: int, c_prev: int, c: int):
        super().__init__(c_prev_prev, c_prev, c, 5)
        self.b0 = nn.ModuleList([Branch(c, 5), Pool("max")])   # sep5x5(p) + max3x3(p)
        self.b1 = nn.ModuleList([Branch(c, 7), Pool("max")])   # sep7x7(h) + max3x3(h)
        self.b2 = nn.ModuleList([Branch(c, 5), Branch(c, 3)])  # sep5x5(h) + sep3x3(h)
        self.b3 = nn.ModuleList([Branch(c, 3), Pool("max")])   # sep3x3(block 2) + max3x3(h)
        self.b4 = Branch(c, 3)                                  # sep3x3(p) + h

    def forward(self, x_prev_prev, x_prev):
        p, h = self.pre_prev(x_prev_prev), self.pre(x_prev)
        y0 = self.b0[0](p) + self.b0[1](p)
        y1 = self.b1[0](h) + self.b1[1](h)
        y2 = self.b2[0](h) + self.b2[1](h)
        y3 = self.b3[0](y2) + self.b3[1](h)
        y4 = self.b4(p) + h
        return self.next_cell(torch.cat([y0, y1, y2, y3, y4], dim=1))


#: module classes that stay one graph node each when traced
LEAVES = (SepConv, FactorizedReduce, ReLUConvBN, Skip, Branch, Pool)
#: the same, with a RandWire node's input sum and a stage's output mean inside one graph node
LEAVES_WHOLE_SUMS = (*LEAVES, RandWireNode, Mean)


def init_bn(module: nn.Module) -> None:
    """Non-trivial BatchNorm statistics (outputs of different orders and rewrites are compared)."""
    from tunebench.datasets.zoo import init_batchnorm

    init_batchnorm(module)
