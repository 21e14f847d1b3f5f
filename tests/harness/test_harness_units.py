import json
import os

import pytest

from conftest import ROOT
from tunebench.config.experiment import Budget
from tunebench.config.load import typed
from tunebench.errors import UserError
from tunebench.harness.setup.preflight import check_overrides
from tunebench.harness.tracking.tracker import check_reachable, flatten
from tunebench.record_file import RecordFile, read_records
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.task import Measurement, Outcome, Task

CONF = os.path.join(ROOT, "conf")


def _task():
    t = Task(id="abc123abc123", name="t", kind="conv2d", mod=None, shape={"k": 3}, flops=100)
    t.space = Space([SplitKnob("tile", 8, 2), ChoiceKnob("u", (0, 1))])
    return t


def test_records_append_flush_and_truncated_tail(tmp_path):
    t = _task()
    path = str(tmp_path / "r" / "records.jsonl")
    rf = RecordFile(path, {"method": "random"})
    for i in range(3):
        m = (Measurement.timed(t.id, t.space.get(i), 1e-3 * (i + 1), trial=i) if i != 1 else
             Measurement(t.id, t.space.get(i), Outcome.RUN_ERROR, error="boom", trial=i))
        rf.append(m, t)
    # flushed before close: another reader sees all lines now
    recs = read_records(path)
    assert [r["trial"] for r in recs] == [0, 1, 2] and recs[1]["error"] == "boom" and recs[0]["method"] == "random"
    rf.close()
    with open(path, "a") as fh:  # a killed writer's half line
        fh.write('{"task_id": "abc')
    assert len(read_records(path)) == 3
    rf = RecordFile(path)  # reopening cuts the partial line
    rf.close()
    assert open(path).read().endswith("\n") and len(read_records(path)) == 3
    back = Measurement.from_record(recs[2], t.space)
    assert back.config.index == 2 and back.valid and back.latency_s == pytest.approx(3e-3)
    bad = dict(recs[2], index=3)
    with pytest.raises(ValueError):
        Measurement.from_record(bad, t.space)


@pytest.mark.parametrize("budget,msg", [({"trials_per_task": 0}, "trials_per_task=0"),
                                        ({"trials_per_task": -3}, "trials_per_task=-3"),
                                        ({"trials_per_task": "abc"}, "trials_per_task='abc'"),
                                        ({"trials_per_task": 4, "seconds_per_task": 0}, "seconds_per_task=0"),
                                        ({"trials_per_task": 4, "early_stopping": -1}, "early_stopping=-1")])
def test_bad_budget_is_a_one_line_error(budget, msg):
    with pytest.raises(UserError, match=msg) as exc:
        typed(Budget, budget, "budget")
    assert "\n" not in str(exc.value)


def test_good_budget():
    b = typed(Budget, {"trials_per_task": 8, "seconds_per_task": 30, "early_stopping": None}, "budget")
    assert b.trials_per_task == 8 and b.seconds_per_task == 30.0 and b.early_stopping is None


def test_unknown_group_values_are_rejected_with_valid_choices():
    check_overrides(["method=random", "model=resnet18,vgg16", "budget.trials_per_task=3"], CONF)
    for arg, bad in [("method=nope", "nope"), ("model=resnet18,foo", "foo"), ("target=tpu", "tpu")]:
        with pytest.raises(UserError) as exc:
            check_overrides([arg], CONF)
        text = str(exc.value)
        assert bad in text and "valid:" in text and "\n" not in text


def test_unreachable_tracking_uri():
    with pytest.raises(UserError, match="unreachable"):
        check_reachable("http://127.0.0.1:9/", timeout_s=2)
    with pytest.raises(UserError, match="not writable|does not exist"):
        check_reachable("sqlite:////nonexistent-dir/x/mlflow.db")
    with pytest.raises(UserError, match="unsupported scheme"):
        check_reachable("ftp://x")


def test_flatten_params():
    flat = flatten({"a": {"b": 1, "c": [1, 2]}, "d": None})
    assert flat == {"a.b": "1", "a.c": json.dumps([1, 2]), "d": "None"}


