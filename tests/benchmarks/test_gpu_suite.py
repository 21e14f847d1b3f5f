"""benchmarks/gpu_suite.py: the overall budget and its skips, the Markdown report, and its dry run on llvm."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import _gpu_md
import _gpu_parts
import gpu_suite

SUITE = os.path.join(ROOT, "benchmarks", "gpu_suite.py")


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_budget_caps_each_part_and_skips_once_spent():
    clock = Clock()
    b = gpu_suite.Budget(100.0, clock=clock, min_part_s=15.0)
    assert b.admit(60, reserved_s=40) == (60.0, None)  # its own cap
    clock.t += 70
    assert b.admit(60) == (30.0, None)  # what is left
    clock.t += 20
    allowed, why = b.admit(60)
    assert allowed is None and "overall budget spent: 10 s of 100 s left" in why


def test_a_part_may_use_what_earlier_parts_left_but_not_the_later_parts_caps():
    clock = Clock()
    b = gpu_suite.Budget(100.0, clock=clock, min_part_s=15.0)
    assert b.admit(30, reserved_s=70) == (30.0, None)
    clock.t += 10  # the first part ended 20 s early
    assert b.admit(40, reserved_s=30) == (60.0, None)  # its cap + the 20 s saved; the last part's 30 s kept
    clock.t += 75  # ... and ran over its own cap
    assert b.admit(30) == (15.0, None)


def test_pytest_summary_counts():
    text = "....s\n= 3 passed, 1 skipped, 71 deselected, 2 errors in 12.0s =\n"
    assert _gpu_parts.pytest_counts(text) == {"passed": 3, "skipped": 1, "deselected": 71, "errors": 2}
    assert _gpu_parts.pytest_counts("no tests ran") == {}
    assert _gpu_parts.dense_bytes({"in_features": 4, "out_features": 2}) == 4 * (8 + 2 + 4 + 2)


def test_gpu_test_files_are_the_ones_with_gpu_marks():
    files = _gpu_parts.gpu_test_files()
    assert "tests/targets/test_cuda_gpu.py" in files and "tests/benchmarks/test_gpu_suite.py" not in files


def _suite_out(parts: dict) -> dict:
    return {"dry_run": False, "device": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.1", "gpu_memory": "80 GiB"},
            "host": "h", "git_commit": "abc", "date": "2026-11-27", "wall_s": 400.0, "budget_s": 480.0,
            "loadavg_before": [0.1], "loadavg_after": [0.2], "parts": parts}


def test_markdown_report_has_every_part_its_spread_and_the_kernel_taken():
    e2e = {"method": "autotvm", "run_id": "r1", "trials_per_task": 4, "n_default_kernels": 1.0, "error": None,
           "rows": {"e2e": {"median": 1.0, "min": 0.9, "cv": 0.02, "noisy": False},
                    "tvm_default": {"median": 3.0, "min": 2.9, "cv": 0.01, "noisy": True}},
           "speedups": {"tvm_default": {"geomean": 3.0, "ci_low": 2.8, "ci_high": 3.2}},
           "tasks": [{"task": "conv", "kernel": "default", "within_noise": True,
                      "tuned_ms": {"median": 0.2, "min": 0.19, "cv": 0.01, "noisy": False},
                      "default_ms": {"median": 0.19, "min": 0.18, "cv": 0.02, "noisy": False},
                      "speedup_vs_default": {"geomean": 0.95, "ci_low": 0.9, "ci_high": 1.01},
                      "static_invalid_fraction": "not reported"}]}
    parts = {"gpu_tests": {"status": "done", "wall_s": 50, "cap_s": 60,
                           "result": {"command": "python -m pytest -m gpu -q t.py", "returncode": 0,
                                      "counts": {"passed": 8}}},
             "peak": {"status": "timeout", "reason": "killed at its cap of 30 s", "wall_s": 30, "cap_s": 30},
             "resnet18_autotvm": {"status": "done", "wall_s": 140, "cap_s": 150, "result": e2e},
             "dgp_vs_autotvm": {"status": "skipped", "reason": "overall budget spent: 5 s of 480 s left", "cap_s": 45}}
    md = _gpu_md.markdown(_suite_out(parts))
    assert "NVIDIA H100 80GB HBM3 (driver 580.1" in md and "commit abc" in md
    assert "| Measured peak | timeout | 30 | 30 | killed at its cap of 30 s |" in md
    assert "| dgp vs autotvm, VGG-16 conv layers | skipped | — | 45 | overall budget spent" in md
    assert "8 passed (exit code 0)" in md
    assert "| TVM default build | 3 ms (min 2.9, cv 1.0 %)* | 3.00× [2.80, 3.20] |" in md
    assert "| conv | default (within noise) | 0.2 ms (min 0.19, cv 1.0 %) | 0.19 ms" in md
    assert "0.95× [0.90, 1.01] | not reported |" in md
    assert "## Measured peak" not in md  # a part without a result has no section


def test_trial_rate_section_reports_the_rate_its_goal_and_the_time_split():
    task = {"task": "conv2d_1", "trials": 64, "trials_per_s": 3.2, "time_compile_s": 30.0, "time_upload_s": 0.0,
            "time_run_s": 12.5, "time_protocol_s": 4.0, "time_overlap_s": 9.0}
    rate = {"trials": 448, "invalid": 12, "layers": 7, "method": "random", "batch_size": 16, "build_workers": 16,
            "overrides": [], "trials_per_s": 3.5, "trials_per_wall_s": 2.9, "wall_s": 154.0,
            "split": {"time_compile_s": 200.0, "time_upload_s": 0.0, "time_run_s": 80.0, "time_protocol_s": 30.0,
                      "time_overlap_s": 60.0},
            "goal": {"trials_per_s": 3.0, "host_cores": 16, "cores_here": 16, "met": True}, "tasks": [task]}
    md = _gpu_md.markdown(_suite_out({"trial_rate": {"status": "done", "wall_s": 160, "cap_s": 200, "result": rate}}))
    assert "## Trials per second, ResNet-18 3×3 convolutions" in md
    assert "**3.50 trials/s** of search clock (2.90 per wall second); goal ≥ 3 on a 16-core GPU host" in md
    assert "(16 cores here): met." in md and "overlap saved 60.0" in md
    assert "| conv2d_1 | 64 | 3.20 | 30.0 | 12.5 | 4.0 | 9.0 |" in md
    assert "not met" in _gpu_md.markdown(_suite_out({"trial_rate": {
        "status": "done", "wall_s": 1, "cap_s": 2, "result": {**rate, "goal": {**rate["goal"], "met": False}}}}))


def test_an_exhausted_budget_skips_every_part_and_still_writes_both_files(tmp_path):
    out = tmp_path / "suite.json"
    proc = subprocess.run([sys.executable, SUITE, "--dry-run", "--budget-s", "5", "--work", str(tmp_path / "w"),
                           "--commit", "abc1234", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["dry_run"] and data["target"] == "llvm" and data["git_commit"] == "abc1234"
    assert {p["status"] for p in data["parts"].values()} == {"skipped"} and len(data["parts"]) == len(gpu_suite.CAPS)
    md = (tmp_path / "suite.md").read_text()
    assert md.startswith("# GPU suite (dry run on llvm)") and md.count("| skipped |") == len(gpu_suite.CAPS)


def test_bad_arguments_are_usage_errors(tmp_path):
    for args in (["--dry-run", "--publish"], ["--only", "nope"], ["--trials", "0"]):
        proc = subprocess.run([sys.executable, SUITE, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)


@pytest.mark.slow
def test_dry_run_runs_every_part_on_llvm(tmp_path):
    """The whole suite on llvm with tiny layers and budgets (minutes on 2 cores, MetaSchedule's share the largest)."""
    out = tmp_path / "suite.json"
    proc = subprocess.run([sys.executable, SUITE, "--dry-run", "--work", str(tmp_path / "w"), "--out", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    parts = data["parts"]
    assert {k: p["status"] for k, p in parts.items()} == {k: "done" for k in gpu_suite.DRY_CAPS}, \
        {k: (p["status"], p.get("reason"), p.get("log_tail")) for k, p in parts.items()}
    assert parts["gpu_tests"]["result"]["counts"].get("skipped", 0) > 0  # no GPU here: every GPU test skips
    assert parts["peak"]["result"]["fma_gflops"] > 0 and parts["peak"]["result"]["mem_gbps"] > 0
    for part in ("resnet18_autotvm", "resnet18_metaschedule", "resnet18_winograd"):
        r = parts[part]["result"]
        assert r["rows"]["e2e"]["median"] > 0 and "torch" in r["speedups"] and "tvm_default" in r["speedups"]
        assert all(t["kernel"] in ("tuned", "default") for t in r["tasks"])
        assert all(t["tuned_ms"]["median"] > 0 and t["default_ms"]["median"] > 0 for t in r["tasks"])
    rate = parts["trial_rate"]["result"]
    assert rate["trials"] > 0 and rate["trials_per_s"] > 0 and rate["split"]["time_compile_s"] > 0
    assert rate["overrides"] == ["target.builder.overlap=true"] and rate["split"]["time_overlap_s"] >= 0
    layer = parts["vgg16_dense"]["result"]["layers"][0]
    assert layer["tuned"]["gbps"] > 0 and layer["speedup_vs_torch"]["geomean"] > 0
    assert set(parts["dgp_vs_autotvm"]["result"]["methods"]) == {"autotvm", "dgp"}
    assert (tmp_path / "suite.md").read_text().count("| done |") == len(gpu_suite.DRY_CAPS)


def test_suites_run_part_by_part_merge_into_one_result(tmp_path):
    """Two calls' results (``--only``) become one JSON and report: every part, the walls summed; files from
    another GPU, or that are no suite result, are one error line each."""
    peak = {"status": "done", "wall_s": 20, "cap_s": 40, "result": {"fma_gflops": 60000.0, "mem_gbps": 2700.0,
                                                                    "noisy": False, "threads": None, "device": "H100"}}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**_suite_out({"peak": peak}), "caps_s": {"peak": 40}}))
    b.write_text(json.dumps({**_suite_out({"gpu_tests": {"status": "timeout", "wall_s": 45, "cap_s": 45}}),
                             "caps_s": {"gpu_tests": 45}, "wall_s": 50.0}))
    out = tmp_path / "m.json"
    proc = subprocess.run([sys.executable, SUITE, "--merge", str(a), str(b), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert list(data["parts"]) == ["peak", "gpu_tests"] and data["wall_s"] == 450.0
    assert data["merged_from"] == ["a.json", "b.json"] and data["caps_s"] == {"peak": 40, "gpu_tests": 45}
    assert "| GPU tests | timeout | 45 | 45 |" in (tmp_path / "m.md").read_text()

    retry = tmp_path / "c.json"  # a later call retries a part: its result is reported, the earlier attempt named
    tests_done = {"command": "pytest -m gpu", "counts": {"passed": 9}, "returncode": 0, "ok": True, "tail": []}
    retry.write_text(json.dumps(_suite_out({"gpu_tests": {"status": "done", "wall_s": 90, "cap_s": 120,
                                                          "result": tests_done}})))
    proc = subprocess.run([sys.executable, SUITE, "--merge", str(a), str(b), str(retry), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["parts"]["gpu_tests"]["status"] == "done" and "_file" not in data["parts"]["gpu_tests"]
    assert data["superseded"] == [{"part": "gpu_tests", "status": "timeout", "wall_s": 45, "reason": None,
                                   "file": "b.json"}]
    assert "An earlier attempt at GPU tests in `b.json`: timeout after 45 s" in (tmp_path / "m.md").read_text()

    other = tmp_path / "other.json"
    other.write_text(json.dumps({**_suite_out({}), "device": {"gpu": "NVIDIA H200"}}))
    (tmp_path / "bad.json").write_text("[1, 2]")
    for files, message in (([a, other], "different runs"), ([tmp_path / "bad.json"], "not a gpu_suite result")):
        proc = subprocess.run([sys.executable, SUITE, "--merge", *map(str, files), "--out", str(tmp_path / "x.json")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.startswith("error: --merge") and message in proc.stderr
        assert not (tmp_path / "x.json").exists()
