"""Running on a machine shared by several users: private per-user folders, no symlink following,
hashed reference outputs, weights-only checkpoints, and output checks that could not be performed
reported as unchecked (never as passed)."""

import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import ROOT, TINY_LAYER, measure_settings, target_settings
from tunebench.errors import UserError
from tunebench.safe_files import atomic_write_bytes, read_hashed, read_nofollow, shared_dir, user_dir
from tunebench.testing.fakes import FakeTarget

OTHER_UID = 12345  # a uid that is not ours: the "other user"
as_root = pytest.mark.skipif(os.getuid() != 0, reason="simulating another user's folder needs chown (root)")


def one_line(exc_info) -> str:
    text = str(exc_info.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------- per-user folders

def test_two_users_get_two_private_folders(tmp_path, monkeypatch):
    made = []
    for user in ("alice", "bob"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / user))
        made.append(user_dir("references"))
    assert made[0] != made[1]
    for path in made:
        st = os.stat(path)
        assert path.endswith(os.path.join("tunebench", "references"))
        assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700  # <cache home>/tunebench too


@as_root
def test_user_dir_refuses_a_folder_of_another_user(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    planted = tmp_path / "tunebench" / "locks"
    planted.mkdir(parents=True, mode=0o700)
    os.chown(planted, OTHER_UID, OTHER_UID)  # another user created it first
    with pytest.raises(UserError) as exc:
        user_dir("locks")
    assert str(planted) in one_line(exc) and f"uid {OTHER_UID}" in str(exc.value)
    os.chown(tmp_path / "tunebench", OTHER_UID, OTHER_UID)  # the level above is checked as well
    with pytest.raises(UserError, match="tunebench: folder owned by uid 12345"):
        user_dir()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_user_dir_refuses_a_folder_others_may_write(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "tunebench" / "references"
    folder.mkdir(parents=True)
    os.chmod(folder, mode)
    with pytest.raises(UserError) as exc:
        user_dir("references")
    assert str(folder) in one_line(exc) and "writable by" in str(exc.value)


def _advice(folder) -> str:
    from tunebench.safe_files import private_dir

    with pytest.raises(UserError) as exc:
        private_dir(str(folder))
    return one_line(exc)


def test_a_shared_or_foreign_folder_is_never_advised_to_be_chmod_ed(tmp_path, monkeypatch):
    """``measure.cache_dir=/tmp`` (or any folder shared on purpose, or another user's): the advice is to
    choose a private folder, never to change the shared one; a folder of one's own that others may
    write keeps the chmod advice."""
    for shared in ("/tmp", tmp_path / "sticky"):
        if shared != "/tmp":
            shared.mkdir()
            os.chmod(shared, 0o1777)
        text = _advice(shared)
        assert "choose a private folder, one only you can write" in text and "chmod" not in text, text
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: OTHER_UID)  # the folder now belongs to "another user"
    text = _advice(theirs)
    assert "not by you" in text and "choose a private folder" in text and "chmod" not in text, text
    monkeypatch.undo()
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chmod(mine, 0o777)
    assert f"run `chmod 700 {mine}` or choose a private folder" in _advice(mine)


@as_root
def test_shared_lock_folder_needs_the_sticky_bit(tmp_path):
    shared = tmp_path / "shared-locks"
    shared.mkdir()
    os.chown(shared, OTHER_UID, OTHER_UID)  # an admin's folder
    os.chmod(shared, 0o777)
    with pytest.raises(UserError) as exc:
        shared_dir(str(shared))
    assert "sticky" in one_line(exc) and str(shared) in str(exc.value)
    os.chmod(shared, 0o1777)
    assert shared_dir(str(shared)) == str(shared)
    os.chmod(shared, 0o2770)  # group-writable: shared by a group on purpose
    assert shared_dir(str(shared)) == str(shared)


@as_root
def test_machine_cache_and_reference_folder_refuse_foreign_folders(tmp_path):
    from tunebench.protocol.machine import MachineCache
    from tunebench.targets.tvm.checking import reference_cache_dir

    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(UserError, match="theirs: folder owned by uid 12345"):
        MachineCache({"host": "h"}, str(theirs))
    with pytest.raises(UserError, match="theirs: folder owned by uid 12345"):
        reference_cache_dir(str(theirs))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(UserError, match="writable by the group and everyone"):
        reference_cache_dir(str(open_dir))
    assert reference_cache_dir(None) is None


def test_torch_compile_cache_is_private_even_with_a_folder_planted_at_the_old_name(tmp_path):
    """The end-to-end worker's torch.compile writes its caches under the per-user folder, never into a
    folder everyone may write that sits at Inductor's fixed default ``$TMPDIR/torchinductor_<user>``."""
    import getpass

    from tunebench.targets.tvm.e2e.model_messages import LoadTorchInput
    from tunebench.targets.workers import Worker

    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    planted = tmp / f"torchinductor_{getpass.getuser()}"
    planted.mkdir(parents=True)
    os.chmod(planted, 0o777)  # as another user could have made it
    env = {"TMPDIR": str(tmp), "XDG_CACHE_HOME": str(cache)}
    worker = Worker("worker_handlers:inductor_cache", env=env, prepare="tunebench.targets.tvm.e2e.model_worker:prepare_torch")
    try:
        request = LoadTorchInput(module=torch.nn.Linear(4, 3), inputs=[torch.ones(2, 4)], threads=1, device="cpu",
                                 tf32=False, compile=True, row="compiled")
        ok, where = worker.call("compile", request, 300)
    finally:
        worker.close()
    assert ok, where
    private = cache / "tunebench" / "torchinductor"
    assert where == str(private) and any(private.iterdir())  # the compiled artifacts are there
    assert os.stat(private).st_mode & 0o777 == 0o700 and list(planted.iterdir()) == []


def test_temp_folders_of_dead_runs_are_removed(tmp_path, monkeypatch):
    """A run killed with SIGKILL cannot remove its build and end-to-end folders: a later run removes
    those of this user whose process is gone, and nothing else."""
    import tempfile

    from tunebench.safe_files import remove_dead_run_dirs, run_temp_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = run_temp_dir("build")  # this process's own
    assert os.path.basename(live).startswith(f"tunebench-build-{os.getpid()}-") and os.stat(live).st_mode & 0o777 == 0o700
    left = [tmp_path / f"tunebench-{kind}-{dead.pid}-x1" for kind in ("build", "e2e")]
    for folder in left:
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "lib.so").write_bytes(b"\0")
    other = tmp_path / f"tunebench-rpc-{dead.pid}-x1"  # not a run folder kind
    other.mkdir()
    target = tmp_path / "keep"
    target.mkdir()
    link = tmp_path / f"tunebench-e2e-{dead.pid}-link"  # a symlink is never followed
    link.symlink_to(target)
    theirs = tmp_path / f"tunebench-build-{dead.pid}-x2"  # another user's (simulated where chown is allowed)
    theirs.mkdir()
    if os.getuid() == 0:
        os.chown(theirs, OTHER_UID, OTHER_UID)
    else:
        left.append(theirs)
    assert sorted(remove_dead_run_dirs()) == sorted(map(str, left))
    assert os.path.isdir(live) and other.is_dir() and link.is_symlink() and target.is_dir()
    assert theirs.is_dir() == (os.getuid() == 0)


