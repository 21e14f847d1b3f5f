"""target=memory: the arena, Belady's traffic, the measured peak against the computed one, the
rewrite's outputs, bad input, and a run through the driver."""

import pytest
import torch
from mlflow.tracking import MlflowClient

from tunebench.datasets.graph_models import load_graphs
from tunebench.datasets.graph_rewrite import rewrite
from tunebench.datasets.graphs import abstract_graph, peak_memory, trace_graph
from tunebench.datasets.models import MODEL_OPTIONS
from tunebench.errors import UserError
from tunebench.methods.graph_memory import dp
from tunebench.targets.memory.execute import execute, outputs_match, reference_outputs
from tunebench.targets.memory.plan import arena_offsets, arena_peak, offchip_traffic
from tunebench.targets.memory.target import check_graphs
from tunebench.task import Outcome

torch.set_num_threads(1)


def _model(name: str, **change):
    import dataclasses

    return dataclasses.replace(MODEL_OPTIONS[name], **change)


@pytest.fixture(scope="module")
def darts():
    return load_graphs(_model("darts_v2"))[0]


@pytest.fixture(scope="module")
def randwire():
    return load_graphs(_model("randwire_cifar10", stages=[3], nodes=12))[0]


# ---- TFLite's simple memory arena, by hand --------------------------------------------------------
def test_arena_reuses_a_freed_block_and_aligns_offsets():
    g = abstract_graph([(), (0,), (1,)], [100, 50, 100])  # A -> B -> C
    # A at 0; B cannot share A's block (A is read while B is written): at align(100) = 128, end 178;
    # A freed; C fits in the hole before B: at 0. Live sum 150, arena 178.
    assert peak_memory(g, [0, 1, 2])[0] == 150
    assert arena_peak(g, [0, 1, 2], alignment=64) == 178
    assert arena_peak(g, [0, 1, 2], alignment=1) == 150


def test_arena_takes_the_smallest_hole_that_fits():
    events = [("alloc", 0, 128), ("alloc", 1, 64), ("alloc", 2, 64), ("alloc", 3, 64),
              ("free", 0, 128), ("free", 2, 64), ("alloc", 4, 64)]
    size, offsets = arena_offsets(events, alignment=64)
    assert offsets == {0: 0, 1: 128, 2: 192, 3: 256, 4: 192} and size == 320  # hole 192..256, not 0..128


def test_arena_puts_what_fits_no_hole_at_the_end():
    events = [("alloc", 0, 64), ("alloc", 1, 64), ("alloc", 2, 64), ("free", 1, 64), ("alloc", 3, 32),
              ("alloc", 4, 128)]
    size, offsets = arena_offsets(events, alignment=64)
    assert offsets[3] == 64 and offsets[4] == 192 and size == 320


# ---- Belady's replacement, by hand --------------------------------------------------------------
def test_belady_evicts_the_tensor_used_farthest_ahead():
    # a, b, c sources (10 B each); d reads b, e reads a, f reads c, d, e (1 B each); 30 B on chip.
    g = abstract_graph([(), (), (), (1,), (0,), (2, 3, 4)], [10, 10, 10, 1, 1, 1])
    # step 3 (d) needs 31 B: of a (next use: step 4) and c (step 5), c goes out (10 B written) and is
    # read back at step 5 (10 B); b is dead after step 3, a after step 4: nothing else moves.
    assert offchip_traffic(g, [0, 1, 2, 3, 4, 5], 30) == 20
    assert offchip_traffic(g, [0, 1, 2, 3, 4, 5], 31) == 0


def test_a_node_larger_than_the_chip_streams_its_operands():
    g = abstract_graph([(), (0,)], [10, 10])
    # node 1 needs 20 B on a 15 B chip: it reads node 0's output where it is (on chip) and writes its own off chip
    assert offchip_traffic(g, [0, 1], 15) == 10
    assert offchip_traffic(g, [0, 1], 20) == 0


# ---- measured = computed -------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["darts", "randwire"])
def test_measured_peak_equals_computed_peak(which, request):
    g = request.getfixturevalue(which)
    best = dp.schedule(g, True)[0]
    for order in (g.program_order(), best):
        run = execute(g, order)
        assert run.peak_bytes == peak_memory(g, order)[0] and run.unreleased == 0
        assert outputs_match(run.outputs, reference_outputs(g), 1e-5, 1e-6)[0]
    assert peak_memory(g, best)[0] <= peak_memory(g, g.program_order())[0]
    if which == "randwire":  # DARTS's peak (the concat and its inputs) is the same in every order
        assert peak_memory(g, best)[0] < peak_memory(g, g.program_order())[0]


