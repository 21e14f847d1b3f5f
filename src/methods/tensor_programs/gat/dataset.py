"""Training sets for the GAT cost model from tunebench record files, and offline training.

``python -m tunebench dataset build --records <run dir or run id>... --out set.pt`` replays every
valid MetaSchedule record (a :class:`~tunebench.search_space.TraceConfig` trace) on its task's PrimFunc
(tasks re-extracted from the run's ``config.yaml`` model), computes both feature kinds
(:mod:`tunebench.methods.tensor_programs.gat.features`) and saves the training set ``{"stats" (n, STAT_DIM), "graphs"
[(x, edge_index)], "latency_s" (n,), "task_id" [n], "model" [n], "summary"}`` as a weights-only file
(:func:`save_dataset`: tensors, the graphs concatenated with offsets, and the rest as JSON) that
:func:`load_dataset` reads with ``torch.load(weights_only=True)`` and checks key by key and shape
by shape (a crafted or damaged file is a one-line error, never executed).

``python -m tunebench gat train --dataset set.pt --out model.pt`` trains a GATCostModel
([Sun-PhD] §5.4.1 settings unless overridden), shows per-epoch progress, and logs the checkpoint and
the training-set summary to MLflow (experiment ``gat-training`` in ``--workdir``'s store).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

import numpy as np

from tunebench.config.load import SavedRun
from tunebench.errors import UserError

log = logging.getLogger(__name__)


def _run_dir(ref: str, workdir: str) -> str:
    """A run folder (with ``config.yaml`` and ``records.jsonl``) from a path or a run id: local, else the
    run's artifacts from the tracking store of ``workdir`` (``<workdir>/mlflow.db``)."""
    from tunebench.run_lookup import RECORDS, local_run_folder, run_file

    folder = local_run_folder(ref, workdir)
    if folder:
        return folder
    client = _client(workdir)
    if client is not None:
        got = [run_file(client, ref, name, os.path.join(workdir, "history")) for name in (RECORDS, "config.yaml")]
        if all(got):
            return os.path.dirname(got[0])
    raise UserError(f"--records {ref}: neither a record folder, a records.jsonl nor a run id with records "
                    f"(looked in {os.path.join(workdir, 'records', ref)} and {os.path.join(workdir, 'mlflow.db')})")


def _client(workdir: str):
    """The embedded store of ``workdir``, if it has one (None otherwise)."""
    db = os.path.join(os.path.abspath(workdir), "mlflow.db")
    if not os.path.isfile(db):
        return None
    from mlflow.tracking import MlflowClient

    from tunebench.run_lookup import quiet_mlflow

    quiet_mlflow()
    return MlflowClient(f"sqlite:///{db}")


def _read_run(ref: str, workdir: str):
    """``(folder, SavedRun, valid MetaSchedule records)`` of one ``--records`` reference."""
    from omegaconf import OmegaConf

    from tunebench.record_file import read_records

    d = _run_dir(ref, workdir)
    cfg_path = os.path.join(d, "config.yaml")
    if not os.path.isfile(cfg_path):
        raise UserError(f"--records {ref}: {cfg_path} missing (not a tunebench run folder)")
    run = SavedRun.read(OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False))
    recs = [r for r in read_records(os.path.join(d, "records.jsonl")) if r.get("valid") and "trace" in r["config"]]
    return d, run, recs


@dataclass
class _Rows:
    """The training set as it is gathered, one entry per replayed record (``per_task``: counts)."""

    stats: list = field(default_factory=list)
    graphs: list = field(default_factory=list)
    latency_s: list = field(default_factory=list)
    task_id: list = field(default_factory=list)
    model: list = field(default_factory=list)
    per_task: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    contexts: dict = field(default_factory=dict)


