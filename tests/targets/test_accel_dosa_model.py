"""``model=dosa_firesim`` on ``target=accel``: DOSA's layers as tasks whose space is the recorded mappings, at
fidelities ``zigzag`` and ``firesim`` (replayed); how many mappings each layer has, a failed FireSim entry as an
invalid measurement, Gemmini's own tiling beside the best, a seeded ``python run.py`` run."""

from __future__ import annotations

import collections
import dataclasses
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from tunebench.datasets.models import DosaModel
from tunebench.errors import UserError
from tunebench.targets.accel import dosa_target
from tunebench.targets.accel.dosa import evaluate_row, read_rows
from tunebench.targets.accel.settings import AccelSettings
from tunebench.targets.accel.target import AccelTarget


@pytest.fixture(scope="module")
def layers():
    return dosa_target.dosa_layers(AccelSettings())


def test_one_measured_mapping_per_layer_and_accelerator(layers):
    """What the data holds: 71 layers, each on 3 or 6 accelerators, one row per (layer, accelerator); the
    counts of expressible mappings per layer the docs state."""
    rows = read_rows()
    per_pair = collections.Counter((r.layer, r.accumulator_kib, r.scratchpad_kib) for r in rows)
    assert len(per_pair) == len(rows) == 222 and set(per_pair.values()) == {1}
    assert len(layers) == 71
    assert collections.Counter(len(x.rows) for x in layers) == {3: 68, 6: 3}
    n = [len(x.space_rows) for x in layers]
    assert (sum(v >= 1 for v in n), sum(v >= 2 for v in n), sum(v >= 5 for v in n), sum(v >= 10 for v in n)) == \
        (65, 64, 3, 0)
    assert sum(len(x.not_expressible) for x in layers) == 21
    assert [x.number for x in layers if not x.space_rows] == [29, 32, 34, 38, 43, 48]


def test_a_config_is_its_rows_mapping_on_its_rows_accelerator(layers):
    """Each config of a layer's space is one recorded row: its accelerator knobs are the row's sizes and its
    mapspace knobs give the nest ZigZag evaluates for the row."""
    target = AccelTarget(AccelSettings())
    tasks, left = dosa_target.load_dosa_tasks(AccelSettings(), DosaModel(layers=[1, 42]), "accel")
    assert [t.name for t in tasks] == ["dosa01_conv2d", "dosa42_conv2d"] and left == []
    task = tasks[0]
    assert task.space.size == 3 and task.shape["mappings"] == 3 and task.shape["dosa_layer"] == 1
    for i in range(task.space.size):
        c = task.space.get(i)
        row, mapped = task.mod.space_rows[i]
        assert (c["accumulator_kib"], c["scratchpad_kib"]) == (row.accumulator_kib, row.scratchpad_kib)
        digits = task.space.digits(i)[len(dosa_target.HW_KNOBS):]
        assert task.mod.mapspace.nest(task.mod.mapspace.space.get(task.mod.mapspace.space.index_of_digits(digits))) \
            == evaluate_row(row, AccelSettings())["nest"]
        assert target.check(task, c)[0] is True
    # layer 42 has a row that cannot be expressed: not a config, but listed with its reason
    assert tasks[1].space.size == len(tasks[1].mod.rows) - 1
    assert [why for _, why in tasks[1].mod.not_expressible] == ["unrolls K by 15; target=accel unrolls 16"]


