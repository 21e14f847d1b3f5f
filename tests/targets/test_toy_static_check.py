"""A target with a static check through the driver (the worked example's toy target, a config without a
recorded latency rejected before it is measured): the rejected configs in tasks.json and the run metrics,
only trials in the record file."""

import os
from dataclasses import dataclass

import pytest
from mlflow.tracking import MlflowClient
from toy_target import ToyReplaySettings, ToyReplayTarget

from tunebench.config.knobs import NAME, knob
from tunebench.harness.experiment import run_experiment
from tunebench.harness.run_folder import read_tasks_json
from tunebench.harness.setup.compose import compose_config
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG
from tunebench.targets import TARGETS, register_target


@dataclass
class StaticToySettings(ToyReplaySettings):
    name: str = knob("toy_static", NAME, "the target")
    kind: str = knob("toy_static", NAME, "the target class")


class StaticToyTarget(ToyReplayTarget):
    """The worked example's target with a static check: a config without a recorded latency cannot run."""

    kind = "toy_static"
    Settings = StaticToySettings

    def static_check(self, task, config):
        return None if f"{task.name}_{config.index}" in self.settings.latencies else "no recorded latency"


@pytest.fixture
def static_toy():
    register_target(StaticToyTarget)
    yield
    TARGETS.pop(StaticToyTarget.kind)


def test_a_run_reports_the_rejected_configs_and_records_only_trials(static_toy, tmp_path):
    cfg = compose_config([f"workdir={tmp_path}", "experiment=toy", "progress=false", "target=toy_static",
                          "method=random", "budget.trials_per_task=3", "check_correctness=false"])
    cfg.target.latencies = {f"layer{t}_{i}": 1e-3 * (1 + i) for t in (0, 1) for i in range(0, 60, 3)}  # 2 in 3 fail
    run = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED"
    recs = read_records(run.data.tags[RECORD_TAG])
    assert len(recs) == 6 and all(r["valid"] for r in recs)
    entries = list(read_tasks_json(os.path.dirname(run.data.tags[RECORD_TAG])).values())
    assert len(entries) == 2 and all(e["trials"] == 3 and e["static_invalid"] > 0 for e in entries)
    rejected = sum(e["static_invalid"] for e in entries)
    assert all(e["static_invalid_fraction"] == pytest.approx(e["static_invalid"] / (e["static_invalid"] + 3))
               for e in entries)
    m = run.data.metrics
    assert m["n_static_invalid"] == rejected and m["n_measurements"] == 6 and m["n_invalid"] == 0
    assert m["static_invalid_fraction"] == pytest.approx(rejected / (rejected + 6))
    assert {m[f"{e['id']}.static_invalid"] for e in entries} == {e["static_invalid"] for e in entries}
    # the leaderboard's column: the share of proposed configs rejected before building
    from tunebench.report.aggregate import aggregate
    from tunebench.report.cells import group_tables
    from tunebench.report.query import load_runs

    table, _ = aggregate(load_runs(MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")), baseline="random")
    (_, headers, cells), = list(group_tables(table))
    share = cells[0][headers.index("rejected before building [%]")]
    assert share == f"{100 * m['static_invalid_fraction']:.1f}"
