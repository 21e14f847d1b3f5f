"""method=flextensor, the operator suite (model=ops) and the template-free space (target.template=flex)."""
import json
import math
import os

import numpy as np
import pytest
import tvm
from mlflow.tracking import MlflowClient

from test_autotvm import run_fake
from tunebench.datasets.operators import OPERATORS, input_shapes, output_shape, select_cases
from tunebench.errors import UserError
from tunebench.harness.setup.compose import compose_config
from tunebench.methods import make_method
from tunebench.methods.tensor_programs.flextensor.moves import Moves
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.targets.tvm.templates import get_template
from tunebench.targets.tvm.templates.flex import FlexCpu, loop_nest
from tunebench.targets.tvm.workloads.operator_te import prim_func
from tunebench.targets.tvm.workloads.operator_torch import torch_reference

LLVM = tvm.target.Target({"kind": "llvm", "num-cores": 2})

#: one small case of every operator (the suite's own cases are too large to run in a test)
SMALL = {
    "gmv": {"m": 8, "k": 6}, "gmm": {"m": 4, "n": 6, "k": 5}, "bil": {"m": 3, "n": 4, "k": 5, "l": 2},
    "c1d": {"in_channels": 3, "length": 12, "out_channels": 4, "kernel": 3, "stride": 2, "padding": 1},
    "t1d": {"in_channels": 3, "length": 7, "out_channels": 4, "kernel": 4, "stride": 2, "padding": 1},
    "c2d": {"in_channels": 3, "height": 9, "width": 9, "out_channels": 4, "kernel": 3, "stride": 2, "padding": 1},
    "t2d": {"in_channels": 3, "height": 5, "width": 5, "out_channels": 4, "kernel": 4, "stride": 2, "padding": 1},
    "c3d": {"in_channels": 2, "depth": 4, "height": 5, "width": 5, "out_channels": 3, "kernel": 3, "stride": 1,
            "padding": 1},
    "t3d": {"in_channels": 2, "depth": 3, "height": 3, "width": 3, "out_channels": 3, "kernel": 4, "stride": 2,
            "padding": 1},
    "grp": {"in_channels": 4, "height": 6, "width": 6, "out_channels": 6, "kernel": 3, "stride": 1, "padding": 1,
            "groups": 2},
    "dep": {"in_channels": 4, "height": 6, "width": 6, "multiplier": 2, "kernel": 3, "stride": 2, "padding": 1},
    "dil": {"in_channels": 3, "height": 9, "width": 9, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 2,
            "dilation": 2},
}


def _run(mod, inputs, out_shape):
    args = [tvm.runtime.tensor(a) for a in inputs] + [tvm.runtime.tensor(np.zeros(out_shape, "float32"))]
    tvm.compile(mod, target=LLVM)["main"](*args)
    return args[-1].numpy()


# ---- the operator suite -------------------------------------------------------------------------

def test_the_suite_has_the_papers_twelve_operators_and_case_counts():
    assert list(OPERATORS) == ["gmv", "gmm", "bil", "c1d", "t1d", "c2d", "t2d", "c3d", "t3d", "grp", "dep", "dil"]
    # [Zheng-ASPLOS20] Table 3: test cases per operator
    assert [len(op.cases) for op in OPERATORS.values()] == [6, 7, 5, 7, 7, 15, 15, 8, 8, 14, 7, 11]
    c1 = OPERATORS["c2d"].cases[0]  # Table 4 C1: 3 -> 64, 448 x 448, 7 x 7 stride 2
    assert (c1["in_channels"], c1["out_channels"], c1["height"], c1["kernel"], c1["stride"]) == (3, 64, 448, 7, 2)


@pytest.mark.parametrize("abbr", list(SMALL))
def test_every_operator_equals_pytorch_unscheduled_and_in_random_flex_schedules(abbr):
    shape = SMALL[abbr]
    mod = tvm.IRModule({"main": prim_func(abbr, shape)})
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype("float32") for s in input_shapes(abbr, shape)]
    ref = torch_reference(abbr, shape, inputs)
    assert ref.shape == output_shape(abbr, shape)
    np.testing.assert_allclose(_run(mod, inputs, ref.shape), ref, rtol=1e-4, atol=1e-4)
    tpl = FlexCpu(abbr)
    space = tpl.make_space(mod)
    for i in space.sample(rng, 2):
        np.testing.assert_allclose(_run(tpl.apply(mod, space.get(i)), inputs, ref.shape), ref, rtol=1e-4, atol=1e-4)