def test_randwire_sums_are_graph_nodes_unless_split_sums_is_off(randwire):
    whole = load_graphs(_model("randwire_cifar10", stages=[3], nodes=12, split_sums=False))[0]
    # whole: the stage input, 12 RandWire nodes, the output mean; split: a binary add per extra input of a
    # node's sum and of the mean, which becomes a division
    assert len(whole) == 14 and whole.ops[-1] == "Mean"
    adds = sum(len(ps) - 1 for ps in whole.preds[1:])
    assert randwire.ops.count("add") == adds and randwire.ops.count("truediv") == 1
    assert len(randwire) == len(whole) + adds and randwire.ops.count("SepConv") == 12
    order = dp.schedule(randwire, True)[0]
    assert execute(randwire, order).peak_bytes == peak_memory(randwire, order)[0]


def test_rewrite_keeps_the_outputs_and_lowers_the_peak(darts):
    r, count = rewrite(darts, ("channel", "kernel"))
    assert count == 1 and len(r) == len(darts) + 8  # cat, relu, conv -> 4 relu, 4 partial conv, 3 add_
    order, peak = dp.schedule(r, True)
    run = execute(r, order)
    assert run.peak_bytes == peak and outputs_match(run.outputs, reference_outputs(darts), 1e-4, 1e-5)[0]
    assert peak < dp.schedule(darts, True)[1]


def test_kernel_wise_partitioning_of_a_depthwise_conv():
    class CatDepthwise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(3, 4, 1), torch.nn.Conv2d(3, 6, 1)
            self.dw = torch.nn.Conv2d(10, 10, 3, padding=1, groups=10)

        def forward(self, x):
            return self.dw(torch.cat([self.a(x), self.b(x)], dim=1))

    g = trace_graph(CatDepthwise().eval(), torch.randn(1, 3, 8, 8), "cat_dw")
    r, count = rewrite(g, ("kernel",))
    assert count == 1 and "cat" not in r.ops[:-1] and r.ops.count("conv2d") == 2
    assert outputs_match(execute(r, r.program_order()).outputs, reference_outputs(g), 1e-5, 1e-6)[0]
    assert rewrite(g, ("channel",))[1] == 0  # a depthwise conv is not channel-wise partitioned


# ---- bad input ---------------------------------------------------------------------------------
def test_bad_graphs_are_one_line_errors(darts):
    cyclic = abstract_graph([(2,), (0,), (1,)], [1, 1, 1], "loop")
    with pytest.raises(UserError, match=r"model graph loop: cyclic \(nodes n0 -> n2 -> n1 -> n0\)"):
        check_graphs([cyclic], None)
    with pytest.raises(UserError, match="target.capacity_bytes=1000: below the largest tensor"):
        check_graphs([darts], 1000)
    check_graphs([darts], darts.largest_tensor)

    class Shapeless(torch.nn.Module):
        def forward(self, x):
            return x * x.shape[1]

    with pytest.raises(UserError, match="has no tensor output, so no shape information"):
        trace_graph(Shapeless(), torch.randn(1, 3), "shapeless")


# ---- through the driver -------------------------------------------------------------------------
def test_serenity_runs_through_the_driver_with_its_metrics(tmp_path):
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config

    cfg = compose_config([f"workdir={tmp_path}", "progress=false", "target=memory", "model=randwire_cifar10",
                          "model.stages=[3]", "model.nodes=8", "method=serenity"])
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED"
    m = {k.split(".", 1)[1]: v for k, v in run.data.metrics.items() if "." in k}
    assert m["measured_peak_bytes"] == m["peak_bytes"] <= m["program_peak_bytes"]
    assert m["reduction_vs_program"] >= 1.0 and m["arena_bytes"] >= m["peak_bytes"] and m["check_ok"] == 1.0
    assert {"offchip_bytes", "schedule_s", "nodes_before", "nodes_after", "edges_after"} <= set(m)
    # the run's memory metrics, and their leaderboard columns
    assert run.data.metrics["peak_bytes"] == m["peak_bytes"] and run.data.metrics["peak_reduction_geomean"] >= 1.0
    assert run.data.metrics["check_s"] > 0  # running the schedule is a check, left out of the search clock
    assert "tasks_latency_ms" not in run.data.metrics and "best_latency_ms" not in m  # bytes are no latency
    assert m["best_peak_bytes"] == m["peak_bytes"]
    from tunebench.report.aggregate import aggregate
    from tunebench.report.cells import group_tables
    from tunebench.report.query import load_runs

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    table, _ = aggregate(load_runs(client), baseline="program_order")
    (_, headers, cells), = list(group_tables(table))
    assert "peak [KB]" in headers and cells[0][headers.index("peak [KB]")] == f"{m['peak_bytes'] / 1024:.1f}"


