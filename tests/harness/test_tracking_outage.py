"""A tracking server that goes down mid-run: spool, bounded back-off, replay, one-line error, resume."""
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, TINY_LAYER_ARG, free_port
from helpers import wait_for_records
from tunebench.errors import TrackingOutage
from tunebench.harness.tracking import tracker as tracking
from tunebench.harness.tracking.spool import HTTP_BOUNDS, SPOOL_NAME, bounded_http, unreachable
from tunebench.harness.tracking.tracker import Tracker

URI = "http://127.0.0.1:1"


class FakeClient:
    """An ``MlflowClient`` stand-in: records the calls it gets; while ``down``, every call raises
    ``ConnectionError`` (and counts as one network attempt)."""

    def __init__(self):
        self.down, self.calls, self.attempts = False, [], 0

    def _do(self, *call):
        self.attempts += 1
        if self.down:
            raise ConnectionError("[Errno 111] Connection refused")
        self.calls.append(call)

    def log_batch(self, run_id, metrics=(), params=()):
        self._do("log_batch", run_id, tuple((m.key, m.value, m.step) for m in metrics),
                 tuple((p.key, p.value) for p in params))

    def set_tag(self, run_id, key, value):
        self._do("set_tag", run_id, key, value)

    def log_artifact(self, run_id, path):
        self._do("log_artifact", run_id, path)

    def update_run(self, run_id, status):
        self._do("update_run", run_id, status)

    def set_terminated(self, run_id, status, end_time=None):
        self._do("set_terminated", run_id, status)


class Clock:
    """The tracker's back-off clock, moved by hand (``sleep`` moves it too)."""

    def __init__(self):
        self.t, self.slept = 1000.0, 0.0

    def now(self):
        return self.t

    def sleep(self, s):
        self.t += s
        self.slept += s


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(tracking, "_now", c.now)
    monkeypatch.setattr(tracking, "_sleep", c.sleep)
    return c


def _tracker(run_dir, client, wait_s=0.0):
    t = Tracker(URI, "test", str(run_dir), outage_wait_s=wait_s, client=client)
    t.run_id = "run1"
    t.attach_spool(str(run_dir))
    return t


def _spooled(run_dir):
    path = os.path.join(run_dir, SPOOL_NAME)
    return [json.loads(line)["op"] for line in _lines(path)] if os.path.exists(path) else []


def test_outage_is_spooled_with_bounded_backoff_and_replayed_in_order(tmp_path, clock, caplog):
    client = FakeClient()
    t = _tracker(tmp_path, client)
    art = tmp_path / "records.jsonl"
    art.write_text("{}\n")
    t.metric("a", 1.0, 0)
    t.flush()
    assert client.calls == [("log_batch", "run1", (("a", 1.0, 0),), ())] and not _spooled(tmp_path)

    client.down = True
    with caplog.at_level(logging.INFO, logger=tracking.__name__):
        t.metric("a", 0.5, 1)
        t.flush()  # the first failed call: one warning, the call spooled
        t.set_tags({"k": 1})
        t.artifact(str(art))  # within the back-off interval: spooled without touching the network
        assert client.attempts == 2 and _spooled(tmp_path) == ["metrics", "tags", "artifact"]
        intervals = []
        for _ in range(8):  # each due retry costs one attempt (the spool's first call), then waits longer
            clock.t = t.outage.next_try - 0.01
            t.set_tags({"k": 2})
            attempts = client.attempts
            clock.t = t.outage.next_try
            t.set_tags({"k": 3})
            assert client.attempts == attempts + 1
            intervals.append(t.outage.interval)
        assert intervals == [2, 4, 8, 16, 32, 60, 60, 60]
        n_spooled = len(_spooled(tmp_path))
        assert n_spooled == 3 + 16

        client.down = False
        clock.t = t.outage.next_try
        t.metric("a", 0.25, 2)
        t.flush()  # the server is back: the spool first, in order, then this call
    assert t.outage is None and not os.path.exists(tmp_path / SPOOL_NAME)
    replayed = client.calls[1:]
    assert replayed[0] == ("log_batch", "run1", (("a", 0.5, 1),), ())
    assert replayed[1] == ("set_tag", "run1", "k", "1") and replayed[2] == ("log_artifact", "run1", str(art))
    assert [c[3] for c in replayed[3:-1]] == ["2", "3"] * 8
    assert replayed[-1] == ("log_batch", "run1", (("a", 0.25, 2),), ())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(f"tracking server {URI} unreachable (")
    assert str(tmp_path / "records.jsonl") in warnings[0] and "retrying every ≤60 s" in warnings[0]
    assert f"tracking server back; {n_spooled} spooled calls replayed" in caplog.messages


