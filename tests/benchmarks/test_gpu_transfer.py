"""benchmarks/gpu_transfer.py: A's best and top-k configurations on GPU B, and the rank correlation over
the configurations valid on both; a failed entry is never a number."""
import json
import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gpu_transfer as gt


def test_by_hand_failed_and_missing_configs_are_named_not_timed():
    src = {("a",): 1.0, ("b",): 2.0, ("c",): 3.0, ("d",): 4.0, ("e",): 5.0, ("f",): "RuntimeFailedConfig"}
    dst = {("a",): "CompilationFailedConfig", ("b",): 4.0, ("c",): 2.0, ("d",): 6.0, ("e",): 8.0, ("f",): 1.0}
    r = gt.transfer(src, dst, top=3)
    assert r["best"] == {"status": "invalid (CompilationFailedConfig)", "ratio": None}
    # B's optimum is f (1.0; failed on A, so never among A's ranking); A's top 3: a (failed), b 4.0, c 2.0
    assert r["target_optimum_ms"] == 1.0 and r["top_best_ratio"] == 2.0 and r["top_not_valid"] == 1
    # common valid: b, c, d, e with times (2, 3, 4, 5) and (4, 2, 6, 8): ranks 1,2,3,4 vs 2,1,3,4
    assert r["common_valid"] == 4 and abs(r["spearman"] - (1 - 6 * 2 / (4 * 15))) < 1e-12
    missing = gt.transfer({("z",): 0.5, **src}, dst, top=1)
    assert missing["best"] == {"status": "missing", "ratio": None} and missing["top_best_ratio"] is None
    ok = gt.transfer(dst, src, top=1)  # the other way: f is the source's best and failed on the target
    assert ok["best"]["status"] == "invalid (RuntimeFailedConfig)"
    same = gt.transfer(src, src, top=2)
    assert same["best"] == {"status": "valid", "ratio": 1.0, "ms": 1.0, "rank_on_target": 1}
    assert abs(same["spearman"] - 1.0) < 1e-12 and same["common_valid"] == 5


def test_the_shipped_cache_keeps_its_failed_entries_as_error_names():
    times = gt.measured("kernel_tuner/convolution_milo_A100.json.gz")
    failed = [t for t in times.values() if not isinstance(t, float)]
    assert len(times) == 4362 and len(failed) == 161  # data/kernel_tuner/README.md
    assert set(failed) <= {"RuntimeFailedConfig", "CompilationFailedConfig", "InvalidConfig"}
    assert abs(min(t for t in times.values() if isinstance(t, float)) - 0.554) < 1e-3


def test_the_published_row_is_what_the_script_computes():
    saved = json.load(open(os.path.join(ROOT, "benchmarks", "results", "gpu_transfer.json")))
    row = next(r for r in saved["results"] if (r["kernel"], r["source"], r["target"])
               == ("convolution_milo", "A4000", "A100"))
    got = gt.transfer(gt.measured("kernel_tuner/convolution_milo_A4000.json.gz"),
                      gt.measured("kernel_tuner/convolution_milo_A100.json.gz"), saved["top"])
    assert json.loads(json.dumps(got)) == {k: row[k] for k in got}
