"""hydra/launcher=tunebench_ray on a 2-node Ray cluster on this machine (loopback only).

Each node is a ``ray start --block`` process started by the fixture and stopped by it, by pid (its
process group is killed if it does not stop). Skipped where Ray is not installed.
"""
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (the scale extra: pip install -e '.[scale]')")

from mlflow.tracking import MlflowClient  # noqa: E402
from test_sweeps import _intervals  # noqa: E402

from conftest import ROOT, TINY_LAYER_ARG, free_port  # noqa: E402
from tunebench.errors import UserError  # noqa: E402
from tunebench.harness.launch.ray import RaySettings  # noqa: E402
from tunebench.record_file import read_records  # noqa: E402

RAY = os.path.join(os.path.dirname(sys.executable), "ray")
NODE_ARGS = ["--block", "--num-cpus=1", "--object-store-memory=80000000", "--node-ip-address=127.0.0.1",
             "--disable-usage-stats"]


def _netns_usable() -> bool:
    try:
        res = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and shutil.which("nsenter") is not None and shutil.which("ip") is not None


# Ray 2.60's GCS and raylets listen on every interface whatever --node-ip-address says: the cluster, its
# checks and the sweep's driver run in a network namespace of their own whose only interface is the
# loopback (and with token authentication on, as Ray expects for clusters started by `ray start`).
needs_netns = pytest.mark.skipif(not _netns_usable(), reason="needs a private network namespace (unshare -n, "
                                "nsenter, ip; root) so that the Ray cluster is reachable on loopback only")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


