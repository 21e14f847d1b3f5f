"""target.rpc on loopback: a TVM RPC tracker with two RPC servers on 127.0.0.1 measuring runs.

Every tracker and server a test starts it stops, by pid (:class:`LocalFleet`). Builds happen in the
run; timing, output checks, calibration and the whole model happen on the servers.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from conftest import ROOT, TINY_LAYER_ARG, free_port, gpu
from tunebench.targets.tvm import remote
from tunebench.targets.tvm.rpc_fleet import LocalFleet

pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (a dependency: make install)")

QUICK = ["progress=false", TINY_LAYER_ARG, "target.runner.repeat=3", "target.runner.min_repeat_ms=5",
         "e2e.torch_compile=false", "e2e.rounds=2", "e2e.n_runs=4", "measure.retime.rounds=2"]


@pytest.fixture
def fleet(tmp_path):
    """A tracker and two servers of key ``cpu`` for one test (tests that kill servers)."""
    with LocalFleet(2, key="cpu", log_dir=str(tmp_path)) as f:
        procs = list(f.procs)
        yield f
    assert all(p.poll() is not None for p in procs)


@pytest.fixture(scope="module")
def shared_fleet(tmp_path_factory):
    """A tracker and two servers shared by the tests that leave them running."""
    with LocalFleet(2, key="cpu", log_dir=str(tmp_path_factory.mktemp("fleet"))) as f:
        yield f


def _rpc(fleet) -> list[str]:
    return [f"target.rpc.tracker={fleet.tracker}", "target.rpc.key=cpu"]


def _run(args, cwd, **kw):
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "run.py"), f"workdir={cwd}", *args], cwd=cwd,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)


def _records(workdir) -> list[dict]:
    out = []
    for root, _, files in os.walk(os.path.join(workdir, "records")):
        if "records.jsonl" in files:
            with open(os.path.join(root, "records.jsonl")) as fh:
                out += [json.loads(line) for line in fh]
    return out


def _only_run(workdir):
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert len(runs) == 1
    return runs[0]


def test_a_run_measures_on_both_devices_and_runs_the_model_there(shared_fleet, tmp_path):
    fleet = shared_fleet
    proc = _run([*QUICK, *_rpc(fleet), "experiment=test", "budget.trials_per_task=8", "target.batch_size=2"], tmp_path)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    recs = _records(tmp_path)
    assert len(recs) == 8 and all(r["valid"] for r in recs), out[-2000:]
    assert {r["device"] for r in recs} == set(fleet.servers)  # batches took turns on the two servers
    assert all(r["noise"].get("foreign_cpu") is None for r in recs)  # a remote CPU's load is not seen here
    run = _only_run(tmp_path)
    assert run.data.tags["device"].endswith("via RPC (cpu)")
    m = run.data.metrics
    assert m["e2e_latency_ms"] > 0 and m["tvm_default_latency_ms"] > m["e2e_latency_ms"]
    assert "torch_latency_ms" not in m and "PyTorch baselines are left out" in out
    checks = [json.loads(x) for x in open(next(os.path.join(r, "checks.jsonl") for r, _, f
                                               in os.walk(tmp_path / "records") if "checks.jsonl" in f))]
    assert checks and all(c["ok"] for c in checks)


def _wait_busy(fleet, proc, timeout_s=300.0) -> str:
    """A server that holds a session of the run now (polled until one does)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before any server was busy"
        busy = fleet.busy()
        if busy:
            return busy[0]
        time.sleep(0.05)
    raise AssertionError("no server became busy")


@pytest.mark.slow
def test_lost_devices_cost_their_measurement_then_stop_the_run_resumably(fleet, tmp_path):
    """One server killed mid-batch: its measurement is invalid, naming it, and the run goes on on the
    other. The other killed too: the run stops FAILED (exit 1, one line) after target.rpc.wait_s.
    A server back: resume=<run id> finishes the run on it."""
    args = [*QUICK, *_rpc(fleet), "experiment=test", "budget.trials_per_task=16", "target.batch_size=4",
            "target.runner.cooldown_s=1.0", "target.rpc.wait_s=5", "measure.peak=false", "e2e.enabled=false"]
    proc = _run(args, tmp_path)
    while not _records(tmp_path):  # the first batch is in: the run is past its calibration
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
    lost = _wait_busy(fleet, proc)
    fleet.kill(lost)  # mid-batch: the session dies under a measurement
    left = [s for s in fleet.servers if s != lost][0]
    n_before = len(_records(tmp_path))
    while len(_records(tmp_path)) < n_before + 8:  # two more batches
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        time.sleep(0.1)
    fleet.kill(left)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-3000:]
    last = out.strip().splitlines()[-1]
    run = _only_run(tmp_path)
    assert last.startswith("error: target.rpc: no 'cpu' device free on tracker") and "none registered" in last
    assert f"resume={run.info.run_id}" in last and run.info.status == "FAILED"
    recs = _records(tmp_path)
    invalid = [r for r in recs if not r["valid"]]
    assert len(invalid) == 1 and f"remote device {lost} (key cpu) lost" in invalid[0]["error"], invalid
    after = recs[recs.index(invalid[0]) + 1:]
    assert len(after) >= 4 and all(r["device"] == left and r["valid"] for r in after)

    back = fleet.add_servers(1)[0]
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), f"workdir={tmp_path}",
                          f"resume={run.info.run_id}"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    recs = _records(tmp_path)
    assert sorted(r["trial"] for r in recs if r["task_id"] == recs[0]["task_id"]) == list(range(16))
    assert {r["device"] for r in recs[len(recs) - 4:]} == {back}
    assert _only_run(tmp_path).info.status == "FINISHED"


