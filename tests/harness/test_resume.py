"""resume=<run id>: unreadable record lines, conflicting overrides, finished runs, and what a resumed
config may not do on its own (import a handler, read records outside this work dir)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tunebench.config.experiment import RetimeSettings
from tunebench.errors import UserError
from tunebench.harness.experiment import run_experiment
from tunebench.methods.tensor_programs.autotvm.settings import AutoTVMSettings
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG


@pytest.fixture
def finished(tiny_cfg):
    """A FINISHED tiny run without the end-to-end step: (config, run id, record path, client)."""
    cfg = tiny_cfg
    cfg.measure.calibrate = False
    cfg.measure.retime = RetimeSettings(top_k=1, rounds=1, repeat=1)
    cfg.e2e.enabled = False
    run_id = run_experiment(cfg)
    client = MlflowClient(f"sqlite:///{cfg.workdir}/mlflow.db")
    return cfg, run_id, client.get_run(run_id).data.tags[RECORD_TAG], client


def _resume_cfg(cfg, run_id: str, **change):
    return dataclasses.replace(cfg, resume=run_id, **change)


def test_garbage_lines_are_skipped_then_a_finished_run_resumes_as_a_no_op(finished, caplog):
    cfg, run_id, path, client = finished
    lines = open(path).read().splitlines()
    assert len(lines) == 6
    with open(path, "w") as fh:  # 3 good records, garbage, a half-written line, a JSON non-record
        fh.write("\n".join(lines[:3]) + "\nnot json at all\n" + lines[3][: len(lines[3]) // 2] + "\n[1, 2]\n")
    client.update_run(run_id, status="FAILED")
    with caplog.at_level(logging.WARNING, logger="tunebench.record_file"):
        assert run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"]) == run_id
    assert f"{path}:4: unreadable record skipped" in caplog.text and f"{path}:5:" in caplog.text
    recs = read_records(path)
    assert [r["trial"] for r in recs] == list(range(6))  # 3 kept, 3 measured again; nothing lost
    assert client.get_run(run_id).info.status == "FINISHED"

    run_dir = os.path.dirname(path)  # resuming the FINISHED run: nothing measured, checked or written
    before = {n: open(os.path.join(run_dir, n)).read() for n in ("records.jsonl", "checks.jsonl")}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tunebench.harness.experiment"):
        assert run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"]) == run_id
    assert "is FINISHED; nothing to do" in caplog.text
    assert before == {n: open(os.path.join(run_dir, n)).read() for n in before}


def test_resume_refuses_conflicts_saved_handlers_and_foreign_records(finished, tmp_path_factory):
    cfg, run_id, path, client = finished
    client.update_run(run_id, status="FAILED")
    with pytest.raises(UserError, match=r"method='autotvm' conflicts with the run's method='random'"):
        run_experiment(_resume_cfg(cfg, run_id, method=AutoTVMSettings()), [f"resume={run_id}", "method=autotvm"])
    more = dataclasses.replace(cfg.budget, trials_per_task=99)
    with pytest.raises(UserError, match="budget.trials_per_task=99 conflicts"):
        run_experiment(_resume_cfg(cfg, run_id, budget=more), [f"resume={run_id}", "budget.trials_per_task=99"])

    cfg_path = os.path.join(os.path.dirname(path), "config.yaml")
    original = open(cfg_path).read()
    saved = yaml.safe_load(original)
    saved["target"]["handler"] = "evil_module:handle"  # as another user of a shared server could
    yaml.safe_dump(saved, open(cfg_path, "w"))
    with pytest.raises(UserError, match="target.handler='evil_module:handle'; give target.handler=evil_module:handle"):
        run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"])
    open(cfg_path, "w").write(original)

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.makedirs(elsewhere / "r")
    for name in os.listdir(os.path.dirname(path)):
        with open(os.path.join(os.path.dirname(path), name), "rb") as src, open(elsewhere / "r" / name, "wb") as dst:
            dst.write(src.read())
    client.set_tag(run_id, RECORD_TAG, str(elsewhere / "r" / "records.jsonl"))  # a tag pointing outside
    with pytest.raises(UserError, match="is not under"):
        run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"])
    assert client.get_run(run_id).info.status == "FAILED"  # every refusal left the run untouched
    trusted = _resume_cfg(cfg, run_id, records_dir=str(elsewhere))  # an explicitly given folder is trusted
    assert run_experiment(trusted, [f"resume={run_id}", f"records_dir={elsewhere}"]) == run_id
    assert client.get_run(run_id).info.status == "FINISHED"


def test_records_reader_counts_what_it_skips(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    good = {"task_id": "t", "trial": 0, "index": 1, "config": {"a": 1}, "valid": True}
    path.write_text(json.dumps(good) + "\n{\"task_id\": \"t\"}\n\x00\x01\n" + json.dumps(good)[:-3])
    with caplog.at_level(logging.WARNING):
        assert read_records(str(path)) == [good]
    assert "records.jsonl:2: unreadable record skipped (misses trial)" in caplog.text
    assert "2 unreadable line(s) skipped, 1 records read" in caplog.text


@pytest.mark.parametrize("last,kept", [
    ('{"task_id": "t", "trial": 1, "index": 2, "config": {"a": 2}, "valid": true}', True),  # lacks only "\n"
    ('{"task_id": "t", "trial": 1, "index": 2, "config": {"a"', False),  # half-written
    ('{"task_id": "t", "trial": 1, "index": 2, "config": {"a": 2}, "valid": tr', False),
    ('[1, 2]', False),  # JSON, not a record
    ('\x00\x01', False),
])
def test_last_line_without_newline_is_kept_only_when_complete(tmp_path, caplog, last, kept):
    from tunebench.record_file import RecordFile

    path = tmp_path / "records.jsonl"
    first = {"task_id": "t", "trial": 0, "index": 1, "config": {"a": 1}, "valid": True}
    path.write_text(json.dumps(first) + "\n" + last)
    with caplog.at_level(logging.WARNING):
        recs = read_records(str(path))
    assert recs == [first, json.loads(last)] if kept else recs == [first]
    assert ("half-written last line dropped" in caplog.text) != kept
    RecordFile(str(path)).close()  # the writer ends a complete last line, cuts off a half-written one
    assert path.read_text() == json.dumps(first) + "\n" + (last + "\n" if kept else "")


def test_resume_keeps_a_last_record_without_newline_and_never_retimes_a_finished_task(finished, caplog):
    cfg, run_id, path, client = finished
    run_dir = os.path.dirname(path)
    lines = open(path).read().splitlines()
    with open(path, "w") as fh:  # killed after the 4th record, before its newline
        fh.write("\n".join(lines[:4]))
    client.update_run(run_id, status="FAILED")
    assert run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"]) == run_id
    after = open(path).read().splitlines()
    assert after[:4] == lines[:4]  # the 4th record is kept, not measured again
    recs = read_records(path)
    assert [r["trial"] for r in recs] == list(range(6)) and len({r["index"] for r in recs}) == 6

    (tid,) = {r["task_id"] for r in recs}
    files = ("records.jsonl", "retimed.jsonl", "checks.jsonl", "tasks.json")
    before = {n: open(os.path.join(run_dir, n)).read() for n in files}
    history = len(client.get_metric_history(run_id, f"{tid}.best_latency_ms"))
    for _ in range(2):  # resumes with nothing left to measure: no re-timing, checks or task metrics again
        client.update_run(run_id, status="FAILED")
        with caplog.at_level(logging.INFO, logger="tunebench.harness.tuning"):
            assert run_experiment(_resume_cfg(cfg, run_id), [f"resume={run_id}"]) == run_id
        assert "nothing left to measure; the result of an earlier attempt is kept" in caplog.text
        assert {n: open(os.path.join(run_dir, n)).read() for n in files} == before
        assert len(client.get_metric_history(run_id, f"{tid}.best_latency_ms")) == history
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED" and run.data.metrics["n_measurements"] == 6
        assert run.data.metrics["tasks_latency_ms"] == pytest.approx(json.loads(before["tasks.json"])[0]["best_latency_ms"])
