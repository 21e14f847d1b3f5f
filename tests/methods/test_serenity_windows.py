"""``method.front_end=hmcos_groups``: SERENITY's DP inside the windows of HMCOS's order (HMCOS's groups),
against brute force on small graphs (the least peak of the orders that keep the windows in sequence, and
of all orders), against HMCOS's peak, and the peak measured by running the order in PyTorch."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tunebench.datasets.graphs import abstract_graph, all_topological_orders, is_topological, peak_memory, random_dag
from tunebench.methods import make_method
from tunebench.methods.graph_memory import dp, hmcos, windows


def _graph(preds, nbytes, ops, name="g"):
    g = abstract_graph(preds, nbytes, name)
    g.ops[:] = ops
    return g


def two_cells():
    """Two cells of two branches each (a big tensor, then a small one), each ending in a cat: HMCOS
    makes a group of each; every cell's best order runs one branch to its end first."""
    preds = [(), (0,), (0,), (1,), (2,), (3, 4), (5,), (5,), (6,), (7,), (8, 9)]
    nbytes = [1, 8, 8, 1, 1, 2, 9, 9, 1, 1, 2]
    ops = ["input", "op", "op", "op", "op", "cat", "op", "op", "op", "op", "cat"]
    return _graph(preds, nbytes, ops, "two_cells")


def _random_cells(count: int):
    rng = np.random.default_rng(66)
    for i in range(count):
        n = int(rng.integers(4, 10))
        preds, nbytes = random_dag(n, 0.3, seed=6600 + i, max_bytes=int(rng.choice([8, 100])))
        ops = ["input"] + ["cat" if rng.random() < 0.35 else "op" for _ in range(n - 1)]
        yield _graph(preds, nbytes, ops, f"cell{i}")


def _windowed_optimum(g, wins) -> int:
    """Brute force: the least peak of the topological orders that run the windows one after the other."""
    rank = {v: i for i, w in enumerate(wins) for v in w}
    return min(peak_memory(g, o)[0] for o in all_topological_orders(g)
               if all(rank[a] <= rank[b] for a, b in zip(o, o[1:])))


def _serenity(g, **settings):
    method = make_method({"name": "serenity", "front_end": "hmcos_groups", "rewrite": [], **settings})
    method.target_info, method.info = SimpleNamespace(capacity=None), {}
    return method._schedule_graph(g, ""), method.info


def test_group_windows_cut_where_a_group_starts_and_none_is_open():
    order = [0, 1, 2, 3, 4, 5, 6, 7]
    groups = [-1, 0, 0, -1, 1, 2, 1, 2]  # 3 follows group 0 (stays with it); groups 1 and 2 interleave
    assert windows.group_windows(order, groups) == [[0], [1, 2, 3], [4, 5, 6, 7]]
    assert windows.group_windows(order, groups, 2) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert windows.group_windows(order, [-1] * 8) == [order]


def test_split_large_keeps_the_order_and_the_cap():
    g = next(iter(_random_cells(1)))
    order = list(range(len(g)))
    for cap in (2, 3, 5):
        parts = windows.split_large(g, [order], cap)
        assert [v for p in parts for v in p] == order and all(len(p) <= cap for p in parts)
    assert windows.split_large(g, [order], None) == [order]


def test_two_cells_known_optimum():
    g = two_cells()
    assert peak_memory(g, list(range(len(g))))[0] == 2 + 9 + 9 and dp.schedule(g, False)[1] == 2 + 9 + 1
    order, info = _serenity(g)
    assert is_topological(g, order) and peak_memory(g, order)[0] == 12
    assert info["windows"] == 3 and info["front_end_peak"] >= 12  # the input, then one window per cell


def test_windows_exact_among_orders_that_keep_them_and_never_above_hmcos():
    """On random small graphs: the windows' schedule is brute force's least peak over the orders that
    keep the windows in sequence, at least the optimum over all orders, at most HMCOS's peak."""
    cells, windowed = list(_random_cells(40)), 0
    for g in cells:
        stats = hmcos.HmcosStats()
        h_order, h_peak = hmcos.hmcos_schedule(g, "live", hmcos.Options(), stats)
        wins = windows.group_windows(h_order, stats.node_groups)
        order, peak = windows.window_schedule(g, wins)
        assert is_topological(g, order) and peak == peak_memory(g, order)[0] <= h_peak
        assert peak == _windowed_optimum(g, wins) >= dp.schedule(g, False)[1]
        windowed += len(wins) > 1
        got, _ = _serenity(g)
        assert is_topological(g, got) and dp.schedule(g, False)[1] <= peak_memory(g, got)[0] <= h_peak
    assert windowed >= 10  # the test covers graphs with several windows


def test_window_bound_is_a_lower_bound():
    """On random small graphs: the bound of every window is at most its least peak (brute force)."""
    for g in _random_cells(25):
        stats = hmcos.HmcosStats()
        h_order = hmcos.hmcos_schedule(g, "live", hmcos.Options(), stats)[0]
        masks, start = dp.Masks(g), 0
        for w in windows.group_windows(h_order, stats.node_groups):
            seg = sum(1 << v for v in w)
            least = dp.dp_segment(masks, start, seg, 0, None, None, dp.DPStats())[1]
            assert windows.window_bound(g, masks, start, seg) <= least
            start |= seg


def test_a_window_past_the_deadline_keeps_hmcos_order():
    g = two_cells()
    stats = hmcos.HmcosStats()
    h_order, h_peak = hmcos.hmcos_schedule(g, "live", hmcos.Options(), stats)
    ws = windows.WindowStats()
    order, peak = windows.window_schedule(g, windows.group_windows(h_order, stats.node_groups), -1.0, ws)
    assert ws.timed_out and order == h_order and peak == h_peak


def test_measured_peak_equals_computed_on_stacked_cells():
    """Three DARTS cells of HMCOS's networks (tiny: 4 channels, 8 x 8), run in PyTorch in SERENITY's order."""
    from tunebench.datasets.graphs import trace_graph
    from tunebench.datasets.hmcos_nets import GENOTYPES, LEAVES, NasCell
    from tunebench.targets.memory.execute import execute

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 4, 3, 1, 1)
            cells, c_pp, c_p = [], None, 4
            for _ in range(3):
                cells.append(NasCell(c_pp, c_p, 4, GENOTYPES["darts"], False, False))
                c_pp, c_p = c_p, cells[-1].out_channels
            self.cells = torch.nn.ModuleList(cells)

        def forward(self, x):
            prev, cur = None, self.stem(x)
            for cell in self.cells:
                prev, cur = cur, cell(prev, cur)
            return cur

    torch.manual_seed(0)
    g = trace_graph(Tiny().eval(), torch.randn(1, 3, 8, 8), "tiny_darts", LEAVES)
    order, info = _serenity(g)
    assert info["windows"] >= 2 and is_topological(g, order)
    assert execute(g, order).peak_bytes == peak_memory(g, order)[0] <= info["front_end_peak"]


@pytest.mark.parametrize("k,count", [(1, 3), (2, 2), (3, 1)])
def test_window_groups_joins_windows(k, count):
    order, info = _serenity(two_cells(), window_groups=k)
    assert info.get("windows", 1) == count  # one window: the DP over the whole graph (no "windows")
    assert peak_memory(two_cells(), order)[0] == 12
