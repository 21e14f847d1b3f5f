"""HMCOS's fast DPs (:mod:`tunebench.methods.graph_memory.hmcos_dp`) give the plain DP's answer: the same order
and peak, ties included, on random DAGs with and without groups, under both accountings."""

import math

import numpy as np
import pytest

from tunebench.datasets.graphs import abstract_graph, random_dag
from tunebench.datasets.memory_accounting import StepModel
from tunebench.methods.graph_memory import hmcos
from tunebench.methods.graph_memory.hmcos_dp import Clock, SeqRunner, Units, least_peak_dp, ordered_dp, run_unit


class PlainScheduler(hmcos.HierScheduler):
    """The reference: HMCOS's DP as its text states it, each step by :meth:`StepModel.step`."""

    def dp(self, preds, start, seq_of, unit_masks, budget, run_other=None):
        n = len(preds)
        succs = [[j for j in range(n) if preds[j] >> i & 1] for i in range(n)]

        def run(i, state):
            if seq_of[i] is None:
                return run_other(i, state)
            peak, live, done, link = state
            nodes = self.runner.nodes[seq_of[i]]
            got = self.run_nodes(nodes, done, live, peak, budget)
            return None if got is None else (*got, (link, nodes))

        layer = {0: (start, sum(1 << i for i in range(n) if not preds[i]))}
        for _ in range(n):
            nxt = {}
            for mask, (state, ready) in layer.items():
                for i in range(n):
                    if not ready >> i & 1:
                        continue
                    key, old = mask | 1 << i, nxt.get(mask | 1 << i)
                    got = run(i, state)
                    if got is None or (old is not None and old[0][0] <= got[0]):
                        continue
                    new_ready = ready & ~(1 << i)
                    for j in succs[i]:
                        if not preds[j] & ~key:
                            new_ready |= 1 << j
                    nxt[key] = (got, new_ready)
            if not nxt:
                return None
            self.stats.states += len(nxt)
            layer = nxt
        return layer[(1 << n) - 1][0]


def _random_graphs(count: int, cat_share: float, seed: int):
    rng = np.random.default_rng(seed)
    for k in range(count):
        n = int(rng.integers(4, 17))
        preds, nbytes = random_dag(n, float(rng.choice([0.2, 0.35])), seed=seed * 1000 + k,
                                   max_bytes=int(rng.choice([3, 8, 100])))  # few distinct sizes: many ties
        g = abstract_graph(preds, nbytes, f"g{k}")
        g.ops[:] = ["cat" if rng.random() < cat_share else str(rng.choice(["op", "add", "ReLU"])) for _ in range(n)]
        yield g


@pytest.mark.parametrize("accounting", ["live", "hmcos"])
@pytest.mark.parametrize("cat_share", [0.0, 0.3])
def test_same_schedule_as_the_plain_dp(accounting, cat_share):
    """No cat: no group, the top level is all sequences without a budget (:func:`least_peak_dp`); with
    cats: groups, RPO, memoized group DPs and budgets from the second iteration on (:func:`ordered_dp`)."""
    for g in _random_graphs(80, cat_share, seed=7 if cat_share else 8):
        for opts in (hmcos.Options(), hmcos.Options(join=False), hmcos.Options(try_rpo=False, memo_groups=False)):
            model = StepModel(g, accounting)
            fast, plain = hmcos.HierScheduler(g, model, opts), PlainScheduler(g, model, opts)
            assert fast.schedule() == plain.schedule(), g.name
            assert fast.stats.iterations == plain.stats.iterations and fast.stats.peaks == plain.stats.peaks


def _units(g, accounting="live"):
    """Every node its own sequence: units over the whole graph."""
    runner = SeqRunner(StepModel(g, accounting), [[v] for v in range(len(g))])
    preds = [sum(1 << p for p in g.preds[v]) for v in range(len(g))]
    return runner.model, Units.of(runner, preds, list(range(len(g))), runner.masks, 0)


@pytest.mark.parametrize("accounting", ["live", "hmcos"])
def test_least_peak_dp_is_the_ordered_dp_without_a_budget(accounting):
    for g in _random_graphs(60, 0.0, seed=9):
        _, units = _units(g, accounting)
        start = (0, 0, 0, None)
        assert least_peak_dp(units, start, Clock(None))[0] == ordered_dp(units, start, math.inf, None, Clock(None))[0]


@pytest.mark.parametrize("accounting", ["live", "hmcos"])
def test_unit_programs_step_like_the_step_model(accounting):
    """A unit's program after any prefix of the program order gives :meth:`StepModel.step`'s peak and live
    bytes, and None under a budget below that peak."""
    for g in _random_graphs(40, 0.0, seed=11):
        model, units = _units(g, accounting)
        for u in range(len(g)):
            done = (1 << u) - 1  # nodes 0..u-1 ran (unit i is node i)
            live = model.live_after(done)
            up, after = model.step(done, live, u)
            assert run_unit(units.progs[u], done, live, 0, math.inf) == (up, after)
            assert run_unit(units.progs[u], done, live, 0, up - 1) is None
