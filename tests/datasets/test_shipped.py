"""Shipped measured spaces: every file listed in a data folder's SHA256SUMS is as shipped, an edited one
is refused in one line when read, and the named sets name files that exist."""

import gzip
import hashlib
import json
import os
import shutil

import pytest

from tunebench.datasets import shipped
from tunebench.datasets.space_file import read_measured
from tunebench.errors import UserError
from tunebench.resources import data_dir


@pytest.mark.parametrize("folder", ["kernel_tuner", "spaces"])
def test_every_listed_file_matches_its_recorded_sha256(folder):
    manifest = data_dir(folder, shipped.MANIFEST)
    listed = dict(line.split("  ")[::-1] for line in open(manifest).read().splitlines())
    in_sets = {os.path.basename(p) for p in shipped.space_set("all") if os.path.dirname(p) == data_dir(folder)}
    assert set(listed) == in_sets
    for name, digest in listed.items():
        assert shipped.expected_sha256(data_dir(folder, name)) == digest
        with open(data_dir(folder, name), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == digest, name


def test_sets_name_the_shipped_files():
    cpu, gpu = shipped.space_set("cpu"), shipped.space_set("gpu")
    assert len(cpu) == 6 and len(gpu) == 9
    assert shipped.space_set("all") == cpu + gpu
    with pytest.raises(UserError, match=r"set 'gpus' is unknown; valid: cpu, gpu, all"):
        shipped.space_set("gpus")


def test_a_measured_space_joins_the_set_of_the_target_it_was_measured_on(tmp_path, monkeypatch):
    """``data/spaces/llvm_*`` files are the cpu set; ``cuda_*`` ones join the gpu set after the caches."""
    folder = tmp_path / "data" / "spaces"
    folder.mkdir(parents=True)
    for name in ("llvm_dense_1x8x4.jsonl", "cuda_conv2d_1x64.jsonl.gz", "cuda_conv2d_1x128.jsonl", "notes.txt"):
        (folder / name).write_text("")
    for rel in shipped.GPU_SPACES:
        (tmp_path / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / rel).write_text("")
    monkeypatch.setattr(shipped, "data_dir", lambda *p: os.path.join(str(tmp_path / "data"), *p))
    names = {k: [os.path.basename(p) for p in shipped.space_set(k)] for k in ("cpu", "gpu", "all")}
    assert names["cpu"] == ["llvm_dense_1x8x4.jsonl"]
    assert names["gpu"][-2:] == ["cuda_conv2d_1x128.jsonl", "cuda_conv2d_1x64.jsonl.gz"] and len(names["gpu"]) == 11
    assert names["all"] == names["cpu"] + names["gpu"]


def test_the_benchmark_hub_caches_read_as_documented():
    """Counts the README states: configurations, failed ones (error names, never numbers), the optimum."""
    conv = read_measured(data_dir("kernel_tuner", "convolution_milo_A100.json.gz"))
    assert (conv.space.size, conv.n_valid, len(conv.space.knobs)) == (4362, 4201, 10)
    assert {r.error for r in conv.rows if r.latency_s is None} == {"RuntimeFailedConfig", "CompilationFailedConfig"}
    assert min(r.latency_s for r in conv.rows if r.latency_s is not None) == pytest.approx(0.554e-3, rel=1e-3)
    dedisp = read_measured(data_dir("kernel_tuner", "dedispersion_milo_MI250X.json.gz"))
    assert (dedisp.space.size, dedisp.n_valid, len(dedisp.space.knobs), dedisp.device) == (11130, 11130, 8, "?")


@pytest.fixture
def fake_data(tmp_path, monkeypatch):
    """A data folder holding one shipped cache (a copy of the MI50 one) and its SHA256SUMS."""
    folder = tmp_path / "data" / "kernel_tuner"
    folder.mkdir(parents=True)
    src = data_dir("kernel_tuner", "convolution_MI50.json.gz")
    shutil.copy(src, folder / "cache.json.gz")
    digest = hashlib.sha256(open(src, "rb").read()).hexdigest()
    (folder / shipped.MANIFEST).write_text(f"{digest}  cache.json.gz\n")
    monkeypatch.setattr(shipped, "data_dir", lambda *p: os.path.join(str(tmp_path / "data"), *p))
    return folder


def test_an_edited_shipped_file_is_refused_in_one_line(fake_data):
    path = fake_data / "cache.json.gz"
    assert read_measured(str(path)).space.size == 2442  # as shipped: read
    data = json.loads(gzip.decompress(path.read_bytes()))
    first = next(iter(data["cache"].values()))
    first["time"] = first["time"] / 2  # a faster config than was measured: well-formed, but not what was shipped
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    with pytest.raises(UserError, match=r"sha256 \w{12} is not the shipped file's .*edited or is corrupt") as exc:
        read_measured(str(path))
    assert "\n" not in str(exc.value)


def test_a_file_the_user_adds_beside_shipped_ones_is_read_unchecked(fake_data):
    shutil.copy(fake_data / "cache.json.gz", fake_data / "mine.json.gz")
    assert read_measured(str(fake_data / "mine.json.gz")).space.size == 2442