class Cluster:
    """A head and a worker node (1 CPU each) in a private network namespace."""

    def __init__(self, folder: str):
        self.folder = folder
        self.temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths have a limit
        token = os.path.join(self.temp, "token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as fh:
            fh.write(secrets.token_hex(32))
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": token}
        self.holder = subprocess.Popen(["unshare", "-n", "sleep", "infinity"], start_new_session=True)
        self.enter = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net"]
        # until `unshare` has made its namespace, /proc/<pid>/ns/net is still this one's
        deadline = time.time() + 30
        while os.readlink(f"/proc/{self.holder.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            assert time.time() < deadline, "unshare -n made no network namespace"
            time.sleep(0.01)
        self.nodes: list[subprocess.Popen] = []
        self.port = 6379
        self.address = f"127.0.0.1:{self.port}"

    def popen(self, cmd: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen([*self.enter, *cmd], env=self.env, **kw)

    def _node(self, args: list[str], name: str) -> subprocess.Popen:
        log = open(os.path.join(self.folder, f"{name}.log"), "w")
        proc = self.popen([RAY, "start", *args, *NODE_ARGS], stdout=log, stderr=subprocess.STDOUT,
                          start_new_session=True)
        self.nodes.append(proc)
        return proc

    def _alive_nodes(self) -> int:
        """Alive nodes, from a client in the namespace; 0 while the head does not answer yet (a client
        of a head that is still starting can wait long: it is given 60 s, then asked again)."""
        code = (f"import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', {self.port}), 2).close()\n"
                "except OSError:\n    print(0); sys.exit()\n"
                f"import ray; ray.init(address={self.address!r}, log_to_driver=False)\n"
                "print(sum(n['Alive'] for n in ray.nodes()))")
        proc = self.popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return 0
        return int(out.strip().splitlines()[-1]) if proc.returncode == 0 and out.strip() else 0

    def _head(self) -> bool:
        """Start the head; True once a client sees it (within 150 s)."""
        self._node(["--head", f"--port={self.port}", "--include-dashboard=false", f"--temp-dir={self.temp}"],
                   "head")
        deadline = time.time() + 150
        while self._alive_nodes() < 1:
            if time.time() > deadline:
                return False
            time.sleep(1)
        return True

    def start(self) -> "Cluster":
        subprocess.run([*self.enter, "ip", "link", "set", "lo", "up"], check=True, timeout=30)
        assert self._head(), "the Ray head did not start; see head.log and ray_logs/"
        deadline = time.time() + 150
        self.worker = self._node([f"--address={self.address}"], "worker")
        while self._alive_nodes() < 2:
            assert time.time() < deadline, "the second Ray node did not join"
            time.sleep(1)
        return self

    def stop(self) -> None:
        for proc in reversed(self.nodes):
            _stop(proc)
        _stop(self.holder)
        logs = os.path.join(self.temp, "session_latest", "logs")
        if os.path.isdir(logs):  # kept with the test's files: why a node did not start
            shutil.copytree(logs, os.path.join(self.folder, "ray_logs"), dirs_exist_ok=True, symlinks=False,
                            ignore_dangling_symlinks=True)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path))
    try:
        yield c.start()
    finally:
        c.stop()


def _sweep(cluster: Cluster, workdir, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, os.path.join(ROOT, "run.py"), "-m", "hydra/launcher=tunebench_ray",
           f"hydra.launcher.address={cluster.address}", "method=random", "e2e.enabled=false", "progress=false",
           TINY_LAYER_ARG, "target.num_cores=1", "target.batch_size=2", "target.builder.n_parallel=1",
           "target.runner.repeat=3", "target.runner.min_repeat_ms=5", *args]
    return cluster.popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _runs(workdir):
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


@needs_netns
def test_four_job_sweep_on_two_nodes(cluster, tmp_path):
    proc = _sweep(cluster, tmp_path, "seed=0,1,2,3", "budget.trials_per_task=4")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    runs = _runs(tmp_path)
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1", "2", "3"]
    assert all(r.info.status == "FINISHED" for r in runs)
    nodes = {line.rsplit("on node ", 1)[1].split()[0] for line in out.splitlines() if "completed on node" in line}
    assert len(nodes) == 2, out[-4000:]  # both nodes ran jobs
    # every job left its run id where the driver finds it, and its records under the driver's workdir
    job_dirs = [os.path.join(root) for root, _, files in os.walk(tmp_path / "multirun") if "run.json" in files]
    assert sorted(json.load(open(os.path.join(d, "run.json")))["run_id"] for d in job_dirs) == \
        sorted(r.info.run_id for r in runs)
    per_job = [_intervals(read_records(r.data.tags["tunebench.record_file"])) for r in runs]
    assert all(len(j) == 4 for j in per_job)
    assert all(str(tmp_path) in r.data.tags["tunebench.record_file"] for r in runs)
    spans = sorted(s for j in per_job for s in j)  # measurements of jobs on both nodes never overlap
    assert all(e1 <= s2 + 0.01 for (_, e1), (s2, _) in zip(spans, spans[1:]))


@needs_netns
@pytest.mark.slow
def test_a_job_lost_with_its_node_is_resumed_elsewhere(cluster, tmp_path):
    # two jobs, one per node (1 CPU each); each takes >= 16 s (cooldown after each measurement)
    proc = _sweep(cluster, tmp_path, "seed=0,1", "budget.trials_per_task=16", "target.runner.cooldown_s=1")
    deadline = time.time() + 300
    while True:  # both runs started and measuring
        started = [os.path.join(r, "run.json") for r, _, f in os.walk(tmp_path / "multirun") if "run.json" in f]
        recs = [json.load(open(p))["records"] for p in started]
        if len(recs) == 2 and all(os.path.exists(r) and len(read_records(r)) >= 2 for r in recs):
            break
        assert time.time() < deadline and proc.poll() is None, proc.communicate()[0][-4000:]
        time.sleep(0.5)
    os.killpg(cluster.worker.pid, signal.SIGKILL)  # the second node dies with its job
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-4000:]
    assert "lost with its worker or node" in out and "resuming run" in out, out[-4000:]
    runs = _runs(tmp_path)
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    for r in runs:  # the resumed run measured what was left, nothing twice
        trials = [rec["trial"] for rec in read_records(r.data.tags["tunebench.record_file"])]
        assert sorted(trials) == list(range(16))


@pytest.mark.parametrize("address, says", [("no-port", "is not a Ray address"), (None, "nothing answers there")])
def test_bad_launcher_settings_are_one_line_errors(tmp_path, address, says):
    if address is None:  # a port nothing listens on
        address = f"127.0.0.1:{free_port()}"
    res = subprocess.run([sys.executable, os.path.join(ROOT, "run.py"), "-m", "hydra/launcher=tunebench_ray",
                          f"hydra.launcher.address={address}", "method=random", "seed=0,1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: hydra.launcher.address={address!r}") and says in last, res.stderr[-2000:]
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "records").exists()


def test_launcher_settings_are_checked():
    for bad, msg in (({"num_cpus_per_job": -1}, "num_cpus_per_job=-1"), ({"max_resumes": 1.5}, "max_resumes=1.5"),
                     ({"nodes": 2}, "hydra.launcher.nodes is unknown")):
        with pytest.raises(UserError, match=msg):
            RaySettings.load(bad)
    assert RaySettings.load({"address": "ray://head:10001", "num_cpus": None}).address == "ray://head:10001"
