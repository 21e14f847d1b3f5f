"""Every FPGA method is a deterministic function of the run's seed on a replayed table.

Each method runs twice with one seed on the tiny table, through the harness loop and its record
writer, with library state disturbed between the runs (torch, numpy and ``random`` global generators
advanced), and the two record files must be equal byte for byte once the wall-clock fields
(``search_s``, ``timestamp``) are removed.
"""

import json
import random

import numpy as np
import pytest
import torch

from fpga_tiny import TinyTableTarget, tiny_task
from tunebench.harness.loop import tune_task
from tunebench.harness.observers import RecordWriter
from tunebench.methods import make_method
from tunebench.methods.base import Budget
from tunebench.record_file import RecordFile

WALL_CLOCK = ("search_s", "timestamp")
# Short settings of the slow methods (the determinism does not depend on the budget).
SETTINGS = {"cgp": {"max_iterations": 4}, "fpl18": {"max_iterations": 4},
            "mes": {"max_iterations": 3, "mes_samples": 3},
            "dcgp": {"max_iterations": 3, "deep_kernel": [16, 8, 4], "fit_steps": 10, "refit_steps": 5},
            "ann": {"n_init": 8, "max_iter": 200}, "bt": {"n_init": 8}, "dac19": {"n_init": 8},
            "nsga2": {"population_size": 8}, "motpe": {"n_startup_trials": 8}, "random": {}}
TRIALS = 40


def _record_bytes(path, name: str) -> bytes:
    task, target = tiny_task(), TinyTableTarget()
    records = RecordFile(str(path), context={"method": name})
    writer = RecordWriter(records, task)
    tune_task(task, make_method({"name": name, **SETTINGS[name]}), target, Budget(TRIALS),
              np.random.default_rng(7), observers=[writer])
    records.close()
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for key in WALL_CLOCK:
            rec.pop(key)
        lines.append(json.dumps(rec, sort_keys=True))
    return "\n".join(lines).encode()


def _disturb_global_generators(k: int) -> None:
    torch.randn(17 + k)
    np.random.rand(5 + k)
    random.random()


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_same_seed_same_records(name, tmp_path):
    first = _record_bytes(tmp_path / "a.jsonl", name)
    _disturb_global_generators(3)
    second = _record_bytes(tmp_path / "b.jsonl", name)
    assert first.count(b"\n") >= 7, "the run measured almost nothing"
    assert first == second
