"""target=accel: the direct evaluation of a mapping against ZigZag's high-level API, DRAM accesses
counted by hand, the capacity model against ZigZag's utilization, bad architectures and layers."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tunebench.config.knobs import validate
from tunebench.datasets.models import MODEL_OPTIONS, LayersModel
from tunebench.errors import UserError
from tunebench.methods.accelerator_mapping.zigzag_mappers import config_of_temporal_mapping
from tunebench.targets.accel.settings import AccelSettings
from tunebench.targets.accel.target import AccelTarget
from tunebench.targets.accel.zigzag_model import accelerator_data, mapping_data, workload_data

MATMUL = {"batch": 64, "in_features": 128, "out_features": 512}  # the paper's 64 x 512 x 128
SMALL_CONV = {"in_channels": 32, "height": 8, "width": 8, "out_channels": 32, "kernel": 3, "stride": 2,
              "padding": 1}


@pytest.fixture(scope="module")
def target():
    return AccelTarget(AccelSettings())


def task_of(target, spec):
    return target.load_tasks(LayersModel(name="t", layers=[spec]))[0][0]


def nest_config(task, levels):
    """The config of a nest given per level (inner to outer) as [(dim, factor), ...]."""
    ms = task.mod
    factors = [dict.fromkeys(ms.dims, 1) for _ in range(4)]
    orders = []
    for lv, loops in enumerate(levels):
        for d, f in loops:
            factors[lv][d] = f
        named = [d for d, _ in loops]
        orders.append(tuple(named + [d for d in ms.dims if d not in named]))
    return ms.config_of(factors, orders)


def api_run(tmp_path, settings, task, opt: str):
    """ZigZag's high-level API (yaml files, its parsers, stages and LOMA) on one layer: its total energy,
    latency and chosen mapping (the best of its search by ``opt``)."""
    from zigzag.api import get_hardware_performance_zigzag

    ms = task.mod
    acc, mapping = tmp_path / "acc.yaml", tmp_path / "map.yaml"
    acc.write_text(yaml.safe_dump(accelerator_data(settings), sort_keys=False))  # memories inner to outer
    entry = mapping_data(settings)[0]
    mapping.write_text(yaml.safe_dump([{**entry, "name": name} for name in ("default", "Gemm", "Conv")]))
    precision = {"W": 8, "I": 8, "O": 32, "O_final": 8}
    energy, cycles, cmes = get_hardware_performance_zigzag(
        workload_data(ms.loops, ms.stride, precision), str(acc), str(mapping), opt=opt, lpf_limit=4,
        dump_folder=str(tmp_path / "out"), loma_show_progress_bar=False)
    return energy, cycles, cmes[0][1][0][0].temporal_mapping


@pytest.mark.parametrize("spec, opt", [(MATMUL, "energy"), (MATMUL, "latency"), (SMALL_CONV, "energy"),
                                       (SMALL_CONV, "EDP")])
def test_direct_evaluation_equals_zigzags_high_level_api(tmp_path, target, spec, opt):
    """The mapping the API reports, evaluated directly (TemporalMapping + CostModelEvaluation from this
    mapspace's nest), gives the API's energy and latency to the last digit."""
    task = task_of(target, spec)
    energy, cycles, tm = api_run(tmp_path, target.settings, task, opt)
    config, clipped = config_of_temporal_mapping(task.mod, tm)
    assert not clipped, "the API's allocation nests as the four levels"
    direct = target.evaluate(task, config)
    assert direct["energy_pj"] == pytest.approx(energy, rel=1e-12)
    assert direct["cycles"] == pytest.approx(cycles, rel=1e-12)


def test_dram_accesses_counted_by_hand(target):
    """64 x 128 -> 512 on 16 x 16: temporal B 64, K 32, C 8. Everything fits on chip: W (512 x 128 bytes),
    I (64 x 128) are read once, O (64 x 512, final 8-bit) written once, in 128-bit DRAM words. With a B 2
    loop outermost in DRAM, around the K loop, the weights are read twice, the inputs still once."""
    task = task_of(target, MATMUL)
    once = target.evaluate(task, nest_config(task, [[("B", 64)], [("C", 8)], [("K", 4)], [("K", 8)]]))
    w, i, o = 512 * 128 * 8 // 128, 64 * 128 * 8 // 128, 64 * 512 * 8 // 128
    assert (once["dram_accesses"]["W"]["RD_OUT_TO_LOW"], once["dram_accesses"]["I"]["RD_OUT_TO_LOW"],
            once["dram_accesses"]["O"]["WR_IN_BY_LOW"]) == (w, i, o)
    twice = target.evaluate(task, nest_config(task, [[("B", 32)], [("C", 8)], [("K", 4)], [("K", 8), ("B", 2)]]))
    assert (twice["dram_accesses"]["W"]["RD_OUT_TO_LOW"], twice["dram_accesses"]["I"]["RD_OUT_TO_LOW"],
            twice["dram_accesses"]["O"]["WR_IN_BY_LOW"]) == (2 * w, i, o)


def test_capacity_model_agrees_with_zigzags_utilization(target):
    """The mapspace's fit test (what the encoding relies on) against ZigZag's utilization on random
    raw mappings, many of which do not fit."""
    rng = np.random.default_rng(0)
    for spec in (MATMUL, SMALL_CONV):
        task = task_of(target, spec)
        verdicts = []
        for i in task.space.sample(rng, 60):
            config = task.space.get(i)
            verdicts.append((task.mod.fits(config), target.measure(task, [config])[0].valid))
        assert all(a == b for a, b in verdicts)
        assert {a for a, _ in verdicts} == {True, False}


def test_measurement_and_check(target):
    task = task_of(target, MATMUL)
    config = nest_config(task, [[("B", 64)], [("C", 8)], [("K", 4)], [("K", 8)]])
    m = target.measure(task, [config])[0]
    assert m.valid and set(m.objectives) == {"energy_pj_per_mac"} and m.score == m.objectives["energy_pj_per_mac"]
    assert m.latency_s > 0 and m.gflops > 0
    ok, detail = target.check(task, config)
    assert ok, detail
    bad = nest_config(task, [[("B", 64), ("K", 2)], [("C", 8)], [("K", 2)], [("K", 8)]])  # 2 weights per PE
    m = target.measure(task, [bad])[0]
    assert not m.valid and "does not fit" in m.error


def test_zoo_networks_map_layer_by_layer(target):
    tasks, _ = target.load_tasks(MODEL_OPTIONS["resnet18"])
    assert len(tasks) == 12 and sum(t.weight for t in tasks) == 21  # 20 conv2d + the classifier
    assert {t.kind for t in tasks} == {"conv2d", "dense"}


@pytest.mark.parametrize("change, text", [
    ({"scratchpad_kib": 0.1}, "target.scratchpad_kib=0.1: too small for one tile"),
    ({"accumulator_kib": 0.01}, "target.accumulator_kib=0.01: too small"),
    ({"array_rows": 0}, "target.array_rows=0: must be a positive integer"),
    ({"objectives": ["energy"]}, "target.objectives"),
    ({"psum_bits": 4}, "target.psum_bits=4"),
])
def test_impossible_architectures_are_refused(change, text):
    with pytest.raises(UserError, match=text.replace("(", r"\(").replace("[", r"\[")):
        validate(AccelSettings(**change), "target")


def test_a_layer_the_array_cannot_map_is_refused():
    model = LayersModel(name="t", layers=[{**SMALL_CONV, "groups": 32}])
    with pytest.raises(UserError, match="groups=32 cannot be mapped on target=accel"):
        AccelTarget.check_model(AccelSettings(), model, False)


def test_a_run_through_the_harness_tracks_energy(tmp_path):
    """``run.py target=accel model=layers method=mapspace_bo``: the MLflow run has each task's best energy per
    MAC, its best-so-far curve, a passed check of the best mapping; tasks.json the best's objectives."""
    import json
    import os

    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.setup.compose import compose_config, layers_override

    cfg = compose_config([f"workdir={tmp_path}", "experiment=accel", "progress=false", "target=accel",
                          "method=mapspace_bo", "method.n_init=3", "method.n_candidates=64", "method.sobol_samples=4",
                          "budget.trials_per_task=5", layers_override([{"batch": 8, "in_features": 64,
                                                                        "out_features": 64}])])
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED"
    task_id = next(k.split(".")[0] for k in run.data.metrics if k.endswith(".best_energy_pj_per_mac"))
    m = run.data.metrics
    assert m[f"{task_id}.check_ok"] == 1.0 and m[f"{task_id}.invalid"] == 0.0
    curve = client.get_metric_history(run.info.run_id, f"{task_id}.search_best_energy_pj_per_mac")
    assert len(curve) == 5 and curve[-1].value == pytest.approx(m[f"{task_id}.best_energy_pj_per_mac"])
    tasks_json = next(os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs if f == "tasks.json")
    entry = json.load(open(tasks_json))[0]
    assert entry["best_objectives"]["energy_pj_per_mac"] == pytest.approx(m[f"{task_id}.best_energy_pj_per_mac"])
    # the run's energy: the layer's best energy over its MACs; the leaderboard's accelerator columns
    assert m["energy_pj_per_mac"] == pytest.approx(m[f"{task_id}.energy_pj"] / m[f"{task_id}.macs"])
    assert m["energy_pj_per_mac"] == pytest.approx(m[f"{task_id}.best_energy_pj_per_mac"])
    assert m["energy_uj"] == pytest.approx(m[f"{task_id}.energy_pj"] * 1e-6)
    assert m["model_latency_ms"] == pytest.approx(m[f"{task_id}.best_latency_ms"])
    from tunebench.report.aggregate import aggregate
    from tunebench.report.cells import group_tables
    from tunebench.report.query import load_runs

    table, notes = aggregate(load_runs(client), baseline="random")
    (_, headers, cells), = list(group_tables(table))
    assert headers[:3] == ["method", "seeds", "energy / MAC [pJ]"] and "search red. [%]" not in headers
    assert cells[0][2].startswith(f"{m['energy_pj_per_mac']:.4f}") and not any(notes.values())


def test_run_energy_counts_each_layer_by_its_weight():
    """The network's energy per MAC is total energy over total MACs, each layer as often as the model runs it."""
    from types import SimpleNamespace

    target = AccelTarget(AccelSettings())
    rows = [(SimpleNamespace(weight=1), {"energy_pj": 100.0, "macs": 10.0, "cycles": 1000.0}),
            (SimpleNamespace(weight=3), {"energy_pj": 20.0, "macs": 10.0, "cycles": 500.0})]
    out = target.run_metrics(rows, [])
    assert out["energy_pj_per_mac"] == pytest.approx(160.0 / 40.0) and out["energy_uj"] == pytest.approx(160e-6)
    assert out["model_latency_ms"] == pytest.approx(2500 / 1e9 * 1e3)
    assert out["edp_js"] == pytest.approx(160e-12 * 2500 / 1e9)


@pytest.mark.parametrize("method", ["nsga2", "motpe"])
def test_optuna_methods_search_the_raw_mapspace_without_enumerating_it(method):
    """A mapspace has 10^8 configs and more: Optuna's samplers draw every knob's value (a product space),
    never listing the space."""
    import numpy as np

    from tunebench.harness.loop import tune_task
    from tunebench.methods import Budget, make_method

    target = AccelTarget(AccelSettings(objectives=["energy_pj_per_mac", "latency_s"]))
    task = task_of(target, MATMUL)
    assert task.space.size > 10**8
    result = tune_task(task, make_method(method), target, Budget(12), np.random.default_rng(0))
    assert len(result.measurements) == 12 and len({m.config.index for m in result.measurements}) == 12