@pytest.mark.parametrize("override,says", [
    (["target.rpc.tracker=127.0.0.1:{dead}", "target.rpc.key=cpu"], "no TVM RPC tracker answers there"),
    (["target.rpc.tracker={tracker}", "target.rpc.key=gpu"], "target.rpc.key='gpu': no RPC server registered"),
    (["target.rpc.tracker={tracker}", "target.rpc.key=cpu", "target.num_cores={too_many}"],
     "runs at most {threads} TVM thread(s), the run needs {too_many}: start it with TVM_NUM_THREADS={too_many}"),
])
def test_bad_rpc_settings_are_one_line_before_any_run(shared_fleet, tmp_path, override, says):
    names = {"dead": free_port(), "tracker": shared_fleet.tracker, "threads": shared_fleet.threads,
             "too_many": shared_fleet.threads + 1}
    args, says = [a.format(**names) for a in override], says.format(**names)
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), f"workdir={tmp_path}", *QUICK, *args],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and says in last, last
    assert not (tmp_path / "records").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("rpc,says", [
    ({"tracker": "127.0.0.1:9190"}, "target.rpc.key=None: must name the device key"),
    ({"key": "cpu"}, "target.rpc.tracker=None: must be host:port"),
    ({"tracker": "localhost", "key": "cpu"}, "target.rpc.tracker='localhost': must be host:port"),
    ({"tracker": "h:1", "key": "cpu", "wait_s": 0}, "target.rpc.wait_s=0.0: must be a positive number"),
])
def test_bad_rpc_settings_fail_the_static_checks(rpc, says):
    from conftest import target_settings
    from tunebench.errors import UserError

    with pytest.raises(UserError, match=r"^" + __import__("re").escape(says)):
        target_settings("llvm", rpc=rpc)


def test_a_request_waits_at_most_wait_s_and_says_who_holds_the_devices(shared_fleet):
    fleet = shared_fleet
    held = [remote.request(fleet.tracker, "cpu", 1, 30.0)[:2] for _ in fleet.servers]
    assert sorted(server for _, server in held) == sorted(fleet.servers)
    t0 = time.monotonic()
    with pytest.raises(remote.NoDevice, match=r"no 'cpu' device free .* within 1 s \(2 registered, all held"):
        remote.request(fleet.tracker, "cpu", 1, 1.0)
    assert time.monotonic() - t0 < 10
    del held  # sessions end; the servers come back
    session, server, _ = remote.request(fleet.tracker, "cpu", 1, 60.0)
    assert server in fleet.servers


def test_parse_address_and_servers_of():
    assert remote.parse_address("10.0.0.2:9190") == ("10.0.0.2", 9190)
    for bad in ("9190", "host:", ":9190", "host:port", "host:70000"):
        with pytest.raises(ValueError):
            remote.parse_address(bad)
    info = {"server_info": [{"key": "server:cpu", "addr": ["127.0.0.1", 2]},
                            {"key": "server:gpu", "addr": ["127.0.0.1", 3]}, {"key": "x", "addr": ["h", 4]}]}
    assert remote.servers_of(info, "cpu") == ["127.0.0.1:2"] and remote.servers_of(info, "tpu") == []


@pytest.mark.gpu
@gpu
def test_cuda_run_through_rpc(tmp_path):
    """target=cuda timing on a GPU behind a loopback RPC server: limits from the remote device, outputs checked."""
    with LocalFleet(1, key="gpu", log_dir=str(tmp_path)) as fleet:
        proc = _run([*QUICK, "target=cuda", f"target.rpc.tracker={fleet.tracker}", "target.rpc.key=gpu",
                     "experiment=test", "budget.trials_per_task=8"], tmp_path)
        out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    recs = _records(tmp_path)
    assert len(recs) == 8 and {r["device"] for r in recs} == set(fleet.servers)
    assert _only_run(tmp_path).data.metrics["e2e_latency_ms"] > 0