# ---------------------------------------------------------------- symlinks

def test_atomic_write_never_follows_a_symlink_at_the_temp_name(tmp_path, monkeypatch):
    import tempfile

    from tunebench.targets.tvm.checking import load_reference, save_reference

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    cache = tmp_path / "refs"
    cache.mkdir(mode=0o700)
    path = str(cache / "abc.ref")
    # the name the old writer used, and the first name mkstemp will try: both planted symlinks
    os.symlink(victim, f"{path}.{os.getpid()}.tmp")
    names = iter(["planted", "fresh1", "fresh2"])
    monkeypatch.setattr(tempfile, "_get_candidate_names", lambda: names)
    os.symlink(victim, str(cache / ".abc.ref.planted.tmp"))
    ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    save_reference(path, ref)
    assert victim.read_text() == "precious"
    assert np.array_equal(load_reference(path, (2, 3), "float32")[0], ref)
    # a symlink planted at the final name is replaced, not written through
    os.remove(path)
    os.symlink(victim, path)
    atomic_write_bytes(path, b"new")
    assert victim.read_text() == "precious" and not os.path.islink(path) and read_nofollow(path) == b"new"
    os.remove(path)
    os.symlink(victim, path)
    with pytest.raises(OSError):
        read_nofollow(path)


def test_a_symlink_at_the_lock_name_is_not_followed(tmp_path):
    from tunebench.targets.devicelock import DeviceLock, holder_of

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    locks = tmp_path / "locks"
    locks.mkdir(mode=0o700)
    os.symlink(victim, locks / "dev.lock")
    with pytest.raises(UserError) as exc:
        DeviceLock("dev", str(locks))
    assert one_line(exc).startswith(f"device lock file {locks / 'dev.lock'} is a symbolic link")
    assert holder_of(str(locks / "dev.lock")) == "an unknown process"  # not read through the link either
    assert victim.read_text() == "precious"