def test_a_2d_convolution_is_rewritten_to_nchwc_with_its_weights_packed_outside_the_kernel():
    """FlexTensor's CPU C2D: weights [K/vlen2, C/vlen1, kh, kw, vlen1, vlen2] (vlen2, vlen1: the innermost
    output- and input-channel factors), the output-channel block vectorized; other operators keep NCHW."""
    from tunebench.targets.tvm.templates.fused import prepacked
    from tunebench.targets.tvm.worker import arg_specs

    shape = {**SMALL["c2d"], "in_channels": 4, "out_channels": 8}
    mod = tvm.IRModule({"main": prim_func("c2d", shape)})
    tpl, nest = FlexCpu("c2d"), loop_nest(mod)
    (f, _), (rc, _) = nest.spatial[1], nest.reduce[0]
    space = tpl.make_space(mod)
    index = next(i for i in space.sample(np.random.default_rng(0), 2000)
                 if space.get(i)[f"sp_{f}"][-1] == 4 and space.get(i)[f"re_{rc}"][-1] == 2)
    sched = tpl.apply(mod, space.get(index))
    kernel = prepacked(sched)
    assert arg_specs(kernel)[1] == ((2, 2, 3, 3, 2, 4), "float32")
    assert "<4 x float>" in tvm.compile(kernel, target=LLVM).mod.inspect_source("ll")
    rng = np.random.default_rng(3)
    data, weight = [rng.standard_normal(s).astype("float32") for s in input_shapes("c2d", shape)]
    packed = weight.reshape(2, 4, 2, 2, 3, 3).transpose(0, 2, 4, 5, 3, 1)  # [K/4, C/2, kh, kw, 2, 4]
    ref = torch_reference("c2d", shape, [data, weight])
    np.testing.assert_allclose(_run(kernel, [data, np.ascontiguousarray(packed)], ref.shape), ref, rtol=1e-4, atol=1e-4)
    c1d = tvm.IRModule({"main": prim_func("c1d", SMALL["c1d"])})
    plain = FlexCpu("c1d").apply(c1d, FlexCpu("c1d").make_space(c1d).get(0))
    assert arg_specs(prepacked(plain)) == arg_specs(plain)


@pytest.mark.parametrize("abbr", list(SMALL))
def test_every_operator_in_the_cuda_flex_space_generates_a_kernel_that_computes_it(abbr):
    """Without a GPU: CUDA code generation, and the kernel's loops run serially on llvm
    (:func:`test_templates.serialize_gpu_schedule`)."""
    from tunebench.targets.tvm.templates.flex_cuda import FlexCuda
    from tvm_helpers import CUDA, LIMITS, serialize_gpu_schedule

    shape = SMALL[abbr]
    mod = tvm.IRModule({"main": prim_func(abbr, shape)})
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype("float32") for s in input_shapes(abbr, shape)]
    ref = torch_reference(abbr, shape, inputs)
    tpl = FlexCuda(abbr)
    space = tpl.make_space(mod)
    assert space.names[-3:] == ("fuse", "reorder", "unroll")
    valid = [space.get(i) for i in space.sample(rng, 40) if tpl.check(mod, space.get(i), LIMITS) is None][:2]
    assert valid
    for cfg in valid:
        sched = tpl.apply(mod, cfg)
        source = tvm.compile(sched, target=CUDA).mod.imports[0].inspect_source()
        assert "__global__" in source and "__shared__" in source
        np.testing.assert_allclose(_run(serialize_gpu_schedule(sched), inputs, ref.shape), ref, rtol=1e-4, atol=1e-4)


def test_bad_operator_choices_are_one_line_errors():
    with pytest.raises(UserError, match="unknown operator 'conv'; valid: gmv"):
        select_cases(["conv"], [])
    with pytest.raises(UserError, match="case 8 of gmm: gmm has cases 1..7"):
        select_cases(["gmm"], [8])
    with pytest.raises(UserError, match="non-empty list"):
        select_cases([], [])
    assert [(a, n) for a, n, _ in select_cases(["gmv", "gmm"], [2])] == [("gmv", 2), ("gmm", 2)]


