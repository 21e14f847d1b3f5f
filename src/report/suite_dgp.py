"""dgp in the suite ([Sun-ICCV21]; docs/METHODS.md §dgp): where it runs, its sources, its preparation.

dgp transfers within a group (:mod:`tunebench.methods.tensor_programs.dgp.layer_groups`): a TVM layer's group is its
operator, kernel, padding and stride; a Kernel Tuner cache's is the same kernel with the same knobs
measured on another GPU. On a space, dgp's sources are the other spaces of the suite in its group, and
their history is autotvm's seed-0 run on each of them (the paper's source layers are tuned by AutoTVM;
one source history for every seed, as a user has one). A space alone in its group has no source: dgp
would be autotvm there, so it is not run on it, and the summary says so with the reason.

The preparation: once per space, after its sources' autotvm runs, the deep GP is pre-trained on their
records, as seed 0's run would set it up, and written to a file (:mod:`tunebench.methods.tensor_programs.dgp.prepared`)
that every seed's run reads before its clock starts (``method.pretrained``): source tuning and
pre-training are on no seed's clock, as [Sun-ICCV21] accounts them ("The DGP preparation step is
task-independent", §3.2). The files go to ``records/suite_dgp/`` of the working folder.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field

from tunebench.errors import UserError

METHOD = "dgp"
SOURCE_METHOD = "autotvm"


@dataclass
class DgpPlan:
    """dgp's part of a suite: its unit's method key, each space's source spaces, the spaces it is not run
    on (space -> why), the autotvm units whose seed 0 gives the sources (the suite's own, or ``extra``
    ones run only as sources, not scored) and where the preparations go."""

    method: str
    sources: dict[str, list[str]]
    skipped: dict[str, str]
    source_method: str
    extra: dict = field(default_factory=dict)
    folder: str = ""


def space_group(path: str) -> tuple:
    """The group dgp gives the space in ``path``: that of the task ``target=replay`` makes of it."""
    from tunebench.datasets.models import MeasuredModel
    from tunebench.methods.tensor_programs.dgp.layer_groups import task_group
    from tunebench.targets.replay import ReplaySettings, ReplayTarget

    return task_group(ReplayTarget(ReplaySettings()).load_tasks(MeasuredModel(path=path))[0][0])


def source_spaces(groups: dict[str, tuple]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Each space's sources (the other spaces of its group) and, for a space with none, why."""
    from tunebench.methods.tensor_programs.dgp.layer_groups import group_name

    sources = {n: [o for o in groups if o != n and groups[o] == g] for n, g in groups.items()}
    skipped = {n: f"no source: no other space of the set is in its group ({group_name(groups[n])})"
               for n, found in sources.items() if not found}
    return {n: s for n, s in sources.items() if s}, skipped


def plan(units: dict, paths: dict[str, str], compose) -> DgpPlan | None:
    """dgp's plan when it is among the methods (None otherwise); its units on spaces with no source are
    removed from ``units``. ``compose(method, paths)``: the suite's units of one more method (autotvm,
    when it is not among the methods, run only as dgp's sources). Raises UserError when no space has a
    source."""
    keys = [k for k, d in units.items() if d["method"]["name"] == METHOD]
    if not keys:
        return None
    method = keys[0][1]
    sources, skipped = source_spaces({n: space_group(p) for n, p in paths.items()})
    if not sources:
        raise UserError(f"--methods {method}: no space has a source (another space of its group): "
                        + "; ".join(f"{n}: {why}" for n, why in skipped.items()))
    for n in skipped:
        del units[(n, method)]
    scored = [k[1] for k, d in units.items() if d["method"]["name"] == SOURCE_METHOD]
    needed = sorted({s for found in sources.values() for s in found})
    extra = {} if scored else compose(SOURCE_METHOD, {n: paths[n] for n in needed})
    return DgpPlan(method, sources, skipped, scored[0] if scored else SOURCE_METHOD, extra,
                   os.path.join(os.getcwd(), "records", "suite_dgp"))


def prepared_path(dgp: DgpPlan, space: str, history: str) -> str:
    """Where the preparation of ``space`` on the record files ``history`` goes (one file per source set)."""
    return os.path.join(dgp.folder, f"{space}.{hashlib.sha256(history.encode()).hexdigest()[:12]}.pt")


