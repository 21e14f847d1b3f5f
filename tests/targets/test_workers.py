import time

from tunebench.targets.workers import Worker, WorkerPool

H = "worker_handlers:handle"


def test_worker_survives_error_crash_and_timeout():
    w = Worker(H)
    try:
        assert w.call("echo", {"a": 1}, 10) == (True, {"a": 1})
        ok, err = w.call("raise", 3, 10)
        assert not ok and "ValueError: bad config 3" in err
        pid = w.call("pid", None, 10)[1]
        ok, err = w.call("crash", None, 10)
        assert not ok and "crashed" in err and "7" in err
        ok, err = w.call("sleep", 30, 1.0)
        assert not ok and "timeout" in err
        ok, pid2 = w.call("pid", None, 10)  # a fresh worker took over
        assert ok and pid2 != pid
    finally:
        w.close()


def test_pool_runs_in_parallel_and_keeps_order():
    """Two workers take the requests at the same time: each request's span overlaps one run by the other
    process (shown from the recorded spans, not from a wall-time bound, so load cannot fail it)."""
    pool = WorkerPool(H, 2)
    try:
        pool.start()
        out = pool.map("span", [0.5, 0.5, 0.5, 0.5], 10)
        assert all(r[0] for r in out)
        spans = [r[1] for r in out]
        assert len({pid for pid, _, _ in spans}) == 2
        for pid, t0, t1 in spans:
            assert any(p != pid and s < t1 and t0 < e for p, s, e in spans)
        out = pool.map("sleep", [0.2, 0.1], 10)
        assert [r[1] for r in out] == [0.2, 0.1]
        out = pool.map("echo", list(range(6)), 10)
        assert [r[1] for r in out] == list(range(6))
    finally:
        pool.close()


def test_completed_yields_each_result_as_it_finishes_with_its_position():
    """``completed`` hands out a fast request's result before a slow one's, each with its position; errors,
    crashes and timeouts come out as errors, like ``map``'s."""
    pool = WorkerPool(H, 2)
    try:
        pool.start()
        got = list(pool.completed("sleep", [1.5, 0.1, 0.2], 10))
        assert [i for i, _ in got] == [1, 2, 0]  # the 0.1 s and 0.2 s requests end before the 1.5 s one
        assert all(ok and res == [1.5, 0.1, 0.2][i] for i, (ok, res, _) in got)
        got = dict(pool.completed("raise", [1, 2], 10))
        assert sorted(got) == [0, 1] and not got[0][0] and "bad config 1" in got[0][1]
        assert list(pool.completed("echo", [], 10)) == []
    finally:
        pool.close()


def _gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


PARENT = """
import sys, time
sys.path.insert(0, {tests!r})
from tunebench.targets.workers import WorkerPool
pool = WorkerPool("worker_handlers:handle", 2)
pool.start()
print(" ".join(map(str, pool.pids())), flush=True)
pool.map("sleep", [30, 30], 60)
"""


def test_workers_exit_quietly_when_their_parent_is_killed(tmp_path):
    """``kill -9`` of the harness: its workers, busy with a request, exit within a second and print nothing
    (no BrokenPipeError when their answer finds no reader)."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import TESTS

    err = open(tmp_path / "stderr", "w")
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(tests=TESTS)], stdout=subprocess.PIPE, stderr=err,
                              text=True)
    pids = [int(p) for p in parent.stdout.readline().split()]
    time.sleep(1.0)  # both workers are sleeping in their request
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 3
    while time.time() < deadline and not all(_gone(p) for p in pids):
        time.sleep(0.1)
    assert len(pids) == 2 and all(_gone(p) for p in pids), pids
    time.sleep(0.5)
    err.close()
    assert (tmp_path / "stderr").read_text() == ""


def test_closing_a_pool_kills_busy_workers_ignores_sigint_and_starts_no_new_worker():
    import os
    import signal
    import threading

    pool = WorkerPool(H, 2)
    pool.start()
    pids = pool.pids()
    os.kill(pids[0], signal.SIGINT)  # a terminal's Ctrl-C reaches the workers too: they leave stopping to the harness
    assert pool.map("pid", [None], 10)[0][:2] == (True, pids[0])
    out = []
    busy = threading.Thread(target=lambda: out.append(pool.map("sleep", [30, 30, 30, 30], 60)))
    busy.start()
    time.sleep(1.0)
    t0 = time.perf_counter()
    pool.close()
    busy.join(10)
    assert time.perf_counter() - t0 < 3 and not busy.is_alive()
    assert all(_gone(p) for p in pids) and pool.pids() == []  # none started for the requests left over
    assert not any(ok for ok, _, _ in out[0])
