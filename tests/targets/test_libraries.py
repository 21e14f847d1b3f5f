"""The libraries a task's search keeps for its re-timing (tunebench.targets.tvm.libraries)."""

from types import SimpleNamespace

from tunebench.search_space import TraceConfig
from tunebench.targets.tvm.libraries import LibraryCache, candidate_key


def _cache(tmp_path, keep=2):
    removed: list[str] = []
    return LibraryCache(keep, lambda paths: removed.extend(paths)), removed


def _lib(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"so")
    return str(path)


def test_only_the_fastest_per_task_are_kept_and_the_rest_deleted_at_once(tmp_path):
    cache, removed = _cache(tmp_path, keep=2)
    cfg = [SimpleNamespace(index=i) for i in range(4)]
    paths = [_lib(tmp_path, f"{i}.so") for i in range(4)]
    cache.offer("t", cfg[0], paths[0], 3e-3)
    cache.offer("t", cfg[1], paths[1], 1e-3)
    cache.offer("t", cfg[2], paths[2], 2e-3)  # pushes config 0 out
    cache.offer("t", cfg[3], paths[3], None)  # a failed timing: deleted at once
    assert removed == [paths[0], paths[3]] and sorted(cache.paths()) == sorted(paths[1:3])
    assert cache.take("t", cfg[0]) is None and cache.take("u", cfg[1]) is None  # other tasks are apart
    assert cache.take("t", cfg[1]) == paths[1] and cache.hits == 1 and cache.take("t", cfg[1]) is None
    cache.drop("t")
    assert removed[-1] == paths[2] and cache.paths() == []


def test_a_config_timed_again_replaces_its_older_library_and_traces_have_their_own_keys(tmp_path):
    cache, removed = _cache(tmp_path, keep=3)
    old, new = _lib(tmp_path, "a.so"), _lib(tmp_path, "b.so")
    cache.offer("t", SimpleNamespace(index=5), old, 2e-3)
    cache.offer("t", SimpleNamespace(index=5), new, 1e-3)
    assert removed == [old] and cache.paths() == [new]
    trace = TraceConfig(5, '{"insts": []}')
    assert candidate_key(trace) != candidate_key(SimpleNamespace(index=5))
    assert cache.take("t", trace) is None
    zero, gone = _cache(tmp_path, keep=0)
    zero.offer("t", SimpleNamespace(index=1), old, 1e-3)
    assert gone == [old] and zero.paths() == []