def test_both_fidelities_and_a_failed_firesim_entry():
    pytest.importorskip("zigzag")
    target = AccelTarget(AccelSettings())
    tasks, _ = target.load_tasks(DosaModel(layers=[2]))
    task, config = tasks[0], tasks[0].space.get(0)
    assert target.info.fidelities == ("zigzag", "firesim") and target.info.objectives == ("latency_s",)
    nominal = AccelTarget.nominal_info(AccelSettings(), DosaModel(layers=[2]))  # what validation checked methods against
    assert (nominal.objectives, nominal.fidelities) == (target.info.objectives, target.info.fidelities)
    assert target.info.details["mapspace"] is False and nominal.details["mapspace"] is False
    row = task.mod.space_rows[0][0]
    fs, = target.measure(task, [config])  # the top fidelity: FireSim's cycles, replayed
    assert fs.valid and fs.fidelity == "firesim" and fs.objectives == {"latency_s": row.firesim_cycles / 1e9}
    zz, = target.measure(task, [config], "zigzag")
    assert zz.valid and zz.objectives["latency_s"] == evaluate_row(row, AccelSettings())["cycles"] / 1e9
    with pytest.raises(UserError, match="fidelity='hw' is unknown for model=dosa_firesim; valid: zigzag, firesim"):
        target.measure(task, [config], "hw")
    other = dataclasses.replace(config, values=tuple(reversed(config.values)))
    assert not target.measure(task, [other])[0].valid
    # a failed FireSim entry (empty, NaN or not positive: None when read) is an invalid measurement, never a number
    task.mod.space_rows[0] = (dataclasses.replace(row, firesim_cycles=None), task.mod.space_rows[0][1])
    bad, = target.measure(task, [config], "firesim")
    assert not bad.valid and bad.objectives == {} and "FireSim: no measurement" in bad.error


def test_best_metrics_carry_gemmini_auto_tiling():
    target = AccelTarget(AccelSettings())
    task = target.load_tasks(DosaModel(layers=[1]))[0][0]
    ms = target.measure(task, [task.space.get(i) for i in range(task.space.size)])
    best = min(ms, key=lambda m: m.score)
    row = task.mod.space_rows[best.config.index][0]
    out = target.best_metrics(task, best)
    assert out["firesim_cycles"] == row.firesim_cycles and out["gemmini_auto_cycles"] == row.firesim_auto_cycles
    assert out["regret"] == 1.0 and out["layer_best_firesim_cycles"] == row.firesim_cycles
    assert out["speedup_over_gemmini_auto"] == pytest.approx(row.firesim_auto_cycles / row.firesim_cycles)
    assert out["layer_gemmini_auto_best_cycles"] == min(r.firesim_auto_cycles for r in task.mod.rows)
    run = target.run_metrics([(task, out)], [])
    assert run["regret_geomean"] == 1.0 and run["firesim_cycles_total"] == row.firesim_cycles


def test_mapspace_methods_and_energy_are_refused_before_a_run():
    from tunebench.methods import METHODS

    info = AccelTarget.nominal_info(AccelSettings(), DosaModel())
    assert info.fidelities == ("zigzag", "firesim") and not info.details["mapspace"]
    for name in ("mapspace_bo", "loma", "salsa", "timeloop_random"):
        assert METHODS[name].needs.problems(info)
    for name in ("random", "exhaustive", "autotvm", "chameleon", "flextensor", "dgp", "glimpse"):
        assert not METHODS[name].needs.problems(info), name
    with pytest.raises(UserError, match=r"target.objectives=\['energy_pj_per_mac', 'edp'\]: model=dosa_firesim"):
        AccelTarget.check_model(AccelSettings(objectives=["energy_pj_per_mac", "edp"]), DosaModel(), False)


def test_seeded_run_py_exhaustive_on_two_layers(tmp_path):
    """``python run.py target=accel model=dosa_firesim method=exhaustive``: every recorded mapping at both
    fidelities; the best is FireSim's fastest row; its check passes; Gemmini's own tiling is logged beside."""
    from mlflow.tracking import MlflowClient

    args = [sys.executable, os.path.join(ROOT, "run.py"), f"workdir={tmp_path}", "experiment=dosa", "progress=false",
            "target=accel", "model=dosa_firesim", "model.layers=[2,1]", "method=exhaustive",
            "budget.trials_per_task=6", "seed=3"]
    proc = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run, = client.search_runs([client.get_experiment_by_name("dosa").experiment_id])
    m = run.data.metrics
    assert m["n_measurements"] == 12 and m["n_invalid"] == 0
    target = AccelTarget(AccelSettings())
    for task in target.load_tasks(DosaModel(layers=[1, 2]))[0]:
        fastest = min(r.firesim_cycles for r, _ in task.mod.space_rows)
        assert m[f"{task.id}.firesim_cycles"] == fastest and m[f"{task.id}.regret"] == 1.0
        assert m[f"{task.id}.check_ok"] == 1.0 and f"{task.id}.gemmini_auto_cycles" in m
    assert m["speedup_over_gemmini_auto"] > 1.0
