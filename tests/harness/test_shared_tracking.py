"""Shared stores on loopback: an MLflow server on PostgreSQL receiving a sweep, and one Optuna study
(journal file, PostgreSQL) shared by two worker processes. Every server a test starts it stops, by pid;
the PostgreSQL ones are skipped where pgserver / psycopg are not installed (the scale extra)."""
import json
import os
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, free_port

TABLE_RUN = ["target=table", "model=hls_gemm", "budget=fpga", "progress=false"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run(args, cwd, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


@pytest.fixture
def tracking_server(tmp_path):
    pytest.importorskip("pgserver", reason="pgserver is not installed (the scale extra)")
    pytest.importorskip("psycopg", reason="psycopg is not installed (the scale extra)")
    port, data = free_port(), tmp_path / "tracking"
    proc = subprocess.Popen([sys.executable, "-m", "tunebench", "server", "start", "--port", str(port),
                             "--data", str(data)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    pids = []
    try:
        line = ""
        while "tracking.uri=" not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "the server command ended before serving"
        pids = list(json.loads((data / "server.json").read_text()).values())[:2]
        yield line.split()[0].split("=", 1)[1], data, pids
    finally:
        if proc.poll() is None:
            subprocess.run([sys.executable, "-m", "tunebench", "server", "stop", "--data", str(data)], timeout=120)
            proc.wait(timeout=60)
        for pid in pids:  # whatever is left, by pid
            if pid and _alive(pid):
                os.kill(pid, 9)


def test_mlflow_server_on_postgres_receives_a_sweep_and_stops(tracking_server, tmp_path):
    uri, data, pids = tracking_server
    assert uri.startswith("http://127.0.0.1:")
    res = _run(["-m", "method=random", "seed=0,1", "budget.trials_per_task=5", f"tracking.uri={uri}", *TABLE_RUN],
               tmp_path)
    out, _ = res.communicate(timeout=600)
    assert res.returncode == 0, out[-3000:]
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" and r.data.metrics for r in runs)
    assert not (tmp_path / "mlflow.db").exists()  # nothing went to a local store
    stop = subprocess.run([sys.executable, "-m", "tunebench", "server", "stop", "--data", str(data)],
                          capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    deadline = time.time() + 30
    while any(_alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


def _shared_study_runs(tmp_path, storage: str):
    """Two run.py processes (seeds 0 and 1) at once, nsga2 on one table task, one shared study."""
    # the storage quoted: a URL may hold '=' (Hydra's override grammar)
    procs = [_run(["method=nsga2", f"seed={s}", "budget.trials_per_task=12", f"method.storage='{storage}'",
                   "method.study=shared", f"workdir={tmp_path}", *TABLE_RUN], tmp_path) for s in (0, 1)]
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out[-3000:]


def _check_study(storage):
    import optuna

    (summary,) = optuna.get_all_study_summaries(storage)
    assert summary.study_name.startswith("shared-")
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
    workers = {t.user_attrs.get("worker") for t in trials}
    assert len(trials) == 24 and len({t.number for t in trials}) == 24
    assert len(workers) == 2  # both processes asked and told trials of the one study
    assert all(t.state.is_finished() for t in trials)


def test_two_processes_share_an_optuna_study_in_a_journal_file(tmp_path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = tmp_path / "study.log"
    _shared_study_runs(tmp_path, f"journal:{path}")
    _check_study(JournalStorage(JournalFileBackend(str(path))))


def test_two_processes_share_an_optuna_study_on_postgres(tmp_path):
    pgserver = pytest.importorskip("pgserver", reason="pgserver is not installed (the scale extra)")
    pytest.importorskip("psycopg", reason="psycopg is not installed (the scale extra)")
    # 'delete': cleanup() stops the server and drops its exit hook (other modes log from it at exit, after
    # pytest closed the streams)
    server = pgserver.get_server(str(tmp_path / "pgdata"), cleanup_mode="delete")
    pid = server.get_pid()
    try:
        url = server.get_uri("postgres").replace("postgresql://", "postgresql+psycopg://", 1)
        _shared_study_runs(tmp_path, url)
        _check_study(url)
    finally:
        server.cleanup()
        deadline = time.time() + 30
        while _alive(pid) and time.time() < deadline:
            time.sleep(0.2)
        assert not _alive(pid)


@pytest.mark.parametrize("override, says", [
    ("method.storage=redis://x", "method.storage='redis://x': is not a storage"),
    ("method.storage=journal:/no/such/folder/s.log", "does not exist or is not writable"),
    ("method.study=a/b", "method.study='a/b'"),
    ("method.storage=postgresql://u@127.0.0.1:1/db", "cannot open the Optuna storage")])
def test_bad_storage_is_one_line_before_any_run(tmp_path, override, says):
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), "method=nsga2", override, *TABLE_RUN],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and says in last, last
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "records").exists()


def test_server_command_bad_input(tmp_path):
    for args, says in ((["stop", "--data", str(tmp_path / "none")], "no running server recorded there"),
                       (["start", "--port", "70000", "--data", str(tmp_path)], "--port=70000"),
                       (["start", "--postgres-uri", "mysql://x", "--data", str(tmp_path)], "must be a postgresql://")):
        res = subprocess.run([sys.executable, "-m", "tunebench", "server", *args], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 2 and res.stderr.strip().splitlines()[-1].startswith("error: ") and \
            says in res.stderr, res.stderr[-2000:]


@pytest.mark.parametrize("race", ['(psycopg.errors.DuplicateTable) relation "studies" already exists',
                                  'duplicate key value violates unique constraint "pg_type_typname_nsp_index"'])
def test_a_worker_that_loses_the_schema_race_opens_the_storage_the_winner_made(monkeypatch, race):
    import optuna

    from tunebench.methods.fpga_dse import optuna_storage

    calls = []

    def rdb(url):
        calls.append(url)
        if len(calls) == 1:
            raise RuntimeError(race)
        return "storage"

    monkeypatch.setattr(optuna.storages, "RDBStorage", rdb)
    monkeypatch.setattr(optuna_storage.time, "sleep", lambda s: None)
    assert optuna_storage.open_storage("postgresql://u@h/db") == "storage" and len(calls) == 2


def test_a_storage_that_keeps_failing_is_one_user_error(monkeypatch):
    import optuna

    from tunebench.errors import UserError
    from tunebench.methods.fpga_dse import optuna_storage

    def rdb(url):
        raise RuntimeError("connection refused")

    monkeypatch.setattr(optuna.storages, "RDBStorage", rdb)
    with pytest.raises(UserError, match="cannot open the Optuna storage .connection refused"):
        optuna_storage.open_storage("postgresql://u:secret@h/db")
