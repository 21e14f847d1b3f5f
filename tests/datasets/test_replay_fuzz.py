"""Random edits of shipped measured files (a tunebench space file and a Kernel Tuner cache): each edited
file is either refused with one :class:`UserError` or replayed with only possible values (latencies
finite and > 0, seconds finite and >= 0). Never a traceback, never a run that reports -1000 ms."""

from __future__ import annotations

import gzip
import json
import math
import random

import pytest

from tunebench.datasets.models import MeasuredModel
from tunebench.datasets.space_file import read_measured
from tunebench.errors import UserError
from tunebench.resources import data_dir
from tunebench.targets.replay import ReplaySettings, ReplayTarget

EDITS = 200
BAD_VALUES = [None, "abc", "", [], {}, True, -1000.0, -1, 0, 0.0, math.nan, math.inf, -math.inf, 1e308, [1, "x"]]


def _space_file_lines(n_rows: int = 40) -> list[dict]:
    """A shipped space file's header and its first ``n_rows`` rows (the header's count made to match)."""
    with open(data_dir("spaces/llvm_dense_1x512x1000.jsonl")) as fh:
        items = [json.loads(line) for line in fh][: n_rows + 1]
    items[0]["configs"] = n_rows
    return items


def _cache(n_rows: int = 40) -> dict:
    """The shipped MI50 cache with its first ``n_rows`` entries."""
    data = json.loads(gzip.decompress(open(data_dir("kernel_tuner/convolution_MI50.json.gz"), "rb").read()))
    data["cache"] = dict(list(data["cache"].items())[:n_rows])
    return data


def _paths(obj, prefix=()):
    """Every (path, value) inside a JSON value, containers included."""
    yield prefix, obj
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from _paths(v, (*prefix, k))


def _edit_value(obj, rng: random.Random) -> None:
    """Delete one field, or give it a value of another type, a negative, zero or non-finite number."""
    path, _ = rng.choice([p for p in _paths(obj) if p[0]])
    parent = obj
    for k in path[:-1]:
        parent = parent[k]
    if isinstance(parent, dict) and rng.random() < 0.25:
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(BAD_VALUES)


def _dump(items: list[dict]) -> str:
    return "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in items)


def _edited_space_file(rng: random.Random) -> bytes:
    items = _space_file_lines()
    kind = rng.random()
    if kind < 0.7:
        target = items[0] if rng.random() < 0.3 else items[rng.randrange(1, len(items))]
        _edit_value(target, rng)
        return _dump(items).encode()
    text = _dump(items)
    if kind < 0.85:  # a line cut short
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines))
        lines[i] = lines[i][: rng.randrange(len(lines[i]))] + "\n"
        return "".join(lines).encode()
    lines = text.splitlines(keepends=True)  # a line dropped or repeated
    i = rng.randrange(len(lines))
    return "".join(lines[:i] + ([lines[i]] * 2 if kind < 0.93 else []) + lines[i + 1:]).encode()


def _edited_cache(rng: random.Random) -> bytes:
    data = _cache()
    kind = rng.random()
    if kind < 0.8:
        entries = list(data["cache"].values())
        _edit_value(rng.choice(entries) if rng.random() < 0.8 else data, rng)
        return json.dumps(data).encode()
    text = json.dumps(data)
    return text[: rng.randrange(len(text))].encode()


def _check_possible(path: str) -> str:
    """Read and replay ``path``: 'refused' (one UserError) or 'replayed' with only possible values."""
    try:
        measured = read_measured(path)
        target = ReplayTarget(ReplaySettings())
        tasks, _ = target.load_tasks(MeasuredModel(path=path))
        target.task_info(tasks[0])
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("model.path="), str(exc)
        return "refused"
    for row in measured.rows:
        assert row.latency_s is None or (math.isfinite(row.latency_s) and row.latency_s > 0), row
        assert all(math.isfinite(v) and v >= 0 for v in (row.latency_std_s, row.compile_s, row.benchmark_s)), row
    task = tasks[0]
    for m in target.measure(task, [task.space.get(i) for i in range(task.space.size)]):
        assert not m.valid or (math.isfinite(m.latency_s) and m.latency_s > 0 and m.cost_s >= 0), m
    assert measured.n_valid > 0
    return "replayed"


@pytest.mark.parametrize("kind", ["space_file", "kt_cache"])
def test_random_edits_of_a_measured_file_are_refused_or_replayed_with_possible_values(tmp_path, kind):
    rng = random.Random(20261128)
    make, suffix = (_edited_space_file, ".jsonl") if kind == "space_file" else (_edited_cache, ".json")
    outcomes = []
    for i in range(EDITS):
        path = tmp_path / f"edit{i}{suffix}"  # a new name each time: readers cache by file
        path.write_bytes(make(rng))
        outcomes.append(_check_possible(str(path)))
    assert 0 < outcomes.count("refused") < EDITS, outcomes.count("refused")  # the edits reach both outcomes


@pytest.mark.parametrize("kind", ["space_file", "kt_cache"])
@pytest.mark.parametrize("value", [-1000.0, 0, math.nan, math.inf, "12", None])
def test_an_impossible_latency_is_refused_naming_file_line_and_field(tmp_path, kind, value):
    if kind == "space_file":
        items = _space_file_lines(4)
        items[3]["latency_s"] = value
        path, text = tmp_path / "s.jsonl", _dump(items)
        where = f"{path}:4: latency_s="
    else:
        data = _cache(4)
        key = list(data["cache"])[2]
        data["cache"][key]["time"] = value
        path, text = tmp_path / "c.json", json.dumps(data)
        where = f"cache entry '{key}': time="
    path.write_text(text)
    if kind == "space_file" and value is None:  # null: a failed config, kept as an invalid measurement
        assert read_measured(str(path)).rows[2].latency_s is None
        return
    with pytest.raises(UserError, match=f"model.path=.*{where}"):
        read_measured(str(path))


def test_a_header_that_promises_no_configuration_is_refused(tmp_path):
    items = _space_file_lines(2)[:1]
    items[0]["configs"] = 0
    path = tmp_path / "empty.jsonl"
    path.write_text(_dump(items))
    with pytest.raises(UserError, match=r"header configs=0: must be a positive integer"):
        read_measured(str(path))


def test_a_cache_whose_every_entry_failed_has_nothing_to_replay(tmp_path):
    data = _cache(3)
    for entry in data["cache"].values():
        entry["time"] = "RuntimeFailedConfig"
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="none of its 3 configurations has a measured latency.*RuntimeFailedConfig"):
        read_measured(str(path))


@pytest.mark.parametrize("edit", ["undeclared", "float_for_int", "renamed_key"])
def test_a_cache_entry_with_a_parameter_tune_params_does_not_declare_is_refused(tmp_path, edit):
    data = _cache(3)
    key, entry = next(iter(data["cache"].items()))
    if edit == "undeclared":  # a parameter dropped from the header, still in the entries
        data["tune_params_keys"].remove("use_padding")
        del data["tune_params"]["use_padding"]
    elif edit == "float_for_int":
        entry["block_size_x"] = float(entry["block_size_x"])
    else:
        data["cache"] = {"99," + key: entry, **{k: v for k, v in data["cache"].items() if k != key}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="cache entry .*(parameters outside tune_params|the key is not the values)"):
        read_measured(str(path))
