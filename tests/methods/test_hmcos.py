"""HMCOS ([Wang-DAC22]): its scheduler on hand-made graphs with known optimal peaks and against the exact
DP on random DAGs, its memory accounting, HMCOS's networks as graph models, and their bad inputs."""

import numpy as np
import pytest

from tunebench.datasets.graphs import abstract_graph, is_topological, peak_memory, random_dag
from tunebench.datasets.memory_accounting import StepModel, peak_of
from tunebench.methods.graph_memory import dp, hmcos
from tunebench.methods.graph_memory.hmcos_hier import build
from tunebench.methods.graph_memory.orders import program_order, rpo_order


def _graph(preds, nbytes, ops=None, name="g"):
    g = abstract_graph(preds, nbytes, name)
    if ops:
        g.ops[:] = ops
    return g


def two_branch_cell():
    """x -> (big a -> small a'), x -> (big b -> small b'), cat(a', b'): program order holds both big
    tensors (1 + 8 + 8 = 17); the best order runs one branch to its end first: peak 1 + 8 + 1 = 10."""
    preds = [(), (0,), (0,), (1,), (2,), (3, 4)]
    return _graph(preds, [1, 8, 8, 1, 1, 2], ["input", "op", "op", "op", "op", "cat"], "two_branch")


def test_two_branch_cell_known_optimum():
    g = two_branch_cell()
    assert peak_memory(g, program_order(g))[0] == 17
    for opts in (hmcos.Options(), hmcos.Options(make_groups=False), hmcos.Options(join=False, try_rpo=False)):
        order, peak = hmcos.hmcos_schedule(g, "live", opts)
        assert is_topological(g, order) and peak == peak_memory(g, order)[0] == 10


def test_cell_output_makes_a_group():
    g = two_branch_cell()
    hier = build(g, StepModel(g), join=True, make_groups=True)
    assert len(hier.groups()) == 1  # everything the cat post-dominates: the whole cell but the input
    assert sorted(v for s, gid in enumerate(hier.group_of) if gid >= 0 for v in hier.seqs[s]) == [1, 2, 3, 4, 5]
    assert build(g, StepModel(g), join=True, make_groups=False).groups() == {}


def test_chain_joins_into_one_sequence_when_memory_does_not_grow():
    # x (4) then a (4, holding x: 8 > 4) starts a new sequence; b (2) and c (1) each free their input and
    # stay below a's 4: they join a's sequence
    g = _graph([(), (0,), (1,), (2,)], [4, 4, 2, 1])
    assert build(g, StepModel(g), True, False).seqs == [[0], [1, 2, 3]]
    grow = _graph([(), (0,), (1,)], [1, 2, 8])  # the memory grows: the nodes stay apart
    assert len(build(grow, StepModel(grow), True, False).seqs) == 3


def test_hmcos_accounting_overwrites_a_dying_input():
    """x (4) -> relu (4) -> pool (1): relu holds x and its output (8) in ours; in HMCOS's it writes over x (4)."""
    g = _graph([(), (0,), (1,)], [4, 4, 1], ["input", "ReLU", "AvgPool2d"])
    assert peak_of(g, [0, 1, 2], "live") == 8 and peak_of(g, [0, 1, 2], "hmcos") == 5
    assert hmcos.hmcos_schedule(g, "hmcos")[1] == 5
    kept = _graph([(), (0,), (1,), (0, 2)], [4, 4, 1, 1], ["input", "ReLU", "AvgPool2d", "op"])  # x still needed
    assert peak_of(kept, [0, 1, 2, 3], "hmcos") == peak_of(kept, [0, 1, 2, 3], "live") == 9


def _random_cells(count: int):
    rng = np.random.default_rng(5)
    for i in range(count):
        n = int(rng.integers(3, 15))
        preds, nbytes = random_dag(n, 0.25, seed=500 + i, max_bytes=int(rng.choice([8, 100])))
        ops = ["cat" if rng.random() < 0.25 else str(rng.choice(["op", "add", "ReLU"])) for _ in range(n)]
        yield _graph(preds, nbytes, ops, f"cell{i}")


@pytest.mark.parametrize("accounting", ["live", "hmcos"])
def test_never_below_the_exact_dp_on_random_dags(accounting):
    """A heuristic: its peak is at least the optimum (our DP, exact for the live accounting; for HMCOS's
    the DP without groups over single nodes is exact) and its order has the peak it reports."""
    cells = list(_random_cells(60))
    assert len(cells) >= 50
    for g in cells:
        order, peak = hmcos.hmcos_schedule(g, accounting)
        assert is_topological(g, order) and peak_of(g, order, accounting) == peak
        exact = hmcos.hmcos_schedule(g, accounting, hmcos.Options(join=False, make_groups=False))[1]
        if accounting == "live":
            assert exact == dp.schedule(g, False)[1]
        assert peak >= exact
        assert peak <= peak_of(g, rpo_order(g), accounting) or peak <= peak_of(g, program_order(g), accounting)