def _replay_run(rows: _Rows, d: str, run: SavedRun, recs: list[dict], keep_candidates: bool) -> None:
    """Replay ``recs`` of one run on their tasks' PrimFuncs and append their features to ``rows``."""
    import tvm
    import tvm.s_tir.meta_schedule as ms

    from tunebench.methods.tensor_programs.gat.features import stat_features, tir_graph
    from tunebench.targets import target_with
    from tunebench.targets.capabilities import ExtractsTasks

    tasks = target_with(run.target_kind, ExtractsTasks).model_tasks(run.model_config)
    by_id = {t.id: t for t in tasks}
    target = tvm.target.Target({"kind": run.target_kind})
    ctxs: dict = {}
    for i, r in enumerate(recs):
        task = by_id.get(r["task_id"])
        if task is None:
            continue
        if task.id not in ctxs:
            ctxs[task.id] = (ms.TuneContext(mod=task.mod, target=target, task_name=task.name, num_threads=1),
                             ms.arg_info.ArgInfo.from_prim_func(task.mod["main"]))
        ctx, args = ctxs[task.id]
        sch = tvm.s_tir.Schedule(task.mod)
        tvm.s_tir.schedule.Trace.apply_json_to_schedule(r["config"]["trace"], sch)
        cand = ms.MeasureCandidate(sch, args)
        rows.stats.append(stat_features(ctx, [cand])[0])
        rows.graphs.append(tir_graph(sch.mod["main"]))
        rows.latency_s.append(float(r["latency_s"]))
        rows.task_id.append(task.id)
        rows.model.append(run.model)
        rows.per_task[task.id] = rows.per_task.get(task.id, 0) + 1
        if keep_candidates:
            rows.candidates.append(cand)
            rows.contexts[task.id] = ctx
        if (i + 1) % 100 == 0:
            print(f"  {d}: {i + 1}/{len(recs)} records", flush=True)


def build_dataset(refs: list[str], workdir: str = ".", keep_candidates: bool = False) -> dict:
    """The training set (see module docstring) from record folders / run ids ``refs``.

    ``keep_candidates``: also return ``"candidates"`` (the replayed MeasureCandidates) and
    ``"contexts"`` (task id -> TuneContext), for comparisons with MetaSchedule's own cost model."""
    from tunebench.methods.tensor_programs.metaschedule import import_metaschedule

    runs = [_read_run(ref, workdir) for ref in refs]  # a bad reference fails before TVM is imported
    import_metaschedule()
    rows = _Rows()
    for d, run, recs in runs:
        if not recs:
            log.warning("%s: no valid MetaSchedule (trace) records", d)
            continue
        _replay_run(rows, d, run, recs, keep_candidates)
    lat = rows.latency_s
    if not lat:
        raise UserError("no valid MetaSchedule records in " + ", ".join(refs))
    summary = {"samples": len(lat), "tasks": len(rows.per_task), "models": sorted(set(rows.model)),
               "per_task": rows.per_task, "sources": list(refs),
               "latency_s_min": float(min(lat)), "latency_s_max": float(max(lat))}
    out = {"stats": np.stack(rows.stats), "graphs": rows.graphs, "latency_s": np.asarray(lat),
           "task_id": rows.task_id, "model": rows.model, "summary": summary}
    if keep_candidates:
        out["candidates"], out["contexts"] = rows.candidates, rows.contexts
    return out


DATASET_FORMAT = "tunebench-gat-dataset-v1"


def save_dataset(ds: dict, path: str) -> None:
    """Write training set ``ds`` (as :func:`build_dataset` returns it) as a weights-only file: the
    graphs' node features and edges concatenated, with per-graph offsets ``node_ptr``/``edge_ptr``."""
    from tunebench.methods.tensor_programs.gat.features import NODE_DIM
    from tunebench.tensor_files import save_tensor_file

    xs = [np.asarray(x, np.float32) for x, _ in ds["graphs"]]
    es = [np.asarray(e, np.int64) for _, e in ds["graphs"]]
    tensors = {"stats": np.asarray(ds["stats"], np.float32), "latency_s": np.asarray(ds["latency_s"], np.float64),
               "node_x": np.concatenate(xs) if xs else np.zeros((0, NODE_DIM), np.float32),
               "node_ptr": np.concatenate([[0], np.cumsum([len(x) for x in xs])]).astype(np.int64),
               "edge_index": np.concatenate(es, axis=1) if es else np.zeros((2, 0), np.int64),
               "edge_ptr": np.concatenate([[0], np.cumsum([e.shape[1] for e in es])]).astype(np.int64)}
    meta = {"task_id": list(ds["task_id"]), "model": list(ds["model"]), "summary": ds["summary"]}
    save_tensor_file(path, DATASET_FORMAT, meta, {k: np.ascontiguousarray(v) for k, v in tensors.items()})


