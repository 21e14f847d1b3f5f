"""``method=gat``'s hyperparameters: GTuner ([Sun-PhD] Ch. 5; docs/METHODS.md §gat).

MetaSchedule's evolutionary search (its knobs: :class:`~tunebench.methods.tensor_programs.metaschedule.SearchSettings`)
with the GAT cost model (2 x graph layer -> mean pool -> concat statistical features -> FC 512 -> 4-head
self-attention over 4 x 128 tokens -> MLP 200-100-20-1), a ``ms.cost_model.PyCostModel`` updated online
after each round. No TVM or PyTorch import here: typing a config loads neither, except that a
``pretrained`` checkpoint is read (PyTorch, weights only) to check it before anything else happens.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tunebench.config.knobs import NAME, NONNEG_INT, POS_INT, POS_NUM, choice, join, knob, opt
from tunebench.errors import UserError
from tunebench.methods.pretrained import pretrained_problem
from tunebench.methods.tensor_programs.gat.variants import GRAPH_LAYERS, VARIANTS
from tunebench.methods.tensor_programs.metaschedule import SearchSettings

TRAIN_HINT = "train one with `python -m tunebench gat train`"


@dataclass
class GATSettings(SearchSettings):
    """GTuner's cost model and its training; the search's knobs come from :class:`SearchSettings`."""

    name: str = knob("gat", NAME, "the method")
    variant: str = knob("gat", choice(*VARIANTS), "gat (GNN + MHSA) | mhsa (no graph) | gnn_mlp (no attention): "
                                                  "[Sun-PhD] §5.4.2, Table 5.2")
    graph_layer: str = knob("graphconv", choice(*GRAPH_LAYERS),
                            "graphconv = [WL-GCN], GraphConv(aggr=\"add\") (§5.3.2) | gcn | gat | sage (Table 5.1 "
                            "ablations)")
    graph_hidden: int = knob(136, POS_INT, "graph embedding width after pooling: 136 ([Sun-PhD] §5.4.1)")
    lr: float = knob(1.0e-4, POS_NUM, "Adam learning rate ([Sun-PhD] §5.4.1)")
    epochs: int = knob(300, POS_INT, "training epochs from scratch ([Sun-PhD] §5.4.1)")
    batch_size: int = knob(512, POS_INT, "[Sun-PhD] §5.4.1")
    online_epochs: int = knob(50, NONNEG_INT, "ours: fine-tuning epochs after each measured round (the paper trains "
                                              "offline only)")
    min_train: int = knob(8, NONNEG_INT, "ours: measurements before the first training when no pretrained model is "
                                         "given")
    pretrained: str | None = knob(None, opt(NAME), "checkpoint from `python -m tunebench gat train` (null = start "
                                                   "untrained)")
    seed: int = knob(0, NONNEG_INT, "ours: torch.manual_seed(seed) before the network is built (its initial "
                                    "weights), the same for every task and run")

    def net_args(self) -> dict:
        """The network a checkpoint must hold to be this config's pretrained model."""
        return dict(variant=self.variant, graph_layer=self.graph_layer, graph_hidden=self.graph_hidden)

    def check(self, prefix: str) -> None:
        """A ``pretrained`` checkpoint is an existing, readable checkpoint of ``gat train`` holding this
        config's network: checked here, in the preflight, before MetaSchedule or the run exist."""
        if self.pretrained is None:
            return
        net_args = tuple(self.net_args().items())
        problem = pretrained_problem(self.pretrained, TRAIN_HINT,
                                     lambda path, stamp: _content_problem(path, net_args, stamp))
        if problem:
            raise UserError(f"{join(prefix, 'pretrained')}={self.pretrained}: {problem}")


@functools.lru_cache(maxsize=8)
def _content_problem(path: str, net_args: tuple, stamp: tuple) -> str | None:
    """:func:`~tunebench.methods.tensor_programs.gat.model.checkpoint_problem`, once per file version (``stamp``: real
    path, inode, size, mtime) and network: a config is typed several times on its way to the run."""
    from tunebench.methods.tensor_programs.gat.model import checkpoint_problem

    return checkpoint_problem(path, dict(net_args))
