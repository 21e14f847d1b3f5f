"""GTuner's graph attention network (GAT) cost model ([Sun-PhD] §5.3.2-5.3.3, §5.4.1), in PyTorch Geometric.

Network (variant ``gat``, the paper's "GNN + MHSA"):
    node features (n_nodes, NODE_DIM) -> 2 x graph layer (hidden ``graph_hidden``, ReLU;
    ``GraphConv(aggr="add")`` = WL-GCN by default) -> mean pool per graph (B, graph_hidden)
    -> concat standardized statistical features (B, STAT_DIM) -> FC 512 + ReLU
    -> reshape (B, 4, 128) -> 4-head self-attention (Q = K = V = the 4 tokens) -> flatten (B, 512)
    -> MLP 200-100-20-1 (ReLU between) -> predicted standardized log latency (B,).
Ablations: ``mhsa`` (no graph: stats only -> FC 512 -> MHSA -> MLP, the paper's "MHSA"),
``gnn_mlp`` (no attention: FC 512 -> MLP, the paper's "GNN + MLP"); ``graph_layer`` = ``graphconv``
(WL-GCN), ``gcn`` (SpecGCN), ``gat`` (MaskGAT), ``sage`` (GraphSAGE) as in Table 5.1.

Target: ``log(latency_s)``, standardized with the training set's mean/std (the paper regresses
latency with MSE; log-scale is our choice, as docs/METHODS.md §gat states, because latencies span
four orders of magnitude across tasks). Loss: MSE. Optimizer: Adam.

Files (checkpoints here, training sets in :mod:`tunebench.methods.tensor_programs.gat.dataset`) hold only tensors
and a JSON string (:func:`save_tensor_file`) and are read with ``torch.load(weights_only=True)``
(:func:`load_tensor_file`): a crafted file cannot run code, and every key and shape is checked
before use (a bad one is a one-line :class:`~tunebench.errors.UserError` naming the file).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch
from torch import nn

from tunebench.errors import UserError
from tunebench.methods.tensor_programs.gat.features import NODE_DIM, STAT_DIM
from tunebench.methods.tensor_programs.gat.variants import GRAPH_LAYERS, VARIANTS
from tunebench.tensor_files import checked_state, first_line, load_tensor_file, require, save_tensor_file

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "tunebench-gat-model-v1"


def _graph_layer(kind: str, d_in: int, d_out: int):
    import torch_geometric.nn as gnn

    if kind == "graphconv":
        return gnn.GraphConv(d_in, d_out, aggr="add")
    if kind == "gcn":
        return gnn.GCNConv(d_in, d_out)
    if kind == "gat":
        return gnn.GATConv(d_in, d_out)
    if kind == "sage":
        return gnn.SAGEConv(d_in, d_out)
    raise ValueError(f"graph_layer={kind!r}; valid: {', '.join(GRAPH_LAYERS)}")


class GATNet(nn.Module):
    """The GAT cost network (see module docstring for the layer list and shapes)."""

    def __init__(self, variant: str = "gat", graph_layer: str = "graphconv", graph_hidden: int = 136,
                 fc_dim: int = 512, heads: int = 4, mlp: tuple = (200, 100, 20),
                 node_dim: int = NODE_DIM, stat_dim: int = STAT_DIM):
        super().__init__()
        if variant not in VARIANTS:
            raise ValueError(f"variant={variant!r}; valid: {', '.join(VARIANTS)}")
        if fc_dim % heads:
            raise ValueError(f"fc_dim={fc_dim} must be divisible by heads={heads}")
        self.variant, self.heads, self.fc_dim = variant, heads, fc_dim
        self.use_graph = variant in ("gat", "gnn_mlp")
        self.use_attention = variant in ("gat", "mhsa")
        if self.use_graph:
            self.conv1 = _graph_layer(graph_layer, node_dim, graph_hidden)
            self.conv2 = _graph_layer(graph_layer, graph_hidden, graph_hidden)
        self.fc = nn.Linear(stat_dim + (graph_hidden if self.use_graph else 0), fc_dim)
        if self.use_attention:
            self.attn = nn.MultiheadAttention(fc_dim // heads, heads, batch_first=True)
        layers, d = [], fc_dim
        for h in mlp:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        layers.append(nn.Linear(d, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, stats: torch.Tensor, x: torch.Tensor | None = None, edge_index: torch.Tensor | None = None,
                batch: torch.Tensor | None = None) -> torch.Tensor:
        """stats (B, STAT_DIM); x (N, NODE_DIM), edge_index (2, E), batch (N,) graph of each node -> (B,)."""
        feats = stats
        if self.use_graph:
            from torch_geometric.nn import global_mean_pool

            h = torch.relu(self.conv1(x, edge_index))
            h = torch.relu(self.conv2(h, edge_index))
            feats = torch.cat([global_mean_pool(h, batch, size=stats.shape[0]), stats], dim=1)
        z = torch.relu(self.fc(feats))
        if self.use_attention:
            tokens = z.view(z.shape[0], self.heads, self.fc_dim // self.heads)
            z = self.attn(tokens, tokens, tokens, need_weights=False)[0].reshape(z.shape[0], self.fc_dim)
        return self.mlp(z).squeeze(-1)


def to_batch(stats: np.ndarray, graphs: list, idx=None):
    """Collate samples ``idx`` into tensors: (stats (B, STAT_DIM), x (N, NODE_DIM), edge_index (2, E), batch (N,))."""
    idx = np.arange(len(graphs)) if idx is None else np.asarray(idx)
    xs, es, bs, off = [], [], [], 0
    for j, i in enumerate(idx):
        x, e = graphs[i]
        xs.append(x)
        es.append(e + off)
        bs.append(np.full(len(x), j, dtype=np.int64))
        off += len(x)
    return (torch.from_numpy(np.asarray(stats[idx], dtype=np.float32)),
            torch.from_numpy(np.concatenate(xs) if xs else np.zeros((0, NODE_DIM), np.float32)),
            torch.from_numpy(np.concatenate(es, axis=1) if es else np.zeros((2, 0), np.int64)),
            torch.from_numpy(np.concatenate(bs) if bs else np.zeros(0, np.int64)))


class GATCostModel:
    """Network + normalization + training loop. Predicts log latency (seconds) of candidate programs.

    Args: network args (see :class:`GATNet`), ``lr``, ``epochs``, ``batch_size``, ``seed``.
    """

    def __init__(self, variant: str = "gat", graph_layer: str = "graphconv", graph_hidden: int = 136,
                 lr: float = 1e-4, epochs: int = 300, batch_size: int = 512, seed: int = 0):
        self.net_args = dict(variant=variant, graph_layer=graph_layer, graph_hidden=graph_hidden)
        self.lr, self.epochs, self.batch_size = float(lr), int(epochs), int(batch_size)
        torch.manual_seed(seed)
        self.net = GATNet(**self.net_args)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        self.stat_mean = np.zeros(STAT_DIM, np.float32)
        self.stat_std = np.ones(STAT_DIM, np.float32)
        self.y_mean, self.y_std = 0.0, 1.0
        self.fitted = False
        self.history: list[float] = []

    def _norm_stats(self, stats: np.ndarray) -> np.ndarray:
        return (np.asarray(stats, np.float32) - self.stat_mean) / self.stat_std

    def fit(self, stats: np.ndarray, graphs: list, latency_s: np.ndarray, epochs: int | None = None,
            progress=None, renormalize: bool | None = None) -> list[float]:
        """Train on samples (stats (n, STAT_DIM), graphs, latency_s (n,) seconds); returns per-epoch mean loss.

        Normalization constants are set on the first fit (or when ``renormalize``); later fits
        (online updates) keep them. ``progress(epoch, loss)`` is called after every epoch.
        """
        lat = np.asarray(latency_s, np.float64)
        ok = np.isfinite(lat) & (lat > 0)
        stats, lat = np.asarray(stats, np.float32)[ok], lat[ok]
        graphs = [g for g, k in zip(graphs, ok) if k]
        if len(lat) == 0:
            return []
        y = np.log(lat)
        if renormalize or (renormalize is None and not self.fitted):
            self.stat_mean = stats.mean(0)
            self.stat_std = stats.std(0) + 1e-3
            self.y_mean, self.y_std = float(y.mean()), float(y.std() + 1e-6)
        s = self._norm_stats(stats)
        yt = torch.from_numpy(((y - self.y_mean) / self.y_std).astype(np.float32))
        rng = np.random.default_rng(len(self.history))
        self.net.train()
        losses = []
        for ep in range(self.epochs if epochs is None else int(epochs)):
            perm, tot = rng.permutation(len(y)), 0.0
            for k in range(0, len(y), self.batch_size):
                idx = perm[k:k + self.batch_size]
                st, x, e, b = to_batch(s, graphs, idx)
                loss = nn.functional.mse_loss(self.net(st, x, e, b), yt[idx])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                tot += loss.item() * len(idx)
            losses.append(tot / len(y))
            if progress is not None:
                progress(ep, losses[-1])
        self.net.eval()
        self.fitted = True
        self.history += losses
        return losses

    @torch.no_grad()
    def predict(self, stats: np.ndarray, graphs: list, chunk: int = 1024) -> np.ndarray:
        """Predicted log latency (log seconds), float64 (n,)."""
        self.net.eval()
        s = self._norm_stats(stats)
        out = []
        for k in range(0, len(graphs), chunk):
            idx = np.arange(k, min(k + chunk, len(graphs)))
            out.append(self.net(*to_batch(s, graphs, idx)).numpy())
        pred = np.concatenate(out) if out else np.zeros(0, np.float32)
        return pred.astype(np.float64) * self.y_std + self.y_mean

    def save(self, path: str) -> None:
        """A weights-only checkpoint (:func:`save_tensor_file`): the network's tensors, the
        normalization constants and, as JSON, the network arguments and the training history."""
        meta = {"net_args": self.net_args, "y_mean": float(self.y_mean), "y_std": float(self.y_std),
                "history": [float(x) for x in self.history], "saved_at": time.time()}
        tensors = {"stat_mean": torch.as_tensor(np.asarray(self.stat_mean, np.float32)),
                   "stat_std": torch.as_tensor(np.asarray(self.stat_std, np.float32)),
                   **{f"net.{k}": v for k, v in self.net.state_dict().items()}}
        save_tensor_file(path, CHECKPOINT_FORMAT, meta, tensors)

    @classmethod
    def load(cls, path: str, **train_args) -> GATCostModel:
        """A model from a checkpoint written by :meth:`save` (``weights_only``; keys and shapes checked:
        a bad file is a one-line UserError); ``train_args`` (lr, epochs, batch_size) apply to later
        (online) training."""
        what = "GAT checkpoint"
        meta, tensors = load_tensor_file(path, what, CHECKPOINT_FORMAT)
        m = cls(**_checked_net_args(meta, path), **train_args)
        try:
            m.net.load_state_dict(checked_state(m.net, tensors, "net", what, path, "network", "its net_args"))
            for key in ("stat_mean", "stat_std"):
                t = tensors.get(key)
                require(t is not None and tuple(t.shape) == (STAT_DIM,), what, path,
                        f"{key} must have shape ({STAT_DIM},)")
                setattr(m, key, t.detach().float().numpy().copy())
        except (TypeError, RuntimeError) as exc:  # e.g. a tensor of a dtype that cannot become float32
            raise UserError(f"{what} {path}: unusable tensor ({first_line(exc)})") from None
        y_mean, y_std, history = meta.get("y_mean"), meta.get("y_std"), meta.get("history", [])
        require(all(isinstance(v, (int, float)) for v in (y_mean, y_std)) and y_std > 0, what, path,
                "y_mean / y_std missing or not numbers (y_std > 0)")
        require(isinstance(history, list) and all(isinstance(v, (int, float)) for v in history), what, path,
                "history must be a list of numbers")
        m.y_mean, m.y_std, m.history, m.fitted = float(y_mean), float(y_std), list(history), True
        return m


def checkpoint_problem(path: str, net_args: dict) -> str | None:
    """Why the file at ``path`` cannot be the pretrained model of a GAT network with ``net_args``
    (variant, graph_layer, graph_hidden), in one line; None when it can. The file is read as
    :meth:`GATCostModel.load` reads it (``weights_only``; format, metadata, keys and shapes checked)."""
    try:
        found = GATCostModel.load(path).net_args
    except UserError as exc:
        reason = str(exc).removeprefix(f"GAT checkpoint {path}: ")
        return f"not a checkpoint of `python -m tunebench gat train`: {reason}"
    if found != net_args:
        fix = " ".join(f"method.{k}={v}" for k, v in found.items() if net_args.get(k) != v)
        return f"holds a {found} network; the config asks for {net_args} (give {fix} to use it)"
    return None


def _checked_net_args(meta: dict, path: str) -> dict:
    """The checkpoint's network arguments, each checked against what :class:`GATNet` accepts."""
    args = meta.get("net_args")
    what = "GAT checkpoint"
    require(isinstance(args, dict) and set(args) == {"variant", "graph_layer", "graph_hidden"}, what, path,
            "net_args must hold exactly variant, graph_layer and graph_hidden")
    require(args["variant"] in VARIANTS, what, path, f"variant {args['variant']!r}; valid: {', '.join(VARIANTS)}")
    require(args["graph_layer"] in GRAPH_LAYERS, what, path,
            f"graph_layer {args['graph_layer']!r}; valid: {', '.join(GRAPH_LAYERS)}")
    hidden = args["graph_hidden"]
    require(isinstance(hidden, int) and not isinstance(hidden, bool) and 0 < hidden <= 65536, what, path,
            f"graph_hidden {hidden!r} must be a positive integer")
    return dict(args)

