"""Features of one MetaSchedule candidate program for the GAT cost model ([Sun-PhD] §5.3).

Two kinds, both computed from the candidate's scheduled TIR (``MeasureCandidate.sch.mod["main"]``,
i.e. after MetaSchedule's postprocessors, exactly the program that is built and timed):

- **statistical** (:func:`stat_features`): MetaSchedule's per-store feature extractor
  (``PerStoreFeature``, 164 values per buffer store, the successor of Ansor's per-store vector that
  GTuner used), pooled over the program's stores to a fixed vector of ``STAT_DIM`` floats:
  ``[mean over stores (164), max over stores (164), log2(1 + number of stores) (1)]``.
- **structural** (:func:`tir_graph`): a graph of the program's computation and data nodes. Node
  kinds and the ``NODE_DIM`` node features are listed in :data:`NODE_FEATURES` (and in
  docs/DESIGN_NOTES.md §gat). Edges: loop -> nested loop / block (nesting), buffer -> block
  (block reads it), block -> buffer (block writes it); the graph is returned undirected (each edge
  in both directions) so that a node's two rounds of aggregation see both its producers and its
  consumers.

Sizes are log2-scaled (``log2(1 + x)``); every feature is a float of order 1..30.
"""

from __future__ import annotations

import math

import numpy as np

#: per-store features from MetaSchedule's extractor (TVM 0.27, ``PerStoreFeature`` defaults)
PER_STORE_DIM = 164
STAT_DIM = 2 * PER_STORE_DIM + 1

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
OP_KINDS = ("init", "pad", "reduce_add", "max", "add", "mul", "copy", "other")
SCOPES = ("global", "local", "shared", "other")

#: node feature layout, in order (index ranges in the node vector)
NODE_FEATURES = (
    [("is_buffer", 1), ("is_block", 1), ("is_loop", 1)]
    # data nodes (buffers)
    + [("buf_ndim", 1), ("buf_log2_elems", 1), ("buf_dtype_bits/32", 1), ("buf_is_param", 1),
       ("buf_is_output", 1)] + [(f"buf_scope_{s}", 1) for s in SCOPES]
    # computation nodes (blocks)
    + [("blk_n_spatial", 1), ("blk_n_reduce", 1), ("blk_log2_spatial_extent", 1), ("blk_log2_reduce_extent", 1),
       ("blk_n_reads", 1), ("blk_n_writes", 1), ("blk_n_annotations", 1)] + [(f"blk_op_{k}", 1) for k in OP_KINDS]
    # computation structure (loops)
    + [("loop_log2_extent", 1), ("loop_depth", 1), ("loop_log2_unroll_max_step", 1), ("loop_unroll_explicit", 1)]
    + [(f"loop_kind_{k}", 1) for k in LOOP_KINDS]
)
NODE_DIM = sum(n for _, n in NODE_FEATURES)
_POS = {}
_p = 0
for _name, _n in NODE_FEATURES:
    _POS[_name] = _p
    _p += _n


def _log2p(x: float) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


def _int(e) -> int | None:
    v = getattr(e, "value", None)
    return int(v) if isinstance(v, (int, np.integer)) else None


def _numel(buf) -> float:
    n = 1.0
    for d in buf.shape:
        v = _int(d)
        n *= v if v is not None else 1
    return n


def _dtype_bits(buf) -> int:
    return int(getattr(buf.dtype, "bits", 32) or 32)


def _region_buffer(reg):
    return reg.buffer if hasattr(reg, "buffer") else reg.source


def _loaded(e):
    """The buffer an expression loads from (a buffer load; its class differs across TVM versions), or None."""
    if hasattr(e, "indices"):
        return getattr(e, "buffer", None) or getattr(e, "source", None)
    return None


def _op_kind(block) -> str:
    """A block's operation category from its body (the BufferStore's value); one of OP_KINDS."""
    from tvm import ir, tirx

    if block.name_hint.endswith("_init"):
        return "init"
    body = block.body
    if not isinstance(body, tirx.BufferStore):
        return "other"
    v = body.value
    if isinstance(v, ir.Call) and "if_then_else" in str(getattr(v.op, "name", "")):
        return "pad"
    if isinstance(v, tirx.Max):
        return "max"
    if isinstance(v, tirx.Add):
        src = _loaded(v.a)
        if src is not None and src.same_as(body.buffer):
            return "reduce_add"
        return "add"
    if isinstance(v, tirx.Mul):
        return "mul"
    if _loaded(v) is not None or isinstance(v, tirx.Cast):
        return "copy"
    return "other"


