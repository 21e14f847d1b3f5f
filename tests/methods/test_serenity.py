"""SERENITY's scheduler ([Ahn-PhD] §3.4) against brute force, and the baselines' orders."""

import numpy as np
import pytest

from tunebench.datasets.graphs import abstract_graph, all_topological_orders, is_topological, peak_memory, random_dag
from tunebench.methods.graph_memory import dp
from tunebench.methods.graph_memory.orders import BASELINES, brute_force, kahn_order


def _dags(count: int):
    """``count`` random DAGs of 2..12 nodes (denser as they grow, so brute force stays short)."""
    rng = np.random.default_rng(11)
    for i in range(count):
        n = int(rng.integers(2, 13))
        p = 0.15 if n <= 8 else 0.2  # sparse: up to ~10^5 topological orders
        preds, nbytes = random_dag(n, p, seed=1000 + i, max_bytes=int(rng.choice([4, 64, 1000])))
        yield abstract_graph(preds, nbytes, f"dag{i}")


DAGS = list(_dags(60))
BRUTE = {}


def brute(g):
    """Brute force's least peak (computed once per graph)."""
    if g.name not in BRUTE:
        BRUTE[g.name] = brute_force(g)[1]
    return BRUTE[g.name]


def test_random_dags_cover_up_to_twelve_nodes():
    sizes = {len(g) for g in DAGS}
    orders = max(sum(1 for _ in all_topological_orders(g)) for g in DAGS if len(g) <= 8)
    assert len(DAGS) >= 50 and max(sizes) == 12 and min(sizes) <= 3 and orders > 100


@pytest.mark.parametrize("divide", [False, True])
def test_dp_equals_brute_force_on_every_random_dag(divide):
    for g in DAGS:
        order, peak = dp.schedule(g, divide)
        assert is_topological(g, order) and peak_memory(g, order)[0] == peak
        assert peak == brute(g), f"{g.name} ({len(g)} nodes): DP {peak} != brute force"


def test_soft_budgeting_keeps_the_optimum():
    for g in DAGS[:30]:
        stats = dp.DPStats()
        order, peak = dp.soft_budget_schedule(g, True, kahn_order(g), step_limit_s=5.0, stats=stats)
        assert peak == dp.schedule(g, False)[1] and stats.budgets and is_topological(g, order)


def test_soft_budget_below_the_optimum_finds_nothing_and_a_timeout_halves_it():
    g = DAGS[5]
    best = dp.schedule(g, False)[1]
    assert dp.schedule(g, False, budget=best - 1) is None
    assert dp.schedule(g, False, budget=best) is not None
    with pytest.raises(dp.Timeout):
        dp.schedule(g, False, step_limit_s=-1.0)  # an expired deadline is a 'timeout'
    stats = dp.DPStats()  # every run times out: tau halves twice, then the DP runs under the last timed-out tau
    dp.soft_budget_schedule(g, False, kahn_order(g), step_limit_s=-1.0, stats=stats, max_rounds=2)
    tau = stats.budgets
    assert tau[0] == peak_memory(g, kahn_order(g))[0] and tau[1] == tau[0] / 2 and tau[2] == tau[1]


def test_soft_budgeting_raises_tau_after_no_solution():
    """A binary search: 'no solution' raises tau halfway to the last timed-out tau, never lowers it."""
    g = DAGS[7]
    best = dp.schedule(g, False)[1]
    tau_max = peak_memory(g, kahn_order(g))[0]
    calls = []
    real = dp.schedule

    def scripted(graph, divide, budget=None, step_limit_s=None, stats=None):
        calls.append(budget)
        if budget == tau_max and len(calls) == 1:
            raise dp.Timeout()  # the first run, under tau_max, times out
        return real(graph, divide, budget, None, stats)

    import unittest.mock

    with unittest.mock.patch.object(dp, "schedule", scripted):
        order, peak = dp.soft_budget_schedule(g, False, kahn_order(g), step_limit_s=1.0)
    assert peak == best and calls[1] == tau_max / 2 and len(calls) >= 4
    after = calls[1:]
    for a, b in zip(after, after[1:]):  # each 'no solution' is followed by a larger tau
        assert b > a
    with pytest.raises(dp.Timeout):  # the whole search has a limit too
        dp.soft_budget_schedule(g, False, kahn_order(g), step_limit_s=0.0, total_limit_s=0.0)


def test_cut_nodes_split_an_hourglass_graph():
    # two diamonds joined at node 3: 0 -> {1, 2} -> 3 -> {4, 5} -> 6
    g = abstract_graph([(), (0,), (0,), (1, 2), (3,), (3,), (4, 5)], [1, 5, 2, 1, 3, 4, 1])
    parts = [bin(s).count("1") for s in dp.cut_segments(g)]
    assert parts == [1, 3, 3] and sum(parts) == len(g)
    assert dp.schedule(g, True)[1] == dp.schedule(g, False)[1] == brute_force(g)[1]


def test_baselines_are_topological_and_never_beat_the_dp():
    worse = 0
    for g in DAGS[:20]:
        best = dp.schedule(g, True)[1]
        for name, order_of in BASELINES.items():
            order = order_of(g)
            assert is_topological(g, order), name
            assert peak_memory(g, order)[0] >= best, name
            worse += peak_memory(g, order)[0] > best
    assert worse > 0  # the order matters on these graphs


def test_kahn_and_dfs_orders_by_hand():
    g = abstract_graph([(), (0,), (0,), (1,), (2,), (3, 4)], [1] * 6)
    assert kahn_order(g) == [0, 1, 2, 3, 4, 5]
    assert BASELINES["dfs"](g) == [0, 1, 3, 2, 4, 5]
    assert len(list(all_topological_orders(g))) == 6
