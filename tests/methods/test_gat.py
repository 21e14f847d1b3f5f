"""method=gat: graph extraction on real TIR, network shapes per variant, training, the method on a tiny task."""

import json
import os

import numpy as np
import pytest
import torch

from conftest import TINY_LAYER


@pytest.fixture(scope="module")
def candidates():
    """Real MetaSchedule candidates (postprocessed schedules) of a tiny conv layer on llvm."""
    import tvm
    import tvm.s_tir.meta_schedule as ms

    from tunebench.methods.tensor_programs.metaschedule import import_metaschedule
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    import_metaschedule()  # the tensor intrinsics, without scanning sys.modules per stack frame
    tasks, _ = model_tasks({"name": "layers", "seed": 0, "layers": [TINY_LAYER]}, "llvm")
    task = tasks[0]
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    ctx = ms.TuneContext(mod=task.mod, target=target, space_generator="post-order-apply",
                         search_strategy=ms.search_strategy.EvolutionarySearch(population_size=16,
                                                                               init_min_unmeasured=8),
                         task_name=task.name, num_threads=2, rand_state=1)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=8, design_spaces=ctx.generate_design_space(),
                   database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.CostModel.create("random"))
    cands = list(ctx.generate_measure_candidates())
    assert len(cands) >= 4
    return task, ctx, cands


def _count_blocks(func, prefix: str) -> int:
    """Blocks whose name starts with ``prefix``, read from the TVMScript text (independent of gat_features)."""
    import re

    return len(re.findall(r'block\("' + re.escape(prefix), func.script()))


def test_graph_on_real_tir(candidates):
    from tunebench.methods.tensor_programs.gat.features import NODE_DIM, NODE_FEATURES, tir_graph

    _task, _ctx, cands = candidates
    x, e = tir_graph(cands[0].sch.mod["main"])
    names = [n for n, _ in NODE_FEATURES]
    col = {n: i for i, n in enumerate(names)}
    assert x.shape[1] == NODE_DIM and x.dtype == np.float32
    assert e.shape[0] == 2 and e.max() < len(x) and e.min() >= 0
    # every node has exactly one kind
    assert np.all(x[:, :3].sum(1) == 1)
    # the 4 function params (input, weight, bias, output) and the pad / conv intermediates are data nodes
    buffers = x[x[:, col["is_buffer"]] == 1]
    assert buffers[:, col["buf_is_param"]].sum() == 4 and buffers[:, col["buf_is_output"]].sum() == 1
    assert len(buffers) >= 5
    blocks = x[x[:, col["is_block"]] == 1]
    # conv reduction with its 3 reduce axes (in_channels 8 x 3 x 3) and the padding block
    conv = blocks[blocks[:, col["blk_op_reduce_add"]] == 1]
    assert len(conv) == 1 and conv[0, col["blk_n_reduce"]] == 3
    assert conv[0, col["blk_log2_reduce_extent"]] == pytest.approx(np.log2(1 + 8 * 9))
    # the padding block, unless this sampled candidate inlined it into the conv (MetaSchedule's
    # compute-inline is a sampled decision): compare with the TIR's own pad_temp blocks
    n_pad = _count_blocks(cands[0].sch.mod["main"], "pad")
    assert blocks[:, col["blk_op_pad"]].sum() == n_pad
    # loops exist, each with exactly one loop kind
    loops = x[x[:, col["is_loop"]] == 1]
    kinds = [col[n] for n in names if n.startswith("loop_kind_")]
    assert len(loops) > 0 and np.all(loops[:, kinds].sum(1) == 1)
    # undirected: every edge also reversed
    pairs = set(map(tuple, e.T.tolist()))
    assert all((b, a) in pairs for a, b in pairs)
    # different schedules give different graphs
    x2, _ = tir_graph(cands[1].sch.mod["main"])
    assert x2.shape != x.shape or not np.array_equal(x, x2)


def test_graph_of_replayed_trace_equals_candidate(candidates):
    """The dataset builder replays recorded traces: the replayed schedule must give the same features."""
    import tvm

    from tunebench.methods.tensor_programs.gat.features import tir_graph
    from tunebench.search_space import trace_to_json

    task, _ctx, cands = candidates
    sch = tvm.s_tir.Schedule(task.mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_to_json(cands[2].sch.trace)), sch)
    a, b = tir_graph(cands[2].sch.mod["main"]), tir_graph(sch.mod["main"])
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_stat_features(candidates):
    from tunebench.methods.tensor_programs.gat.features import STAT_DIM, stat_features

    _task, ctx, cands = candidates
    s = stat_features(ctx, cands)
    assert s.shape == (len(cands), STAT_DIM) and np.all(np.isfinite(s))
    # the features tell programs apart (two sampled candidates may be the same program: the
    # multi-threaded evolutionary search does not draw the same set every run)
    assert len({tuple(np.round(row, 4)) for row in s}) > 1


