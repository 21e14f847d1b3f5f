"""Tasks and fake targets of the method conformance suite (``test_conformance.py``), derived from what a
method declares it needs (:class:`~tunebench.methods.base.TargetNeeds`), never from its name:

- one objective -> a latency target on a TVM-like task (a product space of split and choice knobs);
- several objectives -> an FPGA-like target (delay and LUTs, a capacity, a reference point) on a
  directive space pruned to a listed subset (:class:`~tunebench.listed_space.ListedSpace`);
- ``min_fidelities`` -> that many fidelities (cheapest first);
- ``compiles`` -> a tiny GEMM as real TIR (the method makes its own schedules) and a target with a
  ``tvm_target`` that "measures" a schedule trace by a function of its text, compiling nothing;
- ``graphs`` -> a random DAG to order (normal: 10 nodes, small: 4, empty: none) on a target whose tasks
  are graphs (``graph_schedules``), measuring an order by its config index like any other config.
- ``mapspace`` -> a small matrix product's mapspace on ``target=accel``'s default accelerator (the
  task's ``mod``) and a target whose details say ``mapspace``.

Every value is a deterministic function of the config (its index, or its trace text), so two runs
with the same seed must measure the same configs in the same order.
"""

from __future__ import annotations

import dataclasses
import zlib

from tunebench.history import History
from tunebench.listed_space import ListedSpace
from tunebench.methods.base import TargetNeeds
from tunebench.methods.tensor_programs.autotvm.tuner import throughput
from tunebench.record_file import record_line
from tunebench.search_space import ChoiceKnob, NumericKnob, Space, SplitKnob
from tunebench.task import Task
from tunebench.testing.fakes import FakeTarget

SIZES = ("normal", "small", "empty")  # small: more configs than any warm-up, few enough to measure them all
GEMM = {"normal": {"m": 16, "n": 16, "k": 16}, "small": {"m": 1, "n": 1, "k": 2}}  # small: 20 programs
TVM_TARGET = {"kind": "llvm", "num-cores": 1}
OBJECTIVES = ("delay_s", "luts")
CAPACITY = {"luts": 2000.0}


def _hash(config, salt: str = "") -> int:
    """A stable pseudo-random number of a knob config (its index) or a schedule (its trace text)."""
    key = getattr(config, "trace", None) or str(config.index)
    return zlib.crc32((salt + key).encode())


def latency(config) -> float:
    return 1e-3 * (1.0 + _hash(config) % 1000 / 100.0)


def pareto_values(fidelities: tuple[str, ...]):
    """``values(config, fidelity)`` of the FPGA-like target: delay and LUTs that trade off, each
    fidelity a perturbed estimate of the next."""
    def values(config, fidelity: str) -> dict:
        level = fidelities.index(fidelity)
        h, noise = _hash(config) % 1000 / 1000.0, _hash(config, fidelity) % 100 / 1000.0
        return {"delay_s": 1e-6 * (1.0 + 9.0 * h + noise), "luts": 100.0 + 1500.0 * (1.0 - h) + 50.0 * level}
    return values


def failures(top: str):
    """Failure injection: every sixth config fails at every fidelity, every third at the top fidelity
    (valid at the cheaper ones, as a design that does not fit after place and route)."""
    def fail(config, fidelity: str) -> str | None:
        if config.index % 6 == 0:
            return "injected failure (every fidelity)"
        if config.index % 3 == 0 and fidelity == top:
            return "injected failure (top fidelity)"
        return None
    return fail


def fitting_needs(needs: TargetNeeds) -> list[TargetNeeds]:
    """The kinds of fake target a method declares it runs on: ``objectives="any"`` is both a one-
    objective and a several-objective target (each case then names the one it stands for)."""
    if needs.objectives != "any":
        return [needs]
    return [dataclasses.replace(needs, objectives=kind) for kind in ("single", "multi")]


def static_rejects(config) -> str | None:
    """A static check that rejects every fourth config (as a GPU's limits would, before it is built)."""
    return "injected static rejection" if config.index % 4 == 1 else None


def target_for(needs: TargetNeeds, fail: bool = False, static: bool = False) -> FakeTarget:
    """A fake target the method can run on (``needs.problems`` of its info is empty); ``fail``: with
    :func:`failures`; ``static``: with the static check :func:`static_rejects`."""
    n = max(1, needs.min_fidelities)
    fids = ("hw",) if n == 1 else tuple(f"level{i}" for i in range(n))
    inject = failures(fids[-1]) if fail else None
    check = static_rejects if static else None
    if needs.objectives == "multi":
        return FakeTarget(name="fake_pareto", objectives=OBJECTIVES, fidelities=fids, values=pareto_values(fids),
                          fail=inject, static=check, reference_point=[1.0] * len(OBJECTIVES), capacity=CAPACITY)
    target = FakeTarget(latency, name="fake_latency", fidelities=fids, fail=inject, static=check,
                        tvm_target=TVM_TARGET if needs.compiles else None,
                        details={"mapspace": True} if needs.mapspace else None, lends=_lends(needs))
    target.graph_schedules = needs.graphs
    return target