def load_dataset(path: str) -> dict:
    """The training set in ``path`` (from :func:`save_dataset`), read weights-only and checked: a
    missing key, a wrong shape or an out-of-range edge is a one-line UserError naming the file."""
    from tunebench.tensor_files import load_tensor_file

    if not os.path.isfile(path):
        raise UserError(f"--dataset {path}: no such file (build one with `python -m tunebench dataset build`)")
    meta, t = load_tensor_file(path, "--dataset", DATASET_FORMAT)
    arrays = _checked_arrays(t, path)
    n = len(arrays["latency_s"])
    for key in ("task_id", "model"):
        _require(isinstance(meta.get(key), list) and len(meta[key]) == n and all(isinstance(v, str) for v in meta[key]),
                 path, f"{key} must be a list of {n} strings")
    _require(isinstance(meta.get("summary"), dict), path, "summary must be a JSON object")
    nptr, eptr = arrays["node_ptr"], arrays["edge_ptr"]
    graphs = [(arrays["node_x"][nptr[i]:nptr[i + 1]], arrays["edge_index"][:, eptr[i]:eptr[i + 1]]) for i in range(n)]
    return {"stats": arrays["stats"], "graphs": graphs, "latency_s": arrays["latency_s"], "task_id": meta["task_id"],
            "model": meta["model"], "summary": meta["summary"]}


def _require(cond: bool, path: str, problem: str) -> None:
    from tunebench.tensor_files import require

    require(cond, "--dataset", path, problem)


def _checked_arrays(t: dict, path: str) -> dict:
    """The dataset's tensors as numpy arrays, every key present and every shape consistent."""
    from tunebench.methods.tensor_programs.gat.features import NODE_DIM, STAT_DIM

    keys = ("stats", "latency_s", "node_x", "node_ptr", "edge_index", "edge_ptr")
    missing = [k for k in keys if k not in t]
    _require(not missing, path, f"missing tensor(s) {', '.join(missing)}")
    try:
        a = {k: t[k].detach().cpu().numpy() for k in keys}
    except (TypeError, RuntimeError) as exc:
        raise UserError(f"--dataset {path}: a tensor cannot be read as an array ({exc})") from None
    n = a["latency_s"].shape[0] if a["latency_s"].ndim == 1 else -1
    _require(n >= 0 and a["stats"].shape == (n, STAT_DIM), path,
             f"stats has shape {a['stats'].shape}, latency_s {a['latency_s'].shape}: expected (n, {STAT_DIM}) and (n,)")
    _require(a["node_x"].ndim == 2 and a["node_x"].shape[1] == NODE_DIM, path,
             f"node_x has shape {a['node_x'].shape}, expected (nodes, {NODE_DIM})")
    _require(a["edge_index"].ndim == 2 and a["edge_index"].shape[0] == 2 and a["edge_index"].dtype == np.int64, path,
             f"edge_index has shape {a['edge_index'].shape} ({a['edge_index'].dtype}), expected (2, edges) int64")
    for ptr, total in (("node_ptr", len(a["node_x"])), ("edge_ptr", a["edge_index"].shape[1])):
        p = a[ptr]
        _require(p.shape == (n + 1,) and p.dtype == np.int64 and p[0] == 0 and p[-1] == total and
                 bool(np.all(np.diff(p) >= 0)), path, f"{ptr} must be {n + 1} non-decreasing offsets from 0 to {total}")
    per_edge = np.repeat(np.diff(a["node_ptr"]), np.diff(a["edge_ptr"]))  # node count of each edge's graph
    e = a["edge_index"]
    _require(bool(np.all((e >= 0) & (e < per_edge))), path, "edge_index refers to nodes outside its graph")
    return a