def tir_graph(func) -> tuple[np.ndarray, np.ndarray]:
    """The structural graph of a scheduled PrimFunc.

    Args:
        func: a ``tvm.tirx.PrimFunc`` (MetaSchedule's scheduled ``main``).

    Returns:
        ``(x, edge_index)``: node features float32 of shape (n_nodes, NODE_DIM) and edges int64 of
        shape (2, n_edges) (source row 0, target row 1), each edge in both directions.
    """
    g = _GraphBuilder(func)
    g.visit(func.body, None, 0)
    x = np.stack(g.rows) if g.rows else np.zeros((0, NODE_DIM), dtype=np.float32)
    if g.edges:
        e = np.asarray(g.edges, dtype=np.int64).T
        e = np.concatenate([e, e[::-1]], axis=1)
    else:
        e = np.zeros((2, 0), dtype=np.int64)
    return x, e


class _GraphBuilder:
    """Walks a PrimFunc's body: one node per loop, block and buffer; parent -> child edges for the
    loop/block nesting, buffer -> block for reads and block -> buffer for writes."""

    def __init__(self, func):
        self.rows: list[np.ndarray] = []
        self.edges: list[tuple[int, int]] = []
        self.buf_node: dict = {}  # buffer -> node id (matched with same_as)
        # TVM 0.27 PrimFuncs have no buffer_map: parameter buffers are recognized by name
        self.param_names = [str(p.name) for p in func.params]
        # Relax fused functions write the last parameter
        self.out_name = self.param_names[-1] if self.param_names else None

    def new_node(self) -> tuple[int, np.ndarray]:
        self.rows.append(np.zeros(NODE_DIM, dtype=np.float32))
        return len(self.rows) - 1, self.rows[-1]

    def buffer_id(self, buf) -> int:
        for b, i in self.buf_node.items():
            if b.same_as(buf):
                return i
        i, r = self.new_node()
        r[_POS["is_buffer"]] = 1
        r[_POS["buf_ndim"]] = len(buf.shape)
        r[_POS["buf_log2_elems"]] = _log2p(_numel(buf))
        r[_POS["buf_dtype_bits/32"]] = _dtype_bits(buf) / 32.0
        r[_POS["buf_is_param"]] = float(str(buf.name) in self.param_names)
        r[_POS["buf_is_output"]] = float(str(buf.name) == self.out_name)
        scope = str(buf.scope()) if hasattr(buf, "scope") else "global"
        scope = scope.split(".")[0] if scope else "global"
        r[_POS[f"buf_scope_{scope if scope in SCOPES else 'other'}"]] = 1
        self.buf_node[buf] = i
        return i

    def loop(self, stmt, parent: int | None, depth: int) -> None:
        i, r = self.new_node()
        r[_POS["is_loop"]] = 1
        ext = _int(stmt.extent)
        r[_POS["loop_log2_extent"]] = _log2p(ext if ext is not None else 1)
        r[_POS["loop_depth"]] = depth
        ann = stmt.annotations
        if "pragma_auto_unroll_max_step" in ann:
            r[_POS["loop_log2_unroll_max_step"]] = _log2p(_int(ann["pragma_auto_unroll_max_step"]) or 0)
        if "pragma_unroll_explicit" in ann:
            r[_POS["loop_unroll_explicit"]] = float(_int(ann["pragma_unroll_explicit"]) or 0)
        kind = str(stmt.kind).split(".")[-1].lower()
        kind = {"threadbinding": "thread_binding"}.get(kind, kind)
        r[_POS[f"loop_kind_{kind if kind in LOOP_KINDS else 'serial'}"]] = 1
        if parent is not None:
            self.edges.append((parent, i))
        self.visit(stmt.body, i, depth + 1)

    def block(self, stmt, parent: int | None, depth: int) -> None:
        if stmt.name_hint == "root":
            for b in stmt.alloc_buffers:
                self.buffer_id(b)
            self.visit(stmt.body, parent, depth)
            return
        i, r = self.new_node()
        r[_POS["is_block"]] = 1
        sp = [iv for iv in stmt.iter_vars if int(iv.iter_type) == 0]
        rd = [iv for iv in stmt.iter_vars if int(iv.iter_type) == 2]
        r[_POS["blk_n_spatial"]] = len(sp)
        r[_POS["blk_n_reduce"]] = len(rd)
        r[_POS["blk_log2_spatial_extent"]] = _log2p(math.prod(_int(iv.dom.extent) or 1 for iv in sp))
        r[_POS["blk_log2_reduce_extent"]] = _log2p(math.prod(_int(iv.dom.extent) or 1 for iv in rd)) if rd else 0.0
        r[_POS["blk_n_reads"]] = len(stmt.reads)
        r[_POS["blk_n_writes"]] = len(stmt.writes)
        r[_POS["blk_n_annotations"]] = len(stmt.annotations)
        r[_POS[f"blk_op_{_op_kind(stmt)}"]] = 1
        if parent is not None:
            self.edges.append((parent, i))
        for reg in stmt.reads:  # TVM 0.27 region objects: TensorRegion(source=buffer, region)
            self.edges.append((self.buffer_id(_region_buffer(reg)), i))
        for reg in stmt.writes:
            self.edges.append((i, self.buffer_id(_region_buffer(reg))))
        for b in stmt.alloc_buffers:
            self.buffer_id(b)
        self.visit(stmt.body, i, depth + 1)

    def visit(self, stmt, parent: int | None, depth: int) -> None:
        from tvm import s_tir, tirx

        if stmt is None:
            return
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.visit(s, parent, depth)
        elif isinstance(stmt, tirx.For):
            self.loop(stmt, parent, depth)
        elif isinstance(stmt, s_tir.SBlockRealize):
            self.visit(stmt.block, parent, depth)
        elif isinstance(stmt, s_tir.SBlock):
            self.block(stmt, parent, depth)
        elif hasattr(stmt, "body") and not isinstance(stmt, tirx.BufferStore):
            # LetStmt, AttrStmt, IfThenElse(then_case), DeclBuffer, ...: structure passes through
            self.visit(stmt.body, parent, depth)
            if isinstance(stmt, tirx.IfThenElse):
                self.visit(stmt.else_case, parent, depth)
        elif isinstance(stmt, tirx.IfThenElse):
            self.visit(stmt.then_case, parent, depth)
            self.visit(stmt.else_case, parent, depth)