@as_root
def test_lock_in_a_shared_sticky_folder_is_usable_by_all(tmp_path):
    from tunebench.targets.devicelock import DeviceLock, holder_of

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, OTHER_UID, OTHER_UID)
    os.chmod(shared, 0o1777)
    lock = DeviceLock("dev", str(shared))
    with lock:
        assert holder_of(lock.path).startswith(f"pid {os.getpid()} (")
    assert os.stat(lock.path).st_mode & 0o777 == 0o666  # other users can open it too
    private = tmp_path / "mine"
    with DeviceLock("dev", str(private)) as mine:
        assert os.stat(mine.path).st_mode & 0o777 == 0o600
    os.chmod(shared, 0o777)
    with pytest.raises(UserError, match="sticky"):
        DeviceLock("dev", str(shared))


# ---------------------------------------------------------------- poisoned references

@pytest.fixture(scope="module")
def tiny_task():
    from tunebench.targets.tvm.templates import get_template
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    task = model_tasks({"name": "layers", "layers": [TINY_LAYER]}, "llvm")[0][0]
    task.space = get_template(task.kind, "llvm").make_space(task.mod)
    return task


def test_a_poisoned_reference_is_detected_and_recomputed(tmp_path, tiny_task, caplog):
    """Through the llvm target's real check: the cached reference is tampered with (as another user
    could do in a shared folder); the next check must not trust it."""
    from tunebench.targets.tvm.llvm import LLVMTarget

    cfg = target_settings("llvm", lock_dir=str(tmp_path / "locks"), builder={"n_parallel": 1, "timeout_s": 60},
                          check={"reference_cache": str(tmp_path / "refs")})
    target = LLVMTarget(cfg, measure_settings(cache_dir=str(tmp_path / "cache")))
    config = tiny_task.space.get(3)
    try:
        assert target.check(tiny_task, config)[0] is True
        (ref_file,) = (tmp_path / "refs").glob("*.ref")
        good = ref_file.read_bytes()
        meta, payload = read_hashed(str(ref_file))
        poisoned = np.frombuffer(payload, dtype=meta["dtype"]) + np.float32(10.0)
        ref_file.write_bytes(good[:len(good) - len(payload)] + poisoned.tobytes())  # same header, new bytes
        caplog.clear()
        with caplog.at_level("WARNING", logger="tunebench.targets.tvm.target"):
            ok, detail = target.check(tiny_task, config)
    finally:
        target.close()
    assert ok is True, detail  # the poisoned copy was not used: the correct kernel still passes
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "discarded" in warnings[0] and str(ref_file) in warnings[0]
    assert ref_file.read_bytes() == good  # recomputed and stored again