def test_time_limit_before_a_first_schedule_raises():
    g = two_branch_cell()
    with pytest.raises(hmcos.Timeout):
        hmcos.hmcos_schedule(g, "live", hmcos.Options(time_limit_s=-1.0))


def test_rpo_is_a_reverse_post_order():
    g = two_branch_cell()
    assert rpo_order(g) == [0, 2, 4, 1, 3, 5]  # the DFS finishes the last-listed branch first


# ---- HMCOS's networks -------------------------------------------------------------------------
def test_ws_graph_is_the_ring_lattice_rewired():
    from tunebench.datasets.hmcos_nets import ws_edges

    for seed in range(10):
        edges = ws_edges(32, 4, 0.75, seed)
        assert len(edges) == 32 * 4 // 2 and len(set(edges)) == len(edges)  # rewiring moves edges, keeps n*k/2
        assert all(0 <= a < b < 32 for a, b in edges)
    assert ws_edges(32, 4, 0.0, 0) == sorted({(min(i, (i + j) % 32), max(i, (i + j) % 32))
                                              for i in range(32) for j in (1, 2)})


def _load(name):
    from tunebench.datasets.graph_models import HmcosNetModel, load_graphs

    (g,) = load_graphs(HmcosNetModel(name=name))
    return g


@pytest.mark.slow  # builds and runs the whole network once (about 12 s on a quiet 2-core machine)
def test_randwire_graph_counts():
    """Nodes: stem 3 + input; per WS node (stack + matmul when it has several inputs) + ReLU, depthwise,
    pointwise; per cell the output's stack and mean; head conv, pool, flatten, dense. Edges likewise."""
    from tunebench.datasets.hmcos_nets import ws_edges

    g = _load("hmcos_randwire")
    nodes, edges = 4, 3
    for cell in range(3):
        preds = [[a for a, b in ws_edges(32, 4, 0.75, cell) if b == v] for v in range(32)]
        multi = [len(ps) for ps in preds if len(ps) > 1]
        sinks = sum(1 for v in range(32) if not any(v in ps for ps in preds))
        nodes += 32 * 3 + 2 * len(multi) + 2
        edges += 32 * 3 + sum(multi) + len(multi) + sinks + 1  # ReLU-dw-pw; stack inputs, matmul; output
    nodes += 4
    edges += 4
    assert len(g) == nodes == 410
    assert g.n_edges == edges


@pytest.mark.slow  # 3-4 s per network on a quiet machine
@pytest.mark.parametrize("name,nodes", [("hmcos_darts_imagenet", 584), ("hmcos_nasnet_cifar", 876)])
def test_nas_graph_counts(name, nodes):
    """Per cell: squeeze (ReLU, conv), the older input's fit (none / ReLU, conv / the factorized reduction:
    ReLU, two convs, pad, slice, cat, BN), each operation's nodes, one add per block, the output cat; plus
    input, stem, and ReLU, pool, flatten, dense."""
    from tunebench.datasets.hmcos_nets import GENOTYPES, NAS_NETS, NAS_SIZES

    net, data = NAS_NETS[name]
    n, _ = NAS_SIZES[(net, data)]
    kinds = ["n"] * n + ["r"] + ["n"] * n + ["r"] + ["n"] * n if data == "cifar" else \
        ["r", "r"] + ["n"] * n + ["r"] + ["n"] * n + ["r"] + ["n"] * n
    per_op = {"id": 0, "sep3x3": 6, "sep5x5": 6, "sep7x7": 6, "dil3x3": 3, "1x77x1": 2, "avg3x3": 1, "max3x3": 1}
    total, prev_kind = 2 + 4, None
    for i, kind in enumerate(kinds):
        geno = GENOTYPES[net]["reduction" if kind == "r" else "normal"]
        fit = 0 if i == 0 else (7 if prev_kind == "r" else 2)
        total += 2 + fit + sum(per_op[op] for block in geno for op, _ in block) + len(geno) + 1
        prev_kind = kind
    g = _load(name)
    assert len(g) == total == nodes
    assert sum(op == "cat" for op in g.ops) == len(kinds) + sum(1 for i, k in enumerate(kinds[:-1]) if k == "r")


def test_serenity_with_hmcos_front_end_keeps_the_optimum():
    """HMCOS's peak is the DP's hard budget: the DP still finds the optimum, at most HMCOS's peak."""
    from types import SimpleNamespace

    from tunebench.methods import make_method

    for g in list(_random_cells(20)):
        method = make_method({"name": "serenity", "front_end": "hmcos", "rewrite": []})
        method.target_info, method.info = SimpleNamespace(capacity=None), {}
        order = method._schedule_graph(g, "")
        peak = peak_memory(g, order)[0]
        assert is_topological(g, order) and peak == dp.schedule(g, False)[1] <= method.info["front_end_peak"]
