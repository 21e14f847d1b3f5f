"""The graph models (``workload = "graph"``): networks whose execution order ``target=memory``
schedules, each cell one task ([Ahn-PhD] §3.5.1 schedules cells).

- ``randwire_cifar10``, ``randwire_cifar100``: RandWire stages (:mod:`tunebench.datasets.irregular`),
  one task per stage, or one task of all listed stages (``whole=true``: the hourglass-shaped graph that
  divide-and-conquer splits, [Ahn-PhD] §3.4.2);
- ``darts_v2``: the DARTS_V2 ImageNet normal cell;
- ``nasnet_a``, ``pnasnet5``: the NASNet-A and PNASNet-5 normal cells at their large ImageNet models' sizes;
- ``graph_<zoo model>``: a network of the zoo, traced at PyTorch's module granularity;
- ``hmcos_randwire``, ``hmcos_<nasnet|amoebanet|darts>_<cifar|imagenet>``: the whole networks HMCOS was
  evaluated on ([Wang-DAC22]; :mod:`tunebench.datasets.hmcos_nets`), one task each, traced op by op.

The NASNet-A and PNASNet cells are written here, not traced from timm's ``nasnetalarge`` /
``pnasnet5large`` (timm could not be installed beside the pinned CPU torch), and SwiftNet's cells are not
public: docs/DESIGN_NOTES.md §Memory-aware scheduling says why.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import torch

from tunebench.config.experiment import ModelSettings
from tunebench.config.knobs import FRACTION, NAME, NONNEG_INT, POS_INT, bounded, choice, each, knob
from tunebench.errors import UserError

GRAPH_DTYPES = ("float32", "float16", "bfloat16")
RANDWIRE_CHANNELS = {"randwire_cifar10": 42, "randwire_cifar100": 84}
# two-input normal cells: class, (channels of the older input, of the newer input, C, side) as the second
# normal cell of nasnetalarge / pnasnet5large (331x331 input: cells at 42x42)
CELLS = {"nasnet_a": ("NASNetANormalCell", (336, 1008, 168, 42)), "pnasnet5": ("PNASNetCell", (540, 1080, 216, 42))}


@dataclass
class GraphModel(ModelSettings):
    """A network as a graph of operations whose order is scheduled (``target=memory``)."""

    workload: ClassVar[str] = "graph"
    name: str = knob("darts_v2", NAME, "the network")
    batch: int = knob(1, bounded(1, 1024), "batch size of the traced tensors (node bytes scale with it)")
    dtype: str = knob("float32", choice(*GRAPH_DTYPES), "element type of the activations")
    seed: int = knob(0, NONNEG_INT, "weight seed (and RandWire's graph seed)")

    def leaves(self) -> tuple[type, ...]:
        """Module classes traced as one graph node each."""
        from tunebench.datasets.irregular import LEAVES

        return LEAVES


@dataclass
class RandWireModel(GraphModel):
    """RandWire WS(nodes, k, p) stages at CIFAR sizes ([Xie-ICCV19]; [Ahn-PhD] Table 3.1)."""

    name: str = knob("randwire_cifar10", choice(*RANDWIRE_CHANNELS), "the network (its channel width C)")
    stages: list[int] = knob([1, 2, 3], each(bounded(1, 3), "stage numbers 1-3"), "which stages (1-3; C, 2C, 4C channels at 32, 16, 8 px)")
    whole: bool = knob(False, None, "one task of all stages in a row (false: one task per stage)")
    nodes: int = knob(32, bounded(2, 256), "nodes per stage (WS n; [Xie-ICCV19]: 32)")
    k: int = knob(4, POS_INT, "WS k: each node's ring neighbours ([Xie-ICCV19]: 4)")
    p: float = knob(0.75, FRACTION, "WS rewiring probability ([Xie-ICCV19]: 0.75)")
    split_sums: bool = knob(True, None, "each binary addition of a node's input sum (and of the stage "
                                        "output's mean) is its own graph node, as the forward and TFLite's "
                                        "ADD run them; false: a node sums its inputs inside its graph node")

    def leaves(self) -> tuple[type, ...]:
        from tunebench.datasets.irregular import LEAVES, LEAVES_WHOLE_SUMS

        return LEAVES if self.split_sums else LEAVES_WHOLE_SUMS

    def check(self, prefix: str) -> None:
        from tunebench.config.knobs import bad

        st = sorted(set(self.stages))
        if not st or st != list(range(st[0], st[0] + len(st))):
            raise bad(f"{prefix}.stages", self.stages, "consecutive stage numbers, e.g. [1, 2, 3]")
        if self.k >= self.nodes or self.k % 2:
            raise bad(f"{prefix}.k", self.k, f"an even number below nodes={self.nodes}")


HMCOS_NETS = ("hmcos_randwire", "hmcos_nasnet_cifar", "hmcos_nasnet_imagenet", "hmcos_amoebanet_cifar",
              "hmcos_amoebanet_imagenet", "hmcos_darts_cifar", "hmcos_darts_imagenet")


@dataclass
class HmcosNetModel(GraphModel):
    """A whole network of HMCOS's evaluation ([Wang-DAC22]), traced op by op (convs, pools, dense as nodes)."""

    name: str = knob("hmcos_randwire", choice(*HMCOS_NETS), "the network")

    def leaves(self) -> tuple[type, ...]:
        from tunebench.datasets.hmcos_nets import LEAVES

        return LEAVES


