"""method=dgp: layer groups, the history store, the deep GP's MAP transfer, and the whole method."""

import json
import os

import numpy as np
import pytest

from tunebench.errors import UserError
from tunebench.history import History
from tunebench.methods.tensor_programs.dgp.layer_groups import count_conv_groups, group_key, group_name, layer_groups

# [Sun-ICCV21] §4.2 (docs/REFERENCES.md): "VGG-16 has 1 group, while ResNet-18, AlexNet, and MobileNet-v1 have 4, 3, and 4"
PAPER_GROUPS = {"vgg16": 1, "resnet18": 4, "alexnet": 3, "mobilenet_v1": 4}


@pytest.mark.parametrize("model", sorted(PAPER_GROUPS))
def test_group_counts_match_the_paper(model):
    from tunebench.harness.setup.compose import compose_config
    from tunebench.targets.tvm.workloads.tasks import model_tasks

    cfg = compose_config([f"model={model}", "workdir=."])
    tasks, _ = model_tasks(cfg.model, "llvm")
    assert count_conv_groups(tasks) == PAPER_GROUPS[model]
    groups = layer_groups(tasks)
    assert sum(len(v) for v in groups.values()) == len(tasks)
    # the first task of a group comes first in model order (it becomes the group's source)
    for members in groups.values():
        assert tasks.index(members[0]) == min(tasks.index(t) for t in members)


def test_group_key_uses_kind_kernel_padding_and_stride():
    base = {"kernel": 3, "padding": 1, "stride": 1, "in_channels": 64}
    assert group_key("conv2d", base) == group_key("conv2d", {**base, "in_channels": 512})
    assert group_key("conv2d", base) != group_key("conv2d", {**base, "stride": 2})
    assert group_key("conv2d", base) != group_key("conv2d", {**base, "padding": 0})
    assert group_key("conv2d", base) != group_key("depthwise_conv2d", base)
    assert group_key("dense", {"in_features": 4}) == group_key("dense", {"in_features": 9}) == ("dense",)
    assert group_name(group_key("conv2d", base)) == "conv2d_k3x3_p1x1_s1x1"


def test_transfer_features_agree_for_indices_and_record_dicts():
    from tunebench.methods.tensor_programs.dgp.method import LOG2_SCALE, TransferFeatures
    from tunebench.search_space import ChoiceKnob, Space, SplitKnob

    space = Space([SplitKnob("tile_f", 16, 2), SplitKnob("tile_x", 12, 2), ChoiceKnob("order", ("a", "b", "c"))])
    feats = TransferFeatures(space)
    idx = np.arange(space.size)
    direct = feats(idx)
    via_dicts, kept = feats.from_dicts([space.get(int(i)).to_dict() for i in idx])
    assert kept.tolist() == idx.tolist()
    np.testing.assert_allclose(direct, via_dicts, rtol=1e-6)
    # absolute: the factor 4 encodes the same on axes of length 16 and 12
    c = space.from_dict({"tile_f": [4, 4], "tile_x": [3, 4], "order": "c"})
    row = feats([c.index])[0]
    assert row[1] == pytest.approx(2 / LOG2_SCALE) and row[3] == pytest.approx(2 / LOG2_SCALE)
    assert row[4] == pytest.approx(1.0)
    # a dict of another template (unknown choice value, wrong split arity) is skipped
    _, kept = feats.from_dicts([{"tile_f": [16], "tile_x": [3, 4], "order": "a"},
                                {"tile_f": [4, 4], "tile_x": [3, 4], "order": "z"}])
    assert kept.size == 0


def _toy_data(n, shift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 5)).astype(np.float32)
    y = 10 * np.sin(3 * x[:, 0]) + 5 * x[:, 1] ** 2 + shift + 0.1 * rng.normal(size=n)
    return x, y


def test_deep_gp_learns_and_map_moves_only_as_far_as_lambda_allows():
    from tunebench.methods.tensor_programs.dgp.model import DeepGP

    x, y = _toy_data(200)
    model = DeepGP(x, hidden_dims=3, num_inducing=16, seed=0).fit(x, y, epochs=30, lr=0.03, batch_size=100)
    xt, yt = _toy_data(200, seed=1)
    rmse = float(np.sqrt(np.mean((model.predict_mean(xt) - yt) ** 2)))
    assert rmse < 0.5 * yt.std()  # it learned the function, far better than the mean
    theta = {k: v.detach().clone() for k, v in model.state_dict().items()}

    # a new "layer": the same landscape shifted up (higher throughput), 40 tuning points
    xs, ys = _toy_data(40, shift=4.0, seed=2)
    elbo0 = model.elbo(xs, ys, samples=64)
    dist, gain = {}, {}
    for lam in (0.0, 0.1, 100.0):
        tuned = model.copy().fit_map(xs, ys, l2=lam, epochs=40, lr=0.02)
        dist[lam] = tuned.distance_to(theta)
        gain[lam] = tuned.elbo(xs, ys, samples=64) - elbo0
        # MAP optimum: ELBO(θ̂) - λ‖θ̂-θ̃‖² >= ELBO(θ̃), so λ‖θ̂-θ̃‖² <= ELBO gain (small slack: SGD and MC noise)
        assert lam * dist[lam] ** 2 <= gain[lam] + 0.1
    assert model.distance_to(theta) == 0.0  # fit_map works on the copy
    assert dist[0.0] > dist[0.1] > dist[100.0]
    assert dist[100.0] < 0.25 * dist[0.0]
    assert gain[0.0] > 0.5  # unconstrained, the tuning set's fit improves clearly