def test_reference_with_wrong_shape_or_no_hash_is_not_used(tmp_path):
    from tunebench.targets.tvm.checking import load_reference, save_reference

    path = str(tmp_path / "r.ref")
    save_reference(path, np.ones((2, 3), np.float32))
    assert load_reference(path, (2, 3), "float32")[0] is not None
    ref, why = load_reference(path, (3, 2), "float32")
    assert ref is None and "dtype/shape" in why and "discarded" in why
    np.save(tmp_path / "plain.npy", np.ones((2, 3), np.float32))  # a planted file without a hash header
    os.replace(tmp_path / "plain.npy", path)
    ref, why = load_reference(path, (2, 3), "float32")
    assert ref is None and "discarded" in why
    assert load_reference(str(tmp_path / "none.ref"), (2, 3), "float32") == (None, None)


# ---------------------------------------------------------------- malicious checkpoints

class Payload:
    """Unpickling this creates the folder ``marker``: what a crafted .pt file could do to its reader."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def evil_file(path, marker, fmt: str) -> str:
    """A crafted file: the right format tag and tensors, plus an object that runs code when loaded."""
    torch.save({"format": fmt, "meta": json.dumps({}), "tensors": {"stats": torch.zeros(1)}, "x": Payload(marker)},
               str(path))
    return str(path)


def test_the_crafted_file_would_run_code_without_weights_only(tmp_path):
    """The payload used below is live: a plain ``torch.load`` creates the marker (so the tests of the
    loaders would catch a loader that executes it)."""
    marker = tmp_path / "pwned"
    torch.load(evil_file(tmp_path / "evil.pt", marker, "x"), weights_only=False)
    assert marker.exists()


def test_malicious_dataset_is_refused_by_the_cli(tmp_path):
    from tunebench.methods.tensor_programs.gat.dataset import DATASET_FORMAT

    marker = tmp_path / "pwned"
    evil = evil_file(tmp_path / "evil.pt", marker, DATASET_FORMAT)
    with open(tmp_path / "raw.pt", "wb") as fh:  # a plain pickle, not even a torch zip file
        pickle.dump(Payload(marker), fh)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    for dataset in (evil, str(tmp_path / "raw.pt")):
        proc = subprocess.run([sys.executable, "-m", "tunebench", "gat", "train", "--dataset", dataset, "--out",
                               str(tmp_path / "m.pt"), "--workdir", str(tmp_path)], capture_output=True, text=True,
                              cwd=str(tmp_path), env=env, timeout=300)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert len(lines) == 1 and lines[0].startswith(f"error: --dataset {dataset}: refused"), lines
    assert not marker.exists() and not (tmp_path / "m.pt").exists()


def test_malicious_pretrained_checkpoint_is_refused(tmp_path):
    """``method.pretrained`` is loaded by ``GAT._make_cost_model`` (called here on a stand-in for the
    method object: building the real one imports MetaSchedule's intrinsics, ~40 s on 2 cores) and by
    MetaSchedule's ``CostModel.load`` on the method's Python cost model."""
    from types import SimpleNamespace

    from tunebench.methods.tensor_programs.gat.method import GAT, make_py_cost_model
    from tunebench.methods.tensor_programs.gat.model import CHECKPOINT_FORMAT, GATCostModel

    marker = tmp_path / "pwned"
    evil = evil_file(tmp_path / "evil.pt", marker, CHECKPOINT_FORMAT)
    with pytest.raises(UserError) as exc:
        GAT._make_cost_model(SimpleNamespace(pretrained=evil, train_args={}, model_args={}))
    assert one_line(exc).startswith(f"GAT checkpoint {evil}: refused") and "GLOBAL" in str(exc.value)
    with pytest.raises((UserError, RuntimeError), match="refused"):  # through TVM's FFI: a RuntimeError
        make_py_cost_model(GATCostModel(epochs=1)).load(evil)
    assert not marker.exists()


def test_checkpoint_keys_and_shapes_are_checked(tmp_path):
    from tunebench.methods.tensor_programs.gat.model import (
        CHECKPOINT_FORMAT,
        GATCostModel,
        load_tensor_file,
        save_tensor_file,
    )

    path = str(tmp_path / "m.pt")
    GATCostModel(variant="mhsa", epochs=1).save(path)
    meta, tensors = load_tensor_file(path, "GAT checkpoint", CHECKPOINT_FORMAT)
    assert GATCostModel.load(path).net_args["variant"] == "mhsa"
    cases = [({**tensors, "stat_mean": torch.zeros(3)}, meta, "stat_mean must have shape"),
             ({k: v for k, v in tensors.items() if k != "net.fc.weight"}, meta, "missing ['fc.weight']"),
             ({**tensors, "net.fc.weight": torch.zeros(2, 2)}, meta, "net.fc.weight has shape (2, 2)"),
             (tensors, {**meta, "net_args": {**meta["net_args"], "variant": "evil"}}, "variant 'evil'"),
             (tensors, {k: v for k, v in meta.items() if k != "y_std"}, "y_mean / y_std missing")]
    for t, m, problem in cases:
        save_tensor_file(path, CHECKPOINT_FORMAT, m, t)
        with pytest.raises(UserError) as exc:
            GATCostModel.load(path)
        assert one_line(exc).startswith(f"GAT checkpoint {path}: ") and problem in str(exc.value), str(exc.value)


def test_dataset_round_trip_and_shape_checks(tmp_path):
    from tunebench.methods.tensor_programs.gat.dataset import load_dataset, save_dataset
    from tunebench.methods.tensor_programs.gat.features import NODE_DIM, STAT_DIM

    rng = np.random.default_rng(0)
    graphs = [(rng.normal(size=(n, NODE_DIM)).astype(np.float32), rng.integers(0, n, size=(2, 2 * n)))
              for n in (4, 7, 2)]
    ds = {"stats": rng.normal(size=(3, STAT_DIM)).astype(np.float32), "graphs": graphs,
          "latency_s": np.array([1e-3, 2e-3, 3e-3]), "task_id": ["a", "a", "b"], "model": ["m"] * 3,
          "summary": {"samples": 3}}
    path = str(tmp_path / "set.pt")
    save_dataset(ds, path)
    back = load_dataset(path)
    assert np.array_equal(back["stats"], ds["stats"]) and np.array_equal(back["latency_s"], ds["latency_s"])
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(back["graphs"], graphs))
    assert (back["task_id"], back["model"], back["summary"]) == (ds["task_id"], ds["model"], ds["summary"])
    bad = dict(ds, graphs=[graphs[0], (graphs[1][0], graphs[1][1] + 100), graphs[2]])  # edges outside the graph
    save_dataset(bad, path)
    with pytest.raises(UserError, match="edge_index refers to nodes outside its graph"):
        load_dataset(path)
    save_dataset(dict(ds, task_id=["a"]), path)
    with pytest.raises(UserError, match=r"--dataset .*set.pt: task_id must be a list of 3 strings"):
        load_dataset(path)


# ---------------------------------------------------------------- checks that could not be performed

def handle_check_not_performed(name, payload):
    """Worker handler for the tests: the real one, except that every output check fails with an I/O
    error (as an unreadable reference folder would make it)."""
    from tunebench.targets.tvm.worker import handle

    if name == "check":
        raise OSError("reference folder unreadable (injected)")
    return handle(name, payload)


class _Target(FakeTarget):
    """A target whose checks give the scripted ``ok`` values (True, False, None = not performed)."""

    def __init__(self, oks):
        super().__init__()
        self.oks = list(oks)

    def check(self, task, config):
        ok = self.oks.pop(0)
        return ok, "scripted" if ok is not None else "check not performed: scripted"


def test_first_checked_reports_unchecked_not_ok():
    from types import SimpleNamespace

    from tunebench.harness.measurement import _first_checked, check_metrics

    task = SimpleNamespace(name="t")
    cands = [SimpleNamespace(task_id="t", trial=i, config=SimpleNamespace(index=i)) for i in range(3)]
    best, checks = _first_checked(cands, task, _Target([False, None, True]), True)
    assert best is cands[1] and [c["status"] for c in checks] == ["wrong", "unchecked"]
    assert checks[-1]["ok"] is False and "scripted" in checks[-1]["detail"]
    assert check_metrics(best, checks, True) == {"check_ok": 0.0, "unchecked": 1.0}
    best, checks = _first_checked(cands, task, _Target([True]), True)
    assert check_metrics(best, checks, True) == {"check_ok": 1.0}
    assert check_metrics(None, [], True) == {"check_ok": 0.0} and check_metrics(cands[0], [], False)["check_ok"] == 1


def test_a_check_that_could_not_run_is_reported_unchecked(tiny_cfg, tmp_path, caplog):
    """A real run whose output checks fail in the worker: the task's result is marked unchecked in
    checks.jsonl, tasks.json, the metrics, a run tag, a warning line and the leaderboard."""
    from mlflow.tracking import MlflowClient

    from tunebench.__main__ import build_parser
    from tunebench.harness.experiment import run_experiment
    from tunebench.report import cli as leaderboard

    tiny_cfg.target.handler = "test_security:handle_check_not_performed"
    tiny_cfg.e2e.enabled = False
    with caplog.at_level("WARNING"):
        run_id = run_experiment(tiny_cfg)
    run_dir = os.path.join(tiny_cfg.workdir, "records", run_id)
    checks = [json.loads(line) for line in open(os.path.join(run_dir, "checks.jsonl"))]
    assert len(checks) == 1 and checks[0]["status"] == "unchecked" and checks[0]["ok"] is False
    assert "reference folder unreadable (injected)" in checks[0]["detail"]
    summary = json.load(open(os.path.join(run_dir, "tasks.json")))[0]
    assert summary["check"]["status"] == "unchecked" and summary["best_latency_ms"] is not None
    run = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db").get_run(run_id)
    tid = summary["id"]
    assert run.data.metrics[f"{tid}.check_ok"] == 0.0 and run.data.metrics[f"{tid}.unchecked"] == 1.0
    assert run.data.tags["tunebench.unchecked_tasks"] == summary["name"]
    assert any("could not be checked" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    args = build_parser().parse_args(["leaderboard", "--tracking-uri", f"sqlite:///{tiny_cfg.workdir}/mlflow.db",
                                      "--out", str(tmp_path / "lb"), "--no-plots"])
    markdown = leaderboard.run_leaderboard(args)
    row = next(line for line in markdown.splitlines() if line.startswith("| random"))
    assert "(unchecked)" in row
    csv = (tmp_path / "lb" / "leaderboard.csv").read_text()
    assert f"seed 0: {summary['name']}" in csv


def test_leaderboard_marks_only_unchecked_rows():
    from tunebench.report import cells as lbs

    assert lbs.tasks_cell("1.2345", {"n_unchecked_runs": 1, "n_noisy_tasks_max": 0}) == "1.2345 (unchecked)"
    assert lbs.tasks_cell("1.2345", {"n_unchecked_runs": 1, "n_noisy_tasks_max": 2}) == "1.2345 (noisy) (unchecked)"
    assert lbs.tasks_cell("1.2345", {"n_unchecked_runs": 0, "n_noisy_tasks_max": 0}) == "1.2345"
    assert lbs.tasks_cell("", {"n_unchecked_runs": 1}) == ""
