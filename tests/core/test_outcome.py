"""Typed outcomes: every target's error text reads back as the outcome it measured; a measurement is
immutable, stores each measured value once, and its record line is what it was before outcomes were typed."""
import dataclasses
import json
import math

import numpy as np
import pytest

from helpers import small_task
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.record_file import record_line
from tunebench.targets.base import is_static_invalid, static_invalid
from tunebench.targets.fpga.flow import StageResult
from tunebench.targets.memory.target import WrongOutput
from tunebench.targets.tvm.batch import failure_kind
from tunebench.targets.workers import TIMEOUT
from tunebench.task import Measurement, Outcome
from tunebench.testing.fakes import FakeTarget

O = Outcome
# the error texts the targets write (src/targets/...), and the outcome each one measured
TEXTS = [
    ("static: 2048 threads per block > 1024", O.STATIC_INVALID),  # base.static_invalid (target=cuda)
    ("build: TVMError: cannot split", O.BUILD_ERROR),  # tvm/target.py
    (f"build: {TIMEOUT}no result after 10 s (worker killed)", O.TIMEOUT),
    ("run: worker crashed (exit code -11)", O.RUN_ERROR),
    (f"run: {TIMEOUT}no result after 10 s (worker killed)", O.TIMEOUT),
    ("synth: ERROR: unknown cell", O.BUILD_ERROR),  # fpga/flow.py, open_flow.py, vivado.py
    ("synth: timeout after 900 s", O.TIMEOUT),
    ("synth: does not fit: 30000 luts > 24000 on the device", O.INFEASIBLE),
    ("impl: does not fit: Unable to place cell", O.INFEASIBLE),
    ("impl: no clock frequency in the nextpnr report", O.BUILD_ERROR),
    ("impl: timeout", O.TIMEOUT),
    ("hls: no csynth.xml written", O.BUILD_ERROR),
    ("hls: unreadable csynth.xml (bad)", O.BUILD_ERROR),
    ("sim: IndexError: list index out of range", O.RUN_ERROR),
    ("sim: output differs from the numpy reference at 3 element(s)", O.WRONG_OUTPUT),
    ("failed at SYN (the source records 1e+08)", O.BUILD_ERROR),  # data/fpga_recorded tables
    ("not a design of the table: {'a': 1}", O.INFEASIBLE),  # fpga/table_target.py
    ("invalid in table", O.RUN_ERROR),  # fpga/table.py: a failed row without a reason
    ("ZigZag: ValueError: no spatial unrolling", O.INFEASIBLE),  # accel/target.py
    ("not a recorded mapping of DOSA layer 3", O.INFEASIBLE),  # accel/dosa_target.py
    ("FireSim: no measurement (dataset.csv row 5: target.gemmini_cycle is not a positive number)",
     O.RUN_ERROR),  # accel/dosa_target.py
    ("does not fit: utilization {'W': [1.5]}", O.INFEASIBLE),
    ("not an order of this graph's nodes (unknown: ['x'])", O.INFEASIBLE),  # memory/target.py
    ("not a topological order of the graph", O.INFEASIBLE),
    ("peak 1204224 B exceeds target.capacity_bytes=1000000", O.INFEASIBLE),
    ("measured peak 10 B != computed (live) 12 B", O.WRONG_OUTPUT),
    ("2 dropped tensors were not released", O.WRONG_OUTPUT),
    ("outputs differ from the original graph's (max |diff| 0.1)", O.WRONG_OUTPUT),
    ("InvalidConfig", O.INFEASIBLE),  # Kernel Tuner caches (target=replay)
    ("CompilationFailedConfig", O.BUILD_ERROR),
    ("RuntimeFailedConfig", O.RUN_ERROR),
]


@pytest.mark.parametrize("text,outcome", TEXTS)
def test_every_error_text_reads_back_as_its_outcome(text, outcome):
    assert Outcome.of_error(False, text) is outcome
    assert Outcome.of_error(True, "") is Outcome.OK and Outcome.OK.valid and not outcome.valid


def test_the_targets_set_the_outcome_their_text_reads_back_as():
    task, cfg = small_task(), small_task().space.get(0)
    m = static_invalid(task, cfg, "too big", fidelity="synth")
    assert m.outcome is O.STATIC_INVALID and is_static_invalid(m) and m.fidelity == "synth"
    assert not is_static_invalid(Measurement(task.id, cfg, O.BUILD_ERROR, error="static: but built"))
    for text, otherwise in [(f"{TIMEOUT}no result", O.BUILD_ERROR), ("crashed", O.RUN_ERROR)]:
        kind = failure_kind(text, otherwise)
        prefix = "build: " if otherwise is O.BUILD_ERROR else "run: "
        assert kind is Outcome.of_error(False, prefix + text)
    for text, outcome in TEXTS[5:15]:
        assert StageResult(False, {}, text).outcome is outcome
    assert WrongOutput("outputs differ").outcome is O.WRONG_OUTPUT