# ---- the cells' structure ------------------------------------------------------------------------
@pytest.mark.parametrize("name,nodes,edges,concat", [("nasnet_a", 21, 29, 6), ("pnasnet5", 22, 29, 5),
                                                      ("darts_v2", 20, 26, 4)])
def test_cells_have_the_papers_structure(name, nodes, edges, concat):
    """2 inputs (1 for DARTS, whose stem is in the cell), their 1x1 preprocessing, 5 blocks (DARTS: 4) of
    two operations and an add (NASNet's identities and PNASNet's identity input are no node), the
    concat of ``concat`` tensors and the next cell's ReLU - 1x1 conv - BN."""
    g = load_graphs(_model(name))[0]
    assert (len(g), g.n_edges) == (nodes, edges)
    cat = g.ops.index("cat")
    assert len(g.preds[cat]) == concat and g.ops[cat + 1:] == ["ReLU", "Conv2d", "BatchNorm2d"]
    assert g.ops.count("input") == (1 if name == "darts_v2" else 2)


def test_node_bytes_follow_batch_and_dtype(darts):
    half = load_graphs(_model("darts_v2", dtype="float16", batch=2))[0]
    assert half.nbytes == darts.nbytes and half.preds == darts.preds  # 2 x batch, 1/2 x element size
    order = half.program_order()
    assert execute(half, order).peak_bytes == peak_memory(half, order)[0] == peak_memory(darts, order)[0]


def test_a_capacity_between_the_optima_needs_the_rewrite():
    import numpy as np

    from tunebench.harness.loop import tune_task
    from tunebench.methods import make_method
    from tunebench.methods.base import Budget
    from tunebench.targets.memory.target import MemorySettings, MemoryTarget

    target = MemoryTarget(MemorySettings(capacity_bytes=1_000_000))  # DARTS: 1204224 B, rewritten 903168 B
    task = target.load_tasks(_model("darts_v2"))[0][0]

    def run(**settings):
        return tune_task(task, make_method({"name": "serenity", **settings}), target, Budget(4),
                         np.random.default_rng(0)).measurements

    assert [m.score for m in run()] == [903168.0]
    assert run(rewrite=[]) == []  # no order of the original graph fits: no schedule
    (kahn,) = run(dp=False, rewrite=[])
    assert not kahn.valid and "exceeds target.capacity_bytes=1000000" in kahn.error
    assert kahn.outcome is Outcome.INFEASIBLE is Outcome.of_error(False, kahn.error)


def test_hmcos_accounting_is_an_option_and_both_peaks_are_reported(randwire):
    """The RandWire stage's ReLUs and adds may write over an input they read last under HMCOS's accounting:
    its peak is at most ours; the objective follows target.accounting; the run checks the live peak."""
    import numpy as np

    from tunebench.datasets.memory_accounting import peak_of
    from tunebench.harness.loop import tune_task
    from tunebench.methods import make_method
    from tunebench.methods.base import Budget
    from tunebench.targets.memory.target import MemorySettings, MemoryTarget

    peaks = {}
    for accounting in ("live", "hmcos"):
        target = MemoryTarget(MemorySettings(accounting=accounting))
        task = target.load_tasks(_model("randwire_cifar10", stages=[3], nodes=12))[0][0]
        (m,) = tune_task(task, make_method({"name": "hmcos"}), target, Budget(2), np.random.default_rng(0)).measurements
        d = target.evaluate(task, m.config)
        order = [task.mod.index[n] for n in m.config.order]
        assert d["live_peak_bytes"] == peak_of(task.mod, order, "live") == d["measured_peak_bytes"]
        assert d["hmcos_peak_bytes"] == peak_of(task.mod, order, "hmcos")
        assert m.score == d["peak_bytes"] == d[f"{accounting}_peak_bytes"]
        peaks[accounting] = m.score
    assert peaks["hmcos"] < peaks["live"]
