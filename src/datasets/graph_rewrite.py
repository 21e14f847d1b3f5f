"""Identity graph rewriting ([Ahn-PhD] §3.4.3, Fig. 3.9; [Ahn-MLSys20]): subgraphs replaced by
arithmetically identical ones that let a schedule free memory sooner.

- ``channel``: channel-wise partitioning of concat -> conv (Eq. 3.3-3.6). ``conv(cat(x_1..x_n))`` becomes
  ``sum_i conv_i(x_i)`` with ``conv_i`` the conv restricted to the input channels of ``x_i`` (a slice of its
  weight); the partial results are accumulated in place into the first (``add_``), the bias added last.
  An elementwise ReLU between the concat and the conv is moved onto each part (it commutes with
  concatenation).
- ``kernel``: kernel-wise partitioning of concat -> depthwise conv (Eq. 3.7-3.8): ``dw(cat(x_i))``
  becomes ``cat(dw_i(x_i))``, ``dw_i`` the kernels of ``x_i``'s channels.

A pattern is rewritten only when the concatenation (and the ReLU) has no other user. The rewritten
graph is traced again (:func:`~tunebench.datasets.graphs.annotate`); its output equals the original's
up to floating-point summation order (the memory target checks it with ``allclose``).
"""

from __future__ import annotations

import copy

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from tunebench.datasets.graphs import Graph, annotate

RULES = ("channel", "kernel")


def _is_cat(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target is not torch.cat:
        return False
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    return dim == 1 and isinstance(node.args[0], (list, tuple)) and len(node.args[0]) > 1


def _module(gm: fx.GraphModule, node: fx.Node):
    return gm.get_submodule(node.target) if node.op == "call_module" else None


def _is_relu(gm: fx.GraphModule, node: fx.Node) -> bool:
    return isinstance(_module(gm, node), nn.ReLU) or (node.op == "call_function" and node.target in (F.relu,
                                                                                                   torch.relu))


def _param(gm: fx.GraphModule, name: str, value: torch.Tensor) -> fx.Node:
    gm.register_buffer(name, value.detach().clone())
    return gm.graph.get_attr(name)


def _conv_kwargs(conv: nn.Conv2d) -> dict:
    return {"stride": conv.stride, "padding": conv.padding, "dilation": conv.dilation}


def _match(gm: fx.GraphModule, cat: fx.Node):
    """``(relu node or None, conv node, conv module)`` of a concat whose single user path ends in a conv."""
    if len(cat.users) != 1:
        return None
    nxt = next(iter(cat.users))
    relu = None
    if _is_relu(gm, nxt) and len(nxt.users) == 1:
        relu, nxt = nxt, next(iter(nxt.users))
    conv = _module(gm, nxt)
    if not isinstance(conv, nn.Conv2d) or conv.padding_mode != "zeros" or isinstance(conv.padding, str):
        return None
    return relu, nxt, conv


def _rewrite_one(gm: fx.GraphModule, cat: fx.Node, rules: tuple[str, ...], k: int) -> bool:
    found = _match(gm, cat)
    if found is None:
        return False
    relu, conv_node, conv = found
    parts = list(cat.args[0])
    depthwise = conv.groups == conv.in_channels == conv.out_channels
    rule = "kernel" if depthwise else ("channel" if conv.groups == 1 else None)
    if rule not in rules:
        return False
    g, starts = gm.graph, [0]
    for p in parts:
        starts.append(starts[-1] + int(p.meta["val_channels"]))
    w, b = conv.weight, conv.bias
    with g.inserting_before(conv_node):
        outs = []
        for i, x in enumerate(parts):
            if relu is not None:
                x = g.call_function(F.relu, (x,))
            lo, hi = starts[i], starts[i + 1]
            if rule == "channel":
                wi = _param(gm, f"rw{k}_w{i}", w[:, lo:hi])
                outs.append(g.call_function(F.conv2d, (x, wi), _conv_kwargs(conv)))
            else:
                wi = _param(gm, f"rw{k}_w{i}", w[lo:hi])
                bi = _param(gm, f"rw{k}_b{i}", b[lo:hi]) if b is not None else None
                outs.append(g.call_function(F.conv2d, (x, wi, bi), {**_conv_kwargs(conv), "groups": hi - lo}))
        if rule == "channel":
            acc = outs[0]
            for o in outs[1:]:
                acc = g.call_method("add_", (acc, o))
            if b is not None:
                acc = g.call_method("add_", (acc, _param(gm, f"rw{k}_bias", b.view(1, -1, 1, 1))))
        else:
            acc = g.call_function(torch.cat, (outs,), {"dim": 1})
    conv_node.replace_all_uses_with(acc)
    for dead in (conv_node, relu, cat):
        if dead is not None:
            g.erase_node(dead)
    return True


def _channels(gm: fx.GraphModule, graph: Graph) -> None:
    """Each node's channel count (``meta["val_channels"]``), from the graph's recorded shapes."""
    for n in gm.graph.nodes:
        shape = graph.shapes[graph.index[n.name]] if n.name in graph.index else None
        if shape and isinstance(shape[0], int) and len(shape) > 1:
            n.meta["val_channels"] = int(shape[1])


def rewrite(graph: Graph, rules: tuple[str, ...]) -> tuple[Graph, int]:
    """``graph`` with every matching pattern of ``rules`` rewritten, and how many were."""
    unknown = set(rules) - set(RULES)
    if unknown:
        raise ValueError(f"rewrite rules {sorted(unknown)}: valid: {', '.join(RULES)}")
    if not rules or len(graph.gm.graph.nodes) == 0:
        return graph, 0
    gm = copy.deepcopy(graph.gm)
    _channels(gm, graph)
    count = 0
    for cat in [n for n in gm.graph.nodes if _is_cat(n)]:
        if all("val_channels" in p.meta for p in cat.args[0]) and _rewrite_one(gm, cat, rules, count):
            count += 1
    if not count:
        return graph, 0
    gm.graph.lint()
    gm.recompile()
    return annotate(gm, graph.example, graph.name), count