@pytest.mark.parametrize("variant,layer", [("gat", "graphconv"), ("mhsa", "graphconv"), ("gnn_mlp", "graphconv"),
                                           ("gat", "gcn"), ("gat", "gat"), ("gat", "sage")])
def test_network_shapes(variant, layer):
    from tunebench.methods.tensor_programs.gat.features import NODE_DIM, STAT_DIM
    from tunebench.methods.tensor_programs.gat.model import GATNet, to_batch

    rng = np.random.default_rng(0)
    graphs = [(rng.normal(size=(n, NODE_DIM)).astype(np.float32),
               rng.integers(0, n, size=(2, 2 * n)).astype(np.int64)) for n in (5, 9, 3)]
    stats = rng.normal(size=(3, STAT_DIM)).astype(np.float32)
    net = GATNet(variant=variant, graph_layer=layer)
    out = net(*to_batch(stats, graphs))
    assert out.shape == (3,) and torch.isfinite(out).all()
    assert hasattr(net, "attn") == (variant != "gnn_mlp") and hasattr(net, "conv1") == (variant != "mhsa")
    assert net.fc.out_features == 512 and [m.out_features for m in net.mlp if hasattr(m, "out_features")] == \
        [200, 100, 20, 1]


def test_bad_variant_is_one_line_error():
    from tunebench.errors import UserError
    from tunebench.methods import make_method

    with pytest.raises(UserError, match="method.variant='bogus': valid: gat, mhsa, gnn_mlp"):
        make_method({"name": "gat", "variant": "bogus"})
    with pytest.raises(UserError, match="method.graph_layer='x'"):
        make_method({"name": "gat", "graph_layer": "x"})
    with pytest.raises(UserError, match="method.pretrained=/nonexistent.pt"):
        make_method({"name": "gat", "pretrained": "/nonexistent.pt"})


def test_training_loss_decreases_and_checkpoint_roundtrip(candidates, tmp_path):
    from tunebench.methods.tensor_programs.gat.features import candidate_features
    from tunebench.methods.tensor_programs.gat.model import GATCostModel

    _task, ctx, cands = candidates
    stats, graphs = candidate_features(ctx, cands)
    # a learnable target: latency grows with the number of graph nodes and a stats feature
    lat = np.array([1e-3 * (1 + len(g[0]) / 10 + 0.1 * i) for i, g in enumerate(graphs)])
    m = GATCostModel(lr=1e-3, epochs=60, batch_size=4, seed=0)
    losses = m.fit(stats, graphs, lat)
    assert len(losses) == 60 and losses[-1] < 0.5 * losses[0]
    path = str(tmp_path / "m.pt")
    m.save(path)
    m2 = GATCostModel.load(path)
    assert np.allclose(m.predict(stats, graphs), m2.predict(stats, graphs), atol=1e-5)
    # MetaSchedule's CostModel.load on the method's Python cost model reads the same checkpoint
    from tunebench.methods.tensor_programs.gat.method import make_py_cost_model

    pcm = make_py_cost_model(GATCostModel(lr=2e-4, epochs=7, batch_size=8))
    pcm.load(path)
    assert pcm.model.fitted and (pcm.model.lr, pcm.model.epochs) == (2e-4, 7)
    assert np.allclose(m.predict(stats, graphs), pcm.model.predict(stats, graphs), atol=1e-5)


@pytest.mark.slow
def test_method_on_tiny_task(tiny_cfg, tmp_path):
    """method=gat end to end on one tiny layer: two rounds of 8, so the model trains online after round 1."""
    from conftest import TINY_LAYER_ARG
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config
    from tunebench.record_file import read_records

    cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", TINY_LAYER_ARG, "method=gat",
                          "method.num_trials_per_iter=8", "method.population_size=32",
                          "method.init_min_unmeasured=16", "method.epochs=20", "method.online_epochs=5",
                          "target.batch_size=4", "target.runner.repeat=3", "target.runner.min_repeat_ms=5",
                          "budget.trials_per_task=16", "e2e.enabled=false"])
    run_id = run_experiment(cfg)
    recs = read_records(os.path.join(str(tmp_path), "records", run_id, "records.jsonl"))
    assert len(recs) == 16 and sum(r["valid"] for r in recs) >= 8
    assert all("trace" in r["config"] for r in recs)