def test_a_measurement_is_frozen_and_keeps_its_own_dicts():
    task, cfg = small_task(), small_task().space.get(1)
    objectives = {"latency_s": 2e-3}
    m = Measurement(task.id, cfg, O.OK, objectives=objectives)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.trial = 3
    objectives["latency_s"] = 1.0
    assert m.latency_s == 2e-3 and m.score == 2e-3
    later = dataclasses.replace(m, trial=3, search_s=1.5)
    assert (m.trial, m.search_s, later.trial, later.search_s, later.latency_s) == (-1, 0.0, 3, 1.5, 2e-3)
    with pytest.raises(TypeError):
        Measurement(task.id, cfg, True)  # the outcome is an Outcome, not a bool
    with pytest.raises(ValueError):
        Measurement(task.id, cfg, O.RUN_ERROR, objectives={"latency_s": 1.0}, error="run: x")


def test_the_latency_is_stored_once():
    task, cfg = small_task(), small_task().space.get(2)
    fpga = Measurement.ok(task.id, cfg, {"delay_s": 4e-6, "luts": 10.0}, 4e-6)
    assert fpga.latency_s == 4e-6 and fpga.unscored_latency_s == math.inf
    accel = Measurement.ok(task.id, cfg, {"energy_pj_per_mac": 0.5}, 3e-4)  # latency measured, not an objective
    assert accel.latency_s == 3e-4 and accel.score == 0.5
    memory = Measurement.ok(task.id, cfg, {"peak_bytes": 100.0})
    assert memory.latency_s == math.inf and memory.to_record()["latency_s"] is None
    with pytest.raises(ValueError):
        Measurement(task.id, cfg, O.OK, objectives={"latency_s": 1.0}, unscored_latency_s=1.0)
    assert Measurement(task.id, cfg, O.TIMEOUT, error="run: timeout: x").latency_s == math.inf


def test_record_lines_are_those_of_before_and_read_back():
    task, cfg = small_task(), small_task().space.get(3)
    m = Measurement.timed(task.id, cfg, 5e-4, latency_std_s=1e-6, gflops=0.02, build_s=0.4, run_s=0.3,
                          cost_s=0.7, search_s=2.9, trial=4, timestamp=1795000000.0, latency_min_s=4.9e-4)
    want = {"task_id": task.id, "trial": 4, "index": 3, "config": cfg.to_dict(), "valid": True,
            "latency_s": 5e-4, "latency_std_s": 1e-6, "gflops": 0.02, "error": "", "build_s": 0.4, "run_s": 0.3,
            "cost_s": 0.7, "search_s": 2.9, "fidelity": "hw", "timestamp": 1795000000.0,
            "objectives": {"latency_s": 5e-4}, "stage_s": {}, "latency_min_s": 4.9e-4, "noisy": False, "noise": {}}
    assert json.dumps(m.to_record()) == json.dumps(want)  # the keys in their order, the values
    bad = Measurement(task.id, cfg, O.TIMEOUT, error="run: timeout: no result", trial=5, timestamp=1.0)
    assert bad.to_record()["valid"] is False and bad.to_record()["latency_s"] is None
    for one in (m, bad, Measurement.ok(task.id, cfg, {"energy_pj_per_mac": 0.5}, 3e-4, trial=6)):
        back = Measurement.from_record(record_line(one, task), task.space)
        assert back == one
    old = {k: v for k, v in want.items() if k != "objectives"}  # a line written before objectives existed
    assert Measurement.from_record(old, task.space).objectives == {"latency_s": 5e-4}


def test_the_loop_stamps_copies_and_leaves_the_targets_measurements_alone():
    made, told = [], []

    class Keeping(FakeTarget):
        def measure(self, task, configs, fidelity=None):
            out = super().measure(task, configs, fidelity)
            made.extend(out)
            return out

    task, target = small_task(), Keeping(fail=lambda c, f: "run: boom" if c.index % 3 == 0 else None)
    method = make_method({"name": "random"})
    tell = method.tell
    method.tell = lambda ms: (told.extend(ms), tell(ms))
    res = tune_task(task, method, target, Budget(8), np.random.default_rng(0))
    assert [m.trial for m in made] == [-1] * 8 and all(m.search_s == 0.0 for m in made)
    assert [m.trial for m in res.measurements] == list(range(8)) and told == res.measurements
    assert [m.config.index for m in made] == [m.config.index for m in res.measurements]
    assert {m.outcome for m in res.measurements} == {O.OK, O.RUN_ERROR}
