"""benchmarks/glimpse_table.py: one row per layer and method, over seeds, with the trials to AutoTVM's best."""
import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import glimpse_table as gt


def _run(label, seed, shape, gflops):
    recs = [{"task_id": "t", "trial": i, "valid": True, "gflops": g} for i, g in enumerate(gflops)]
    task = {"id": "t", "name": "fused_conv2d_add_relu", "shape": shape, "best_latency_ms": 1.0, "best_noisy": False,
            "search_s": 2.0, "static_invalid": 0}
    return {"run": f"{label}{seed}", "label": label, "seed": seed, "variant": "None/Nonet", "tasks": [task],
            "records": recs}


def test_runs_of_one_layer_each_stay_apart_though_their_tasks_share_a_name():
    a = {"in_channels": 128, "out_channels": 128, "height": 28, "kernel": 3}
    b = {"in_channels": 256, "out_channels": 256, "height": 14, "kernel": 3}
    tab = gt.table([_run("autotvm", 0, a, [1, 5, 4]), _run("glimpse", 0, a, [2, 6, 6]),
                    _run("autotvm", 0, b, [3, 3, 9]), _run("glimpse", 0, b, [1, 2, 8])])
    assert sorted(c["shape"]["in_channels"] for c in tab.values()) == [128, 256]
    cell_a, cell_b = (next(c for c in tab.values() if c["shape"] == s) for s in (a, b))
    assert cell_a["reference_gflops"] == 5 and cell_b["reference_gflops"] == 9  # AutoTVM's last best-so-far
    assert cell_a["methods"]["glimpse"]["reach_exact"] == [2] and cell_b["methods"]["glimpse"]["reach_exact"] == [None]
    assert cell_b["methods"]["glimpse"]["reach_2pct"] == [None] and cell_b["methods"]["autotvm"]["reach_exact"] == [3]
    md = gt.markdown(tab)
    assert "| 128→128 28² k3 | glimpse | 3 |" in md and "| 256→256 14² k3 | glimpse | 3 |" in md and ">3" in md


def test_the_seeds_of_a_cell_are_listed_in_seed_order_whatever_the_folder_order():
    a = {"in_channels": 128, "out_channels": 128, "height": 28, "kernel": 3}
    tab = gt.table([_run("autotvm", 1, a, [1, 4, 4]), _run("autotvm", 0, a, [1, 6, 6]),
                    _run("glimpse", 2, a, [5, 5, 5]), _run("glimpse", 0, a, [1, 1, 7])])
    cell = next(iter(tab.values()))
    assert cell["methods"]["autotvm"]["seeds"] == [0, 1] and cell["methods"]["autotvm"]["best_gflops"] == [6, 4]
    assert cell["methods"]["glimpse"]["seeds"] == [0, 2] and cell["methods"]["glimpse"]["reach_exact"] == [3, 1]


def test_the_best_after_the_prior_s_trials_is_read_at_trial_8():
    a = {"in_channels": 128, "out_channels": 128, "height": 28, "kernel": 3}
    tab = gt.table([_run("glimpse", 0, a, [1] * 7 + [3] + [9] * 10), _run("autotvm", 0, a, [2, 4])])
    e = next(iter(tab.values()))["methods"]
    assert e["glimpse"]["gflops_at_8"] == [3] and e["glimpse"]["gflops_at_64"] == [9]
    assert e["autotvm"]["gflops_at_8"] == [4]  # fewer trials: its last
    assert "best GFLOPS at 8 trials | at 64 trials |" in gt.markdown(tab)


def test_the_ablation_pairs_are_compared_seed_by_seed_and_ei_runs_keep_their_own_label():
    assert gt._label({"name": "glimpse", "blueprint": "constant", "use_acquisition": False}) == "glimpse-constant-ei"
    assert gt._label({"name": "glimpse", "blueprint": "spec", "use_acquisition": True}) == "glimpse"
    a = {"in_channels": 64, "out_channels": 64, "height": 56, "kernel": 3}
    curve = [1] * 8 + [4] * 24 + [6] * 40
    tab = gt.table([_run("glimpse", 0, a, curve), _run("glimpse-constant", 0, a, [2] * 16 + [3] * 60),
                    _run("glimpse", 1, a, [3] * 70), _run("glimpse-constant", 2, a, [1] * 70),
                    _run("glimpse-ei", 0, a, [1] * 70)])
    pairs = gt.paired(tab)
    p = next(iter(pairs.values()))
    assert list(p) == ["glimpse"]  # glimpse-ei has no constant partner
    assert p["glimpse"]["seeds"] == [0]  # seeds 1 and 2 ran one arm each
    assert p["glimpse"]["ratio"] == {"8": [0.5], "16": [2.0], "32": [4 / 3], "64": [2.0]}
    md = gt.paired_markdown(tab, pairs)
    assert "| 64→64 56² k3 | glimpse / glimpse-constant | 0 | 0.50 (ahead 0/1) | 2.00 (ahead 1/1) |" in md


def test_the_autotvm_reference_may_come_from_another_experiment(tmp_path):
    import json

    import yaml

    shape = {"in_channels": 64, "out_channels": 64, "height": 56, "kernel": 3}
    for run_id, method, experiment in (("a", {"name": "autotvm"}, "loo"), ("b", {"name": "autotvm"}, "abl"),
                                       ("c", {"name": "glimpse", "blueprint": "spec"}, "abl"),
                                       ("d", {"name": "glimpse", "blueprint": "spec"}, "loo")):
        folder = tmp_path / "records" / run_id
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(yaml.safe_dump({"experiment": experiment, "seed": 0, "method": method,
                                                            "target": {"mcpu": "skylake-avx512", "num_cores": 2}}))
        (folder / "tasks.json").write_text(json.dumps([{"id": "t", "name": "conv", "shape": shape}]))
        (folder / "records.jsonl").write_text("")
    got = {r["run"] for r in gt._runs(str(tmp_path), "abl", "loo")}
    assert got == {"a", "c"}
    assert {r["run"] for r in gt._runs(str(tmp_path), "abl")} == {"b", "c"}


def test_a_layer_tuned_alone_meets_its_reference_tuned_among_others():
    a = {"in_channels": 256, "out_channels": 256, "height": 14, "kernel": 3}
    ref = _run("autotvm", 0, a, [2, 8])
    ref["tasks"][0]["name"] = "conv2d_1"  # the second layer of a three-layer run
    tab = gt.table([ref, _run("glimpse", 0, a, [9, 9])])
    assert len(tab) == 1 and next(iter(tab.values()))["methods"]["glimpse"]["reach_exact"] == [1]


def test_runs_with_random_candidates_keep_their_own_label():
    assert gt._label({"name": "glimpse", "random_candidates": 64}) == "glimpse-random-candidates"
    assert gt._label({"name": "glimpse", "random_candidates": 0}) == "glimpse"