def knob_space(size: str) -> Space:
    """TVM-like: every combination of split factors and choices (normal: 90 configs; small: 60; empty: none)."""
    knobs = [SplitKnob("tile_x", 16, 2), SplitKnob("tile_y", 12, 2),
             ChoiceKnob("unroll", (0, 512, 1500) if size == "normal" else (0, 512))]
    return ListedSpace(knobs, []) if size == "empty" else Space(knobs)  # a product space is never empty


def directive_space(size: str) -> ListedSpace:
    """FPGA-like: directive combinations left after pruning (normal: 52 of 64; small: 24; empty: none)."""
    knobs = [NumericKnob("unroll", (1, 2, 4, 8)), NumericKnob("partition", (1, 2, 4, 8)),
             ChoiceKnob("mode", ("cyclic", "block")), NumericKnob("pipeline", (0, 1))]
    rows = [(u, p, m, q) for u in range(4) for p in range(4) for m in range(2) for q in range(2) if u + p < 5]
    return ListedSpace(knobs, {"normal": rows, "small": rows[:24], "empty": []}[size])


def task_for(needs: TargetNeeds, size: str = "normal") -> Task:
    """A task for the target of ``target_for(needs)``; ``size`` one of :data:`SIZES`."""
    if needs.compiles:
        return _gemm_task(GEMM[size])
    if needs.graphs:
        return _graph_task(size)
    if needs.mapspace:
        return _mapspace_task(size)
    space = directive_space(size) if needs.objectives == "multi" else knob_space(size)
    return Task(id=f"c0f{SIZES.index(size)}00000001", name=f"conformance_{size}", kind="dense", mod=None,
                shape={}, flops=2 * 10**6, space=space)


GRAPH_NODES = {"normal": 10, "small": 4, "empty": 0}


def _graph_task(size: str) -> Task:
    from tunebench.datasets.graphs import abstract_graph, random_dag

    preds, nbytes = random_dag(GRAPH_NODES[size], 0.3, seed=3) if GRAPH_NODES[size] else ([], [])
    graph = abstract_graph(preds, nbytes, f"conformance_dag_{size}")
    return Task(id=f"c0d{SIZES.index(size)}00000001", name=f"conformance_dag_{size}", kind="graph", mod=graph,
                shape={"nodes": len(graph)}, flops=0)


def _lends(needs: TargetNeeds) -> dict | None:
    """What the target lends a method that searches mapspaces: ``target=accel``'s (ZigZag's model)."""
    if not needs.mapspace:
        return None
    from tunebench.targets.accel.target import AccelTarget

    return dict(AccelTarget.lends)


def _mapspace_task(size: str) -> Task:
    """A matrix product on the accelerator (normal: temporal B 4, K 2, C 2, 207 360 mappings; small: C 2
    only, 4 mappings; empty: the same task with an empty space)."""
    from tunebench.listed_space import ListedSpace
    from tunebench.targets.accel.settings import AccelSettings
    from tunebench.targets.accel.target import make_mapspace

    spec = {"batch": 4, "in_features": 32, "out_features": 32} if size == "normal" else \
        {"batch": 1, "in_features": 32, "out_features": 16}
    ms = make_mapspace(AccelSettings(), spec)
    space = ListedSpace(ms.space.knobs, []) if size == "empty" else ms.space
    return Task(id=f"c0f{SIZES.index(size)}00000002", name=f"conformance_map_{size}", kind="dense", mod=ms,
                shape=spec, flops=2 * 4 * 32 * 32, space=space)


def _gemm_task(shape: dict) -> Task:
    from tunebench.targets.tvm.workloads.tasks import operator_task

    return operator_task("gmm", shape, "conformance_gmm")


def sibling_history(task: Task, needs: TargetNeeds, n: int = 32) -> History:
    """A history as a transfer method finds it: the records of an earlier task of the same kind and
    shape (another id), measured on a target of ``target_for(needs)`` (GFLOPS filled in, as real
    targets do). Empty for a task without a knob space."""
    history = History()
    if task.space is None or task.space.size == 0:
        return history
    sibling = dataclasses.replace(task, id="5151" + task.id[4:], name=task.name + "_earlier")
    configs = [sibling.space.get(i) for i in range(0, sibling.space.size, max(1, sibling.space.size // n))]
    recs = [{**record_line(m, sibling), "gflops": throughput(m, sibling.flops)}
            for m in target_for(needs).measure(sibling, configs)]
    history.add_records(recs)
    return history