def test_end_raises_one_line_outage_then_resume_replays_the_spool(tmp_path, clock):
    client = FakeClient()
    t = _tracker(tmp_path, client, wait_s=20.0)
    client.down = True
    t.metric("a", 1.0, 0)
    with pytest.raises(TrackingOutage) as err:
        t.end("FINISHED")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"tracking server {URI} unreachable since ")
    assert f"2 tracking calls spooled in {tmp_path / SPOOL_NAME}" in msg
    assert msg.endswith(f"resume with: python run.py resume=run1 tracking.uri={URI}")
    assert 0 < clock.slept <= 20.0 and client.attempts >= 5  # bounded: retried within outage_wait_s only
    assert _spooled(tmp_path) == ["metrics", "end"]

    fresh = FakeClient()  # resume=run1: the spool of the run's folder goes first, then the run goes on
    t2 = Tracker(URI, "test", str(tmp_path), client=fresh)
    t2.attach_spool(str(tmp_path))
    t2.reopen("run1")
    assert [c[0] for c in fresh.calls] == ["log_batch", "set_terminated", "update_run"]
    assert fresh.calls[1] == ("set_terminated", "run1", "FINISHED") and fresh.calls[2][2] == "RUNNING"
    assert not os.path.exists(tmp_path / SPOOL_NAME)


def test_end_delivers_when_the_server_comes_back_in_time(tmp_path, clock, monkeypatch):
    client = FakeClient()
    t = _tracker(tmp_path, client, wait_s=60.0)
    client.down = True
    t.set_tags({"k": "v"})
    real_sleep = clock.sleep

    def sleep(s):  # the server is back after the first pause
        real_sleep(s)
        client.down = False

    monkeypatch.setattr(tracking, "_sleep", sleep)
    t.end("FINISHED")
    assert [c[0] for c in client.calls] == ["set_tag", "set_terminated"] and not _spooled(tmp_path)


def test_a_failed_run_does_not_wait_for_the_server(tmp_path, clock, caplog):
    client = FakeClient()
    t = _tracker(tmp_path, client, wait_s=60.0)
    client.down = True
    with caplog.at_level(logging.WARNING, logger=tracking.__name__):
        t.end("FAILED")  # an error is already on its way: one attempt, one warning line, no exception
    assert clock.slept == 0 and _spooled(tmp_path) == ["end"]
    assert "resume with: python run.py resume=run1" in caplog.messages[-1]


def test_local_store_never_spools(tmp_path):
    client = FakeClient()
    client.down = True
    t = Tracker(None, "test", str(tmp_path), client=client)
    t.run_id = "run1"
    t.attach_spool(str(tmp_path))
    with pytest.raises(ConnectionError):
        t.set_tags({"k": "v"})
    assert t.outage is None and not os.path.exists(tmp_path / SPOOL_NAME)