def prepare(data: dict, history: str, path: str) -> dict:
    """Pre-train dgp's DGP for the space of ``data`` (a dgp unit's config) on the record files ``history``
    (comma-separated) as seed 0's run would set it up, and write it to ``path``: what was done, in how long."""
    from tunebench.harness.setup.load import load_experiment
    from tunebench.harness.tuning import task_rng
    from tunebench.history import History
    from tunebench.methods import make_method
    from tunebench.methods.tensor_programs.dgp.prepared import save_pretrained
    from tunebench.targets import make_target

    tic = time.perf_counter()
    cfg = load_experiment({**data, "seed": 0})
    target = make_target(cfg.target, cfg.measure)
    try:
        task = target.load_tasks(cfg.model)[0][0]
        hist = History.load(history)
        made = make_method(cfg.method).pretrain(task, target.task_info(task), hist, cfg.budget, task_rng(0, task))
    finally:
        target.close()
    if made is None:
        raise UserError(f"dgp on {task.name}: the source runs' records ({history}) hold no valid measurement")
    key, model = made
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    save_pretrained(tmp, key, model, {"history": history})
    os.replace(tmp, path)  # whole or not at all
    return {"file": path, "records": int(model.last_fit.get("n") or 0), "fit_s": float(model.last_fit["seconds"]),
            "seconds": time.perf_counter() - tic, "history": history.split(",")}


def with_preparation(data: dict, history: str, path: str) -> dict:
    """A dgp unit's config that transfers from ``history`` with the DGP prepared in ``path``."""
    return {**data, "method": {**data["method"], "history": history, "pretrained": path}}


def summary(dgp: DgpPlan, prepared: dict, done: dict) -> dict:
    """dgp's part of the suite's summary: each space's sources, their runs, its preparation; the spaces
    it was not run on and why."""
    runs = {k[0]: r[0] for k, r in done.items() if k[1] == dgp.source_method and k[2] == 0}
    return {"sources": dgp.sources, "source_runs": {n: {s: runs.get(s) for s in found} for n, found in dgp.sources.items()},
            "source_method": SOURCE_METHOD, "source_seed": 0, "not_run": dgp.skipped,
            "prepared": prepared, "extra_source_runs": sorted(runs[k[0]] for k in dgp.extra if k[0] in runs)}


class Schedule:
    """The suite's jobs in the order they may run: ``("run", unit key, seed)`` and, with dgp,
    ``("prepare", space)``. Sources first (autotvm's seed 0 on dgp's source spaces), then every other
    run; a space's preparation as soon as its sources are done (ahead of the queue); dgp's seeds on a
    space once its preparation is done."""

    def __init__(self, units: dict, seeds: int, dgp: DgpPlan | None, run=None):
        """``run(data, seed)``: the function of a run job (the suite's ``run_one``)."""
        from collections import deque

        self.run = run
        self.data, self.dgp, self.files, self.prepared = {**units}, dgp, {}, {}
        jobs = [("run", key, seed) for key in units for seed in range(seeds)]
        self.waiting: dict[str, list] = {}
        self.needs: dict[str, set] = {}
        first = []
        if dgp is not None:
            self.data.update(dgp.extra)
            for n, found in dgp.sources.items():
                self.waiting[n] = [j for j in jobs if j[1] == (n, dgp.method)]
                self.needs[n] = {("run", (s, dgp.source_method), 0) for s in found}
            first = sorted({j for need in self.needs.values() for j in need})
            jobs = [j for j in jobs if j[1][1] != dgp.method and j not in first]
        self.ready = deque(first + jobs)

    def pop(self):
        """The next job that may run now (None: none until a running one ends)."""
        return self.ready.popleft() if self.ready else None

    def call(self, job) -> tuple:
        """``(function, *arguments)`` of ``job``."""
        if job[0] == "prepare":
            return (prepare, self.data[(job[1], self.dgp.method)], *self.prepared[job[1]])
        return self.run, self.data[job[1]], job[2]

    def done(self, job, result) -> None:
        """``job`` ended with ``result``: the jobs it held back may run."""
        if self.dgp is None:
            return
        if job[0] == "prepare":
            key = (job[1], self.dgp.method)
            self.data[key] = with_preparation(self.data[key], *self.prepared[job[1]])
            self.ready.extend(self.waiting.pop(job[1]))
            return
        for n, need in self.needs.items():
            if job in need:
                self.files[job[1][0]] = result[2]
                need.discard(job)
                if not need and n not in self.prepared:
                    history = ",".join(self.files[s] for s in self.dgp.sources[n])
                    self.prepared[n] = (history, prepared_path(self.dgp, n, history))
                    self.ready.appendleft(("prepare", n))