def test_history_loads_record_files_run_folders_and_run_ids(tiny_cfg, tmp_path):
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.tracking.tracker import Tracker

    tiny_cfg.e2e.enabled = False
    run_id = run_experiment(tiny_cfg)
    run_dir = os.path.join(tiny_cfg.workdir, "records", run_id)
    by_file = History.load(os.path.join(run_dir, "records.jsonl"))
    by_dir = History.load(run_dir)
    tracker = Tracker(None, "test", tiny_cfg.workdir)
    by_id = History.load(run_id, tracker.client, tiny_cfg.workdir)
    for h in (by_file, by_dir, by_id):
        assert len(h) == 6 and len(h.tasks) == 1
        t = next(iter(h.tasks.values()))
        assert t.kind == "conv2d" and t.shape["kernel"] == 3 and t.origin == "loaded"
    with pytest.raises(UserError, match="method.history=nope"):
        History.load("nope", tracker.client)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(UserError, match="holds no records"):
        History.load(str(empty))


def test_bad_dgp_settings_are_one_line_errors():
    from tunebench.config.load import plain
    from tunebench.methods import make_method
    from tunebench.methods.tensor_programs.dgp.settings import DGPSettings

    cfg = plain(DGPSettings())
    make_method(cfg)
    for key, value, match in (("tuning_set", "best", "tuning_set='best'"), ("top_k", 0, "top_k=0"),
                              ("map_l2", -1.0, "map_l2=-1.0")):
        with pytest.raises(UserError, match=match):
            make_method({**cfg, key: value})
    with pytest.raises(UserError, match="source_tuner"):
        make_method({**cfg, "source_tuner": {"name": "dgp"}})


L1 = {"in_channels": 8, "height": 14, "width": 14, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1}
L2 = {"in_channels": 16, "height": 14, "width": 14, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1}


def _dgp_cfg(workdir, *extra):
    from tunebench.harness.setup.compose import compose_config, layers_override

    return compose_config([f"workdir={workdir}", "experiment=test", "progress=false", layers_override([L1, L2]),
                           "method=dgp", "budget.trials_per_task=10", "method.tuning_set_size=4", "method.top_k=2",
                           "method.pretrain_epochs=10", "method.map_epochs=10", "method.pool_size=200",
                           "method.num_inducing=8", "method.predict_samples=4", "method.sa_parallel_size=16",
                           "method.source_tuner.plan_size=5", "target.batch_size=5",
                           "target.runner.repeat=3", "target.runner.min_repeat_ms=5", "e2e.enabled=false", *extra])


def test_dgp_tunes_source_then_transfers_and_reuses_a_history(tmp_path):
    from mlflow.tracking import MlflowClient

    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.tracking.tracker import resolve_uri

    run_id = run_experiment(_dgp_cfg(tmp_path))
    run_dir = tmp_path / "records" / run_id
    tasks = json.loads((run_dir / "tasks.json").read_text())
    source, target = tasks
    assert source["method_report"]["role"] == "source" and source["trials"] == 10  # autotvm, whole budget
    rep = target["method_report"]
    assert rep["role"] == "target" and rep["source_tasks"] == [source["id"]] and rep["n_history"] == 10
    assert target["trials"] == 4 + 2 and target["stop_reason"] == "exhausted"  # tuning set + top-k
    assert target["best_latency_ms"] and target["check"]["ok"]
    for key in ("rmse_dgp_untuned", "rmse_xgb_history", "map_distance", "pretrain_s"):
        assert np.isfinite(rep[key])
    metrics = MlflowClient(resolve_uri(None, str(tmp_path))).get_run(run_id).data.metrics
    assert metrics[f"{target['id']}.rmse_xgb_history"] == pytest.approx(rep["rmse_xgb_history"])
    excl = metrics["search_time_excl_source_s"]
    assert excl == pytest.approx(metrics["search_time_s"] - source["search_s"] - rep["pretrain_s"], rel=1e-6)

    # the same layers with the first run as history: no source tuning, both layers transfer,
    # and the random tuning set of the ablation
    run2 = run_experiment(_dgp_cfg(tmp_path, f"method.history={run_dir}", "method.tuning_set=random"))
    tasks2 = json.loads((tmp_path / "records" / run2 / "tasks.json").read_text())
    assert [t["method_report"]["role"] for t in tasks2] == ["target", "target"]
    # a layer never learns from its own records: each uses only the other layer's
    assert tasks2[0]["method_report"]["source_tasks"] == [target["id"]]
    assert tasks2[1]["method_report"]["source_tasks"] == [source["id"]]
    assert all(t["trials"] == 6 for t in tasks2)


def test_unreadable_history_fails_before_a_run_starts(tmp_path):
    from tunebench.harness.experiment import run_experiment

    with pytest.raises(UserError, match="method.history=/no/such/records.jsonl"):
        run_experiment(_dgp_cfg(tmp_path, "method.history=/no/such/records.jsonl"))
    assert not (tmp_path / "records").exists()