# ---- the template-free space ------------------------------------------------------------------------

def test_flex_space_of_yolo_c1():
    abbr, _, shape = select_cases(["c2d"], [1])[0]
    mod = tvm.IRModule({"main": prim_func(abbr, shape)})
    nest = loop_nest(mod)
    assert [n for n, _ in nest.spatial] == ["nn", "ff", "yy", "xx"] and [n for n, _ in nest.reduce] == ["rc", "ry", "rx"]
    assert nest.producers == ("pad_temp",) and nest.epilogues == ()
    space = get_template("conv2d", "llvm", "flex").make_space(mod)
    assert space.names == ("sp_nn", "sp_ff", "sp_yy", "sp_xx", "re_rc", "re_ry", "re_rx", "unroll", "inline_pad_temp")
    # ordered 4-factorizations: 1 (n=1), 84 (64 = 2^6), 224 (224 = 2^5 * 7) twice, 4 (3; 7) three times;
    # 4 unroll steps, 2 inline choices
    assert space.size == 84 * 224 * 224 * 4 * 4 * 4 * 4 * 2 == 2_157_969_408


def test_flex_is_a_template_of_every_kind_and_the_others_name_it():
    assert isinstance(get_template("t2d", "llvm", "flex"), FlexCpu)
    with pytest.raises(ValueError, match="no packed template for 't2d'.*target.template=flex"):
        get_template("t2d", "llvm", "packed")


# ---- FlexTensor's moves and its Q-network ------------------------------------------------------------

def gemm_space():
    return Space([SplitKnob("sp_i", 64, 4), SplitKnob("sp_j", 48, 4), SplitKnob("re_k", 32, 4),
                  ChoiceKnob("unroll", (0, 16, 64, 512)), ChoiceKnob("inline_pad", (1, 0))])


def test_neighbour_moves_keep_the_product_of_split_factors_and_change_one_knob():
    space = gemm_space()
    moves = Moves(space)
    rng = np.random.default_rng(0)
    n_moved = 0
    for i in space.sample(rng, 200):
        digits = space.digits(i)
        for a, j in moves.neighbors(i):
            d = moves.directions[a]
            changed = [k for k, (x, y) in enumerate(zip(digits, space.digits(j))) if x != y]
            assert changed == [d.knob]
            knob = space.knobs[d.knob]
            if isinstance(knob, SplitKnob):
                f, g = knob.entities[digits[d.knob]], knob.entities[space.digits(j)[d.knob]]
                assert math.prod(g) == knob.length
                p, q = d.step
                assert g[p] > f[p] and g[q] < f[q]
                assert all(g[k] == f[k] for k in range(knob.n_parts) if k not in (p, q))
            n_moved += 1
    assert n_moved > 200 * 20


def test_the_q_networks_action_space_matches_the_knobs():
    space = gemm_space()
    method = make_method({"name": "flextensor"})
    from test_autotvm import fake_task

    method.setup(fake_task(space), None, None, None, np.random.default_rng(0))
    assert len(method.moves) == 3 * 4 * 3 + 2 + 2  # N (N - 1) per 4-part split, two per other knob
    assert method.policy.x.sizes == (space.n_features, 64, 64, 64, len(method.moves))
    q = method.policy.q_values(space.features([0, 1]))
    assert q.shape == (2, len(method.moves))


def test_a_short_run_improves_over_random_on_a_small_gemm_space():
    """FeatureTarget: a smooth basin over the knob features with an invalid region, on a GEMM-like space."""
    trials, ratios = 160, {"flextensor": [], "random": []}
    for seed in range(5):
        optimum = None  # the same for both methods at one seed (the target's landscape is the seed's)
        for name in ratios:
            res, method, target = run_fake({"name": name}, seed, trials, space=gemm_space())
            assert len(res.measurements) == trials == len(set(target.measured))
            optimum = optimum or target.optimum(res.task.space)  # a brute force over 5.3 million configs
            ratios[name].append(min(m.latency_s for m in res.measurements if m.valid) / optimum)
    print({k: np.round(v, 3).tolist() for k, v in ratios.items()})
    assert np.median(ratios["flextensor"]) < np.median(ratios["random"])
    assert sum(f < r for f, r in zip(ratios["flextensor"], ratios["random"])) >= 4