def test_what_counts_as_unreachable():
    import requests
    from mlflow.exceptions import MlflowException, RestException

    assert unreachable(ConnectionError("refused")) and unreachable(requests.exceptions.ReadTimeout())
    try:  # how MLflow's REST client wraps a connection failure (the cause only as __context__)
        try:
            raise requests.exceptions.ConnectionError("Max retries exceeded")
        except requests.exceptions.ConnectionError as e:
            raise MlflowException(f"API request failed with exception {e}")  # noqa: B904  (as MLflow does)
    except MlflowException as wrapped:
        assert unreachable(wrapped)
    assert not unreachable(RestException({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no run"}))
    assert not unreachable(ValueError("bad value")) and not unreachable(FileNotFoundError("x"))


def test_bounded_http_makes_mlflow_fail_fast_and_only_inside(monkeypatch):
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    for k in HTTP_BOUNDS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")  # the user's own value is kept
    client = MlflowClient(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    t0 = time.perf_counter()
    with bounded_http():
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
        with pytest.raises(Exception) as err:
            client.log_batch("0" * 32, metrics=[Metric("a", 1.0, 0, 0)])
    assert time.perf_counter() - t0 < 10 and unreachable(err.value)
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"


# -- a real MLflow server, killed in the middle of a run --------------------------------------------

def _start_server(port: int, folder) -> subprocess.Popen:
    """``mlflow server`` on ``port`` with its store in ``folder`` (one worker, no job runner); mlflow is
    a pinned dependency, so a server that does not come up fails the test."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(folder / "server.log", "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1", "--backend-store-uri", f"sqlite:///{folder}/srv.db",
                                 "--default-artifact-root", str(folder / "art")],
                                cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = (folder / "server.log").read_text()[-500:]
            pytest.fail(f"mlflow server did not start (exit {proc.returncode}): {tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    _stop(proc)
    pytest.fail("mlflow server did not answer /health within 90 s")


def _stop(proc) -> None:
    if proc is not None and proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    if proc is not None:
        proc.wait()


def _lines(path) -> list[str]:
    with open(path) as fh:
        return fh.read().splitlines()


# ~60 s on 2 idle cores (two server starts, two runs), ~80 s on a loaded machine; the spool, its back-off, the
# one-line outage and the replay on resume are the fake-clock tests above
@pytest.mark.slow
def test_server_killed_mid_run_then_resume_delivers_everything(tmp_path):
    from mlflow.tracking import MlflowClient

    port, srv_dir, work = free_port(), tmp_path / "srv", tmp_path / "work"
    srv_dir.mkdir()
    work.mkdir()
    uri = f"http://127.0.0.1:{port}"
    args = [TINY_LAYER_ARG, "target.runner.repeat=2", "target.runner.min_repeat_ms=5", "progress=false",
            "budget.trials_per_task=12", "target.batch_size=2", "target.runner.cooldown_s=0.4", "e2e.enabled=false",
            "check_correctness=false", "measure.peak=false", "measure.calibrate=false", "measure.retime.rounds=1",
            f"tracking.uri={uri}", "tracking.outage_wait_s=3"]
    server, run = _start_server(port, srv_dir), None
    try:
        t0 = time.time()
        run = subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=work, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        rec_path = wait_for_records(work, run, 3)
        _stop(server)
        _, err = run.communicate(timeout=300)
        elapsed = time.time() - t0
        run_id = os.path.basename(os.path.dirname(rec_path))
        errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert run.returncode == 1, err[-3000:]
        assert len(errors) == 1 and errors[0].endswith(f"resume with: python run.py resume={run_id} tracking.uri={uri}")
        assert "Traceback" not in err and elapsed < 180
        assert len([ln for ln in err.splitlines() if "WARNING" in ln and "unreachable" in ln]) == 1, err[-3000:]
        assert len(_lines(rec_path)) == 12  # measuring went on without the server
        assert os.path.exists(os.path.join(os.path.dirname(rec_path), SPOOL_NAME))

        server = _start_server(port, srv_dir)
        res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), f"resume={run_id}", f"tracking.uri={uri}",
                              "progress=false"], cwd=work, capture_output=True, text=True, timeout=300, check=False)
        assert res.returncode == 0, res.stderr[-3000:]
        assert "spooled calls of an earlier attempt replayed" in res.stderr, res.stderr[-3000:]
        client = MlflowClient(uri)
        r = client.get_run(run_id)
        assert r.info.status == "FINISHED" and r.data.metrics["n_measurements"] == 12
        recs = [json.loads(ln) for ln in _lines(rec_path)]
        assert sorted(x["trial"] for x in recs) == list(range(12)) and len({x["index"] for x in recs}) == 12
        (tid,) = {k.split(".")[0] for k in r.data.metrics if k.endswith(".search_best_latency_ms")}
        curve = client.get_metric_history(run_id, f"{tid}.search_best_latency_ms")
        assert sorted(p.step for p in curve) == list(range(12))  # the points logged while it was down, too
        assert not os.path.exists(os.path.join(os.path.dirname(rec_path), SPOOL_NAME))
    finally:
        if run is not None and run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        _stop(server)


def test_per_trial_metrics_reach_the_store_in_batches(tmp_path, monkeypatch):
    """flush_due writes nothing before FLUSH_EVERY_S have passed, then everything queued in one batch, each
    value with its own step; end() writes what is left."""
    now = [100.0]
    monkeypatch.setattr(tracking.time, "monotonic", lambda: now[0])
    client = FakeClient()
    t = Tracker(None, "test", str(tmp_path), client=client)
    t.run_id = "run1"
    for step in range(3):
        t.metric("curve", float(step), step)
        t.flush_due()
    assert client.calls == []
    now[0] += tracking.FLUSH_EVERY_S
    t.metric("curve", 3.0, 3)
    t.flush_due()
    assert client.calls == [("log_batch", "run1", tuple(("curve", float(s), s) for s in range(4)), ())]
    t.metric("curve", 4.0, 4)
    t.end()
    assert client.calls[1] == ("log_batch", "run1", (("curve", 4.0, 4),), ())
    assert client.calls[-1][0] == "set_terminated"
