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
    pool = WorkerPool(H, 2)
    try:
        pool.start()
        t0 = time.perf_counter()
        out = pool.map("sleep", [0.5, 0.5, 0.5, 0.5], 10)
        wall = time.perf_counter() - t0
        assert [r[1] for r in out] == [0.5] * 4 and all(r[0] for r in out)
        assert wall < 1.9  # two workers: ~1 s, not ~2 s
        out = pool.map("echo", list(range(6)), 10)
        assert [r[1] for r in out] == list(range(6))
    finally:
        pool.close()