def test_the_p_method_proposes_every_unvisited_neighbour_of_one_start_point():
    from test_autotvm import FeatureTarget, fake_task

    space = gemm_space()
    target = FeatureTarget(space, 0)
    method = make_method({"name": "flextensor", "policy": "p", "n_init": 8})
    method.setup(fake_task(space), None, None, None, np.random.default_rng(0))
    first = method.ask(8)
    method.tell(target.measure(fake_task(space), first))
    method._plan()
    (start,) = {p for p, _ in method.origin.values()}
    assert sorted(method.pending) == sorted({e for _, e in method.moves.neighbors(start)} - method.visited)
    assert method.report()["trials"] == 1


@pytest.mark.parametrize("bad, match", [({"policy": "x"}, "method.policy='x': valid: q, p"),
                                        ({"n_starts": 0}, "method.n_starts=0: must be a positive integer"),
                                        ({"eps_min": 0.9}, "eps_min <= eps_start")])
def test_bad_hyperparameters_are_one_line_errors(bad, match):
    with pytest.raises(UserError, match=match):
        make_method({"name": "flextensor", **bad})


# ---- a real run -------------------------------------------------------------------------------

def test_a_short_real_run_on_an_operator_with_the_flex_space(tmp_path):
    from tunebench.harness.experiment import run_experiment

    cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", "model=ops",
                          "model.operators=[gmm,t1d]", "model.cases=[1]", "target.template=flex",
                          "method=flextensor", "method.n_init=4", "method.n_starts=2", "target.batch_size=3",
                          "target.runner.repeat=3", "target.runner.min_repeat_ms=5", "budget.trials_per_task=8",
                          "e2e.torch_compile=false", "e2e.rounds=2", "e2e.n_runs=2", "e2e.min_sample_ms=2"])
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED"
    with open(os.path.join(os.path.dirname(run.data.tags["tunebench.record_file"]), "tasks.json")) as fh:
        tasks = json.load(fh)
    assert [t["name"] for t in tasks] == ["gmm_1", "t1d_1"] and [t["kind"] for t in tasks] == ["dense", "t1d"]
    for t in tasks:
        assert t["trials"] == 8 and t["check"]["ok"] is True and t["method_report"]["trials"] >= 1
    # every operator timed against PyTorch (the run's speedup: their geometric mean)
    m = run.data.metrics
    per_op = [m[f"{t['id']}.speedup_vs_torch"] for t in tasks]
    assert all(m[f"{t['id']}.e2e_rel_err"] < 1e-4 for t in tasks)
    assert m["speedup_vs_torch"] == pytest.approx(math.sqrt(per_op[0] * per_op[1])) and m["ops_n_vs_torch"] == 2


def test_an_operator_without_a_template_is_an_error_before_any_run(tmp_path):
    from tunebench.harness.experiment import run_experiment

    cfg = compose_config([f"workdir={tmp_path}", "experiment=test", "progress=false", "model=ops",
                          "model.operators=[t2d]", "model.cases=[1]", "method=random"])
    with pytest.raises(UserError, match="task t2d_1: no packed template for 't2d'.*target.template=flex"):
        run_experiment(cfg)
    assert not os.path.exists(tmp_path / "records")


def test_a_method_with_its_own_schedules_tunes_an_operator_without_a_template(tmp_path):
    from conftest import measure_settings, target_settings
    from tunebench.datasets.models import OpsModel
    from tunebench.targets.tvm.llvm import LLVMTarget

    target = LLVMTarget(target_settings("llvm", lock_dir=str(tmp_path)), measure_settings(cache_dir=str(tmp_path)))
    tasks, _ = target.load_tasks(OpsModel(operators=["t1d", "c2d"], cases=[1]), own_schedules=True)  # metaschedule, gat
    assert [t.template for t in tasks] == ["flex", "packed"]
    assert tasks[0].space.names[0] == "sp_b" and tasks[1].space.names[0] == "tile_ic"


# ---- the comparison table (benchmarks/flextensor_table.py) ----------------------------------------

def _flextensor_table():
    import sys

    from conftest import ROOT

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import flextensor_table

    return flextensor_table