def graph_options(zoo: tuple[str, ...]) -> dict[str, ModelSettings]:
    """The ``model`` group's graph options."""
    out: dict[str, ModelSettings] = {name: RandWireModel(name=name) for name in RANDWIRE_CHANNELS}
    out["darts_v2"] = GraphModel(name="darts_v2")
    out["nasnet_a"] = GraphModel(name="nasnet_a")
    out["pnasnet5"] = GraphModel(name="pnasnet5")
    out.update({f"graph_{z}": GraphModel(name=f"graph_{z}") for z in zoo})
    out.update({name: HmcosNetModel(name=name) for name in HMCOS_NETS})
    return out


def _seeded(ctor, seed: int):
    from tunebench.datasets.irregular import init_bn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = ctor()
        init_bn(module)
    return module.eval()


def _example(shape: tuple[int, ...], batch: int, dtype: str, seed: int) -> torch.Tensor:
    """A seeded random input of ``shape`` with the batch in front, in ``dtype``."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn((batch, *shape), generator=gen).to(_dtype(dtype))


def _dtype(name: str):
    from tunebench.datasets.graphs import DTYPES

    return DTYPES[name]


def graph_modules(model: GraphModel) -> list[tuple[str, torch.nn.Module, torch.Tensor]]:
    """``(task name, module, example input)`` per task of ``model``, modules in eval mode in its dtype."""
    from tunebench.datasets import irregular as ir

    dt = _dtype(model.dtype)
    if model.name in RANDWIRE_CHANNELS:
        c = RANDWIRE_CHANNELS[model.name]
        groups = [tuple(sorted(model.stages))] if model.whole else [(s,) for s in sorted(model.stages)]
        out = []
        for st in groups:
            mod = _seeded(lambda st=st: ir.RandWireStage(c, st, model.nodes, model.k, model.p, model.seed), model.seed)
            side = 32 // 2 ** max(st[0] - 2, 0)
            x = _example((mod.input_channels, side, side), model.batch, model.dtype, model.seed)
            out.append((f"{model.name}_stage{''.join(map(str, st))}", mod.to(dt), x))
        return out
    if model.name == "darts_v2":
        mod = _seeded(lambda: ir.DartsNormalCell(48), model.seed)
        return [("darts_v2_normal", mod.to(dt), _example((48, 56, 56), model.batch, model.dtype, model.seed))]
    if model.name in CELLS:
        ctor, (c_pp, c_p, c, side) = CELLS[model.name]
        mod = _seeded(lambda: getattr(ir, ctor)(c_pp, c_p, c), model.seed)
        xs = (_example((c_pp, side, side), model.batch, model.dtype, model.seed),
              _example((c_p, side, side), model.batch, model.dtype, model.seed + 1))
        return [(f"{model.name}_normal", mod.to(dt), xs)]
    if model.name in HMCOS_NETS:
        from tunebench.datasets import hmcos_nets as hn

        if model.name == "hmcos_randwire":
            cfg = hn.HMCOS_RANDWIRE
            mod = _seeded(lambda: hn.RandWireNet(cfg["channels"], cfg["cells"], cfg["nodes"], cfg["k"], cfg["p"],
                                                 model.seed), model.seed)
            side = cfg["side"]
        else:
            mod = _seeded(lambda: hn.NasNet(*hn.NAS_NETS[model.name]), model.seed)
            side = mod.input_side
        return [(model.name, mod.to(dt), _example((3, side, side), model.batch, model.dtype, model.seed))]
    if model.name.startswith("graph_"):
        from tunebench.datasets.zoo import IMAGENET_INPUT, MODELS, build_model

        zoo = model.name[len("graph_"):]
        if zoo not in MODELS:
            raise UserError(f"model={model.name}: unknown zoo network; valid: {', '.join(sorted(MODELS))}")
        mod, _ = build_model(zoo, model.seed)
        shape = tuple(getattr(mod, "input_shape", IMAGENET_INPUT))[1:]
        return [(zoo, mod.to(dt), _example(shape, model.batch, model.dtype, model.seed))]
    raise UserError(f"model={model.name} is not a graph model")


def load_graphs(model: GraphModel) -> list:
    """The model's tasks as traced :class:`~tunebench.datasets.graphs.Graph` s."""
    from tunebench.datasets.graphs import trace_graph

    return [trace_graph(mod, x, name, model.leaves()) for name, mod, x in graph_modules(model)]


def graph_id(graph, model: GraphModel) -> str:
    """A stable task id: the graph's structure, node sizes and the model settings."""
    key = repr((graph.name, graph.preds, graph.nbytes, graph.owner, model.batch, model.dtype, model.seed))
    return hashlib.sha1(key.encode()).hexdigest()[:16]