def pool_store_features(per_store: np.ndarray) -> np.ndarray:
    """Pool a (n_stores, 164) per-store matrix to the fixed (STAT_DIM,) vector (see module doc)."""
    per_store = np.asarray(per_store, dtype=np.float32).reshape(-1, PER_STORE_DIM)
    if per_store.shape[0] == 0:
        return np.zeros(STAT_DIM, dtype=np.float32)
    return np.concatenate([per_store.mean(0), per_store.max(0),
                           [math.log2(1 + per_store.shape[0])]]).astype(np.float32)


_EXTRACTOR = None


def stat_features(context, candidates) -> np.ndarray:
    """Pooled per-store features of MetaSchedule candidates: float32 (len(candidates), STAT_DIM)."""
    global _EXTRACTOR
    import tvm.s_tir.meta_schedule as ms

    if _EXTRACTOR is None:
        _EXTRACTOR = ms.feature_extractor.PerStoreFeature(extract_workload=False)
    if not candidates:
        return np.zeros((0, STAT_DIM), dtype=np.float32)
    feats = _EXTRACTOR.extract_from(context, list(candidates))
    return np.stack([pool_store_features(f.numpy()) for f in feats])


def candidate_features(context, candidates) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Both feature kinds for MetaSchedule ``MeasureCandidate`` s: ``(stats, graphs)`` with stats of
    shape (n, STAT_DIM) and one ``(x, edge_index)`` pair per candidate (see :func:`tir_graph`)."""
    stats = stat_features(context, candidates)
    graphs = [tir_graph(c.sch.mod["main"]) for c in candidates]
    return stats, graphs