def test_the_operator_table_marks_noisy_speedups_and_gives_the_clean_cases_geomean():
    ft = _flextensor_table()

    def row(method, case, latency, speedup, noisy=False, speedup_noisy=False, size=None):
        return {"method": method, "op": "c2d", "case": case, "latency_ms": latency, "noisy": noisy,
                "speedup": speedup, "speedup_noisy": speedup_noisy, "space_size": size}

    rows = [row("autotvm (packed)", 1, 2.0, 1.0, size=100), row("autotvm (packed)", 2, 4.0, 0.5, size=100),
            row("flextensor (flex)", 1, 1.0, 2.0, size=2e9),
            row("flextensor (flex)", 2, 8.0, 0.25, speedup_noisy=True, size=2e9)]
    lines = ft.operator_table(rows, "autotvm (packed)").splitlines()
    assert lines[2] == "| c2d | autotvm (packed) | 2 | 0.71x | 0.71x (2 of 2) | 1.00x |"
    # speedups 2 and 0.25 (noisy): geomean 0.71 marked, the clean case alone 2.00; latency ratios 2 and 0.5
    assert lines[3] == "| c2d | flextensor (flex) | 2 | 0.71x* | 2.00x (1 of 2) | 1.00x |"
    cases = ft.case_table(rows, "autotvm (packed)")
    # speed vs the baseline: its latency over the method's (2/1 on case 1, 4/8 on case 2)
    assert "| c2d | 1 | flextensor (flex) | 2.0e+09 | 1 | 1.0000 | 2.00 | 2.00x |" in cases
    assert "| c2d | 2 | flextensor (flex) | 2.0e+09 | 1 | 8.0000 | 0.25* | 0.50x |" in cases


def _table_run(folder, run, latency, written, trials=48, method="random"):
    """A finished ``model=ops`` run's config.yaml + tasks.json in ``folder/run``, tasks.json written at ``written``."""
    import yaml

    os.makedirs(folder / run)
    with open(folder / run / "config.yaml", "w") as fh:
        yaml.safe_dump({"model": {"name": "ops"}, "method": {"name": method}, "target": {"template": "flex"},
                        "seed": 0, "budget": {"trials_per_task": trials}}, fh)
    with open(folder / run / "tasks.json", "w") as fh:
        json.dump([{"id": run, "shape": {"op": "c2d", "case": 3}, "best_latency_ms": latency}], fh)
    os.utime(folder / run / "tasks.json", (written, written))


def test_the_table_takes_a_case_tuned_again_from_the_newer_run(tmp_path):
    ft = _flextensor_table()
    _table_run(tmp_path, "old", 2.0, 1000)
    _table_run(tmp_path, "new", 1.0, 2000)
    (row,) = ft.load(str(tmp_path))
    assert (row["run"], row["latency_ms"], row["method"]) == ("new", 1.0, "random (flex)")


def test_the_table_reads_several_folders_and_never_merges_two_budgets(tmp_path):
    ft = _flextensor_table()
    _table_run(tmp_path / "a", "old", 2.0, 1000)
    _table_run(tmp_path / "b", "new", 1.0, 2000)  # the same case tuned again, in another sweep's folder
    _table_run(tmp_path / "b", "long", 0.5, 3000, trials=192)  # newest, but at another budget
    rows = sorted(ft.load(str(tmp_path / "a"), str(tmp_path / "b")), key=lambda r: r["trials"])
    assert [(r["run"], r["method"]) for r in rows] == [("new", "random (flex), 48 trials"),
                                                       ("long", "random (flex), 192 trials")]
    ft.add_speedups(rows, {str(tmp_path / "b"): None})  # no MLflow store: no speedup, not an error
    assert all(np.isnan(r["speedup"]) and not r["speedup_noisy"] for r in rows)
    ft.write_csv(rows, str(tmp_path / "rows.csv"))
    with open(tmp_path / "rows.csv") as fh:
        lines = fh.read().splitlines()
    assert lines[0] == ",".join(ft.CSV_COLUMNS) and len(lines) == 3
    # the method is written without its budget (a column of its own)
    assert sorted(lines[1:]) == ["random (flex),192,0,c2d,3,0.5,False,nan,False,,long",
                                 "random (flex),48,0,c2d,3,1.0,False,nan,False,,new"]