def test_best_on_a_multi_fidelity_target_ranks_only_the_top_fidelity():
    from types import SimpleNamespace

    from tunebench.harness.loop import TaskResult
    from tunebench.harness.measurement import best_of_fidelity

    t = _task()
    ms = [Measurement.timed(t.id, t.space.get(i), lat, fidelity=f)
          for i, (lat, f) in enumerate([(1e-6, "estimate"), (3e-6, "impl"), (2e-6, "impl"), (0.5e-6, "synth")])]
    result = TaskResult(t, ms)
    assert [m.config.index for m in result.ranked()] == [3, 0, 2, 1]
    best, _ = best_of_fidelity(result, SimpleNamespace(fidelities=["estimate", "synth", "impl"]), check=False)
    assert best.fidelity == "impl" and best.latency_s == 2e-6  # the estimate's 1 us is no result


def test_history_gets_the_records_written_once(tmp_path):
    """The record writer converts each measurement once; the history receives those same lines (with the
    method's role) when the task ends, prior (resumed) records first."""
    import numpy as np

    from tunebench.harness.loop import tune_task
    from tunebench.harness.observers import HistoryFeed, RecordWriter
    from tunebench.history import History
    from tunebench.methods.base import Budget
    from tunebench.methods.random_search import RandomSearch
    from tunebench.testing.fakes import FakeTarget

    class Source(RandomSearch):
        def report(self):
            return {"role": "source"}

    t = _task()
    rf = RecordFile(str(tmp_path / "records.jsonl"), {"run_id": "r1"})
    prior_rec = {"task_id": t.id, "trial": 0, "config": {}, "note": "resumed"}
    writer = RecordWriter(rf, t, prior=[prior_rec])
    history = History()
    tune_task(t, Source(), FakeTarget(), Budget(trials_per_task=5), np.random.default_rng(0),
              observers=[writer, HistoryFeed(history, t, writer)])
    rf.close()
    entry = history.tasks[t.id]
    assert entry.role == "source" and entry.origin == "run"
    assert entry.records[0] is prior_rec and len(entry.records) == 6
    assert all(a is b for a, b in zip(entry.records[1:], writer.lines[1:]))
    assert [r["trial"] for r in read_records(rf.path)] == [0, 1, 2, 3, 4]
    assert entry.records[1]["run_id"] == "r1"


def test_a_signal_inside_a_deferred_block_stops_the_run_when_the_block_ends():
    import os
    import signal

    from tunebench.errors import RunStopped
    from tunebench.harness.stopping import signals_deferred, stop_on_signals

    done = []
    with pytest.raises(RunStopped), stop_on_signals():
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("the block finished")  # a tracking write is not cut in two
        done.append("not reached")
    assert done == ["the block finished"]


def test_a_finished_task_logs_where_its_time_went(caplog):
    """The task's log line sums its builds' worker seconds and the device's seconds and adds the protocol's."""
    import logging

    from tunebench.harness.loop import TaskResult
    from tunebench.harness.progress import TuningProgress

    t = _task()
    result = TaskResult(t, [Measurement.timed(t.id, t.space.get(i), 1e-3, build_s=1.25, run_s=0.5)
                            for i in range(4)], search_s=7.0, stop_reason="trials")
    with caplog.at_level(logging.INFO, logger="tunebench"), TuningProgress(1, enabled=False) as progress:
        progress.finish_task(progress.start_task(t, 4, []), result, result.measurements[0], protocol_s=2.5)
    line = caplog.records[-1].getMessage()
    assert "4 trials (0 invalid) in 7.0 s (builds 5.0 s of worker time, device 2.0 s; then the protocol 2.5 s)" in line


def test_commands_and_spawned_workers_do_not_import_every_method():
    """``python -m tunebench <command>`` adds only that command's options, and the workers that
    multiprocessing spawns re-import ``run.py`` (as ``__mp_main__``) without registering every option:
    neither imports the methods (PyTorch, XGBoost, BoTorch: seconds per process)."""
    import subprocess
    import sys

    code = f"""
import runpy, sys
from tunebench.__main__ import build_parser
assert build_parser("server").parse_args(["server", "stop"]).command == "server"
runpy.run_path({os.path.join(ROOT, "run.py")!r}, run_name="__mp_main__")
assert "tunebench.methods" not in sys.modules, sorted(m for m in sys.modules if m.startswith("tunebench.methods"))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