def test_a_csv_the_table_wrote_stands_for_its_records(tmp_path):
    ft = _flextensor_table()
    _table_run(tmp_path / "a", "new", 1.0, 2000)
    _table_run(tmp_path / "a", "long", 0.5, 3000, trials=192)
    rows = ft.load(str(tmp_path / "a"))
    for r, speedup in zip(rows, (1.5, 2.5)):
        r["speedup"], r["speedup_noisy"] = speedup, speedup > 2
    ft.write_csv(rows, str(tmp_path / "rows.csv"))
    again = ft.load(str(tmp_path / "rows.csv"))
    ft.add_speedups(again, {})  # the speedups come from the file, not from a store
    def key(r):
        return (r["method"], r["trials"], r["seed"], r["case"], r["latency_ms"], r["noisy"], r["speedup"],
                         r["speedup_noisy"])
    assert sorted(map(key, again)) == sorted(map(key, rows))
    assert {r["method"] for r in again} == {"random (flex), 48 trials", "random (flex), 192 trials"}


def test_the_table_names_the_valid_baselines_for_an_unknown_one(tmp_path):
    import subprocess
    import sys

    from conftest import ROOT

    _table_run(tmp_path / "records", "r", 1.0, 1000)
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "flextensor_table.py"),
                          str(tmp_path / "records"), "--baseline", "autotvm"], capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "error: --baseline 'autotvm' is not a method of these runs; valid: random (flex)"]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "flextensor_table.py"),
                          str(tmp_path / "nothing")], capture_output=True, text=True)
    assert res.returncode == 2 and "error: records folder" in res.stderr


def test_the_published_operator_csvs_load_as_one_table():
    from conftest import ROOT

    ft = _flextensor_table()
    res = os.path.join(ROOT, "docs", "results")
    rows = ft.load(os.path.join(res, "flextensor_ops_llvm.csv"), os.path.join(res, "flextensor_yolo_c2d_llvm.csv"))
    cases = {(r["op"], r["method"], r["seed"]) for r in rows}
    counts = {op: len({r["case"] for r in rows if r["op"] == op}) for op, _, _ in cases}
    assert counts == {"gmv": 6, "gmm": 7, "bil": 5, "c1d": 7, "t1d": 7, "c2d": 15, "c3d": 8, "t3d": 8,
                      "grp": 14, "dep": 7, "dil": 11}  # every case of eleven operators (not t2d)
    for op, n in counts.items():  # every method of an operator tuned every one of its cases
        assert all(len([r for r in rows if (r["op"], r["method"], r["seed"]) == k]) == n for k in cases if k[0] == op)
    assert all(r["latency_ms"] > 0 and r["speedup"] > 0 for r in rows)


def test_the_numpy_q_network_trains_as_pytorch_does():
    """:class:`~tunebench.methods.tensor_programs.flextensor.qnet.MLP` against the same layers in PyTorch with
    ``torch.optim.Adadelta``: the same outputs, the same losses and the same weights after 30 steps."""
    import torch

    from tunebench.methods.tensor_programs.flextensor.qnet import MLP

    torch.manual_seed(3)
    net = MLP((7, 16, 16, 5), lr=0.5)
    first = net.params[0].copy()
    ref = torch.nn.Sequential(torch.nn.Linear(7, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                              torch.nn.Linear(16, 5))
    with torch.no_grad():
        for lin, (w, b) in zip(ref[::2], zip(net.params[::2], net.params[1::2])):
            lin.weight.copy_(torch.from_numpy(w.T.copy())), lin.bias.copy_(torch.from_numpy(b))
    opt = torch.optim.Adadelta(ref.parameters(), lr=0.5)
    rng = np.random.default_rng(0)
    for _ in range(30):
        x = rng.random((32, 7), dtype=np.float32)
        a, y = rng.integers(0, 5, 32), rng.normal(size=32).astype(np.float32)
        pred = ref(torch.from_numpy(x)).gather(1, torch.from_numpy(a)[:, None]).squeeze(1)
        loss = ((pred - torch.from_numpy(y)) ** 2).mean()
        opt.zero_grad(), loss.backward(), opt.step()
        assert net.step(x, a, y) == pytest.approx(float(loss), rel=1e-4)
    x = rng.random((10, 7), dtype=np.float32)
    np.testing.assert_allclose(net(x), ref(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net.params[0], ref[0].weight.detach().numpy().T, rtol=1e-4, atol=1e-5)
    assert np.abs(net.params[0] - first).max() > 1e-3  # the steps moved the weights
