"""autotvm: the shared simulated annealing, the XGBoost cost model and the XGBTuner loop (CPU only)."""
import time

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from conftest import method_settings
from tunebench.harness import experiment, tuning
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.methods.annealing import SimulatedAnnealing, index_digits, random_walk
from tunebench.methods.tensor_programs.autotvm.tuner import AutoTVM
from tunebench.methods.tensor_programs.autotvm.xgb_model import KnobFeatures, XGBCostModel, average_recall
from tunebench.record_file import read_records
from tunebench.run_lookup import RECORD_TAG
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.task import Measurement, Outcome, Task
from tunebench.testing.fakes import FakeTarget


def conv_space():
    """A CUDA-conv2d-like space (430,080 configs): small enough to find its true optimum by enumeration."""
    return Space([SplitKnob("tile_f", 32, 4), SplitKnob("tile_y", 14, 4), SplitKnob("tile_x", 14, 4),
                  SplitKnob("tile_rc", 16, 2), ChoiceKnob("auto_unroll_max_step", (0, 512, 1500)),
                  ChoiceKnob("unroll_explicit", (0, 1))])


def big_space():
    """VGG-16 conv1_1's CUDA space (202,309,632 configs)."""
    return Space([SplitKnob("tile_f", 64, 4), SplitKnob("tile_y", 224, 4), SplitKnob("tile_x", 224, 4),
                  SplitKnob("tile_rc", 3, 2), SplitKnob("tile_ry", 3, 2), SplitKnob("tile_rx", 3, 2),
                  ChoiceKnob("auto_unroll_max_step", (0, 512, 1500)), ChoiceKnob("unroll_explicit", (0, 1))])


def autotvm_cfg(**over):
    return method_settings("autotvm", **over)


# ---- simulated annealing ------------------------------------------------------------------------
def test_vectorized_digits_walk_and_features_match_space():
    sp, rng = big_space(), np.random.default_rng(0)
    idx = np.array(sp.sample(rng, 300), dtype=np.int64)
    assert index_digits(sp, idx).tolist() == [sp.digits(int(i)) for i in idx]
    assert np.array_equal(KnobFeatures(sp)(idx), sp.features(idx))
    moved = random_walk(sp, idx, rng)
    changed = index_digits(sp, moved) != index_digits(sp, idx)
    assert (changed.sum(axis=1) == 1).all() and ((0 <= moved) & (moved < sp.size)).all()
    # every knob with more than one entity gets moved (no knob here has a single entity)
    assert set(np.flatnonzero(changed.any(axis=0))) == set(range(len(sp.knobs)))


def separable_score(space):
    """Score = minus the L1 distance of the config's digits to a fixed target digit per knob (max 0)."""
    target = np.array([d // 3 for d in space.dims])

    def score(indices):
        return -np.abs(index_digits(space, indices) - target).sum(axis=1).astype(float)

    return score


def test_sa_finds_the_maximum_far_better_than_random_sampling():
    sp, rng = big_space(), np.random.default_rng(0)
    score, n_evals = separable_score(sp), [0]

    def counted(indices):
        n_evals[0] += len(indices)
        return score(indices)

    sa = SimulatedAnnealing(n_iter=500, parallel_size=128, temp=(1.0, 0.0), persistent=True, early_stop=50)
    found = sa.find_maximums(sp, counted, 16, set(), rng)
    sa_top = score(np.array(found))
    random_top = np.sort(score(np.array(sp.sample(rng, n_evals[0]))))[::-1][:16]
    print(f"distance to the optimum (L1 in digits), best and mean of the top 16: SA {-sa_top[0]:.0f}, "
          f"{-sa_top.mean():.2f} after {n_evals[0]} evaluations ({sa.last_stats['steps']} steps); "
          f"random sampling of as many configs {-random_top[0]:.0f}, {-random_top.mean():.2f}")
    assert len(found) == 16 and len(set(found)) == 16
    assert all(a >= b for a, b in zip(sa_top, sa_top[1:]))  # best first
    assert sa_top[0] == 0 and random_top[0] <= -3  # SA finds the optimum, random sampling does not
    assert sa_top.mean() > random_top.mean() + 3


def test_sa_respects_exclusive_returns_distinct_points_and_persists():
    sp, rng = conv_space(), np.random.default_rng(1)
    score = separable_score(sp)
    all_idx = np.arange(sp.size, dtype=np.int64)
    exclusive = set(int(i) for i in all_idx[np.argsort(-score(all_idx))[:50]])  # the 50 best, optimum included
    sa = SimulatedAnnealing(n_iter=200, parallel_size=64)
    found = sa.find_maximums(sp, score, 32, exclusive, rng)
    assert len(found) == 32 == len(set(found)) and not set(found) & exclusive
    assert sa._points is not None and len(sa._points) == 64  # persistent chains kept for the next call
    again = sa.find_maximums(sp, score, 32, exclusive | set(found), rng)
    assert not set(again) & (exclusive | set(found)) and len(set(again)) == 32


def test_sa_on_a_space_smaller_than_its_chains_and_the_heap():
    sp = Space([SplitKnob("a", 12, 2), ChoiceKnob("b", (0, 1, 2))])  # 18 configs
    sa = SimulatedAnnealing(n_iter=100, parallel_size=128)
    found = sa.find_maximums(sp, lambda i: -np.abs(i - 7).astype(float), 64, {7, 8}, np.random.default_rng(0))
    assert sorted(found) == sorted(set(range(18)) - {7, 8}) and found[0] in (6,)


# ---- XGBoost cost model -------------------------------------------------------------------------
def spearman(a, b):
    """Spearman rank correlation of two (n,) arrays without ties (Pearson correlation of their ranks)."""
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def test_average_recall():
    labels = np.arange(100.0)
    assert average_recall(labels, labels, 10) == pytest.approx(1.0)
    assert average_recall(-labels, labels, 10) == pytest.approx(0.0)
    assert 0.0 < average_recall(np.random.default_rng(0).random(100), labels, 50) < 0.7


def smooth_gflops(x):
    """A smooth landscape over knob features (shape (n, n_features) -> (n,)): one peak, mild interactions."""
    c = np.linspace(0.25, 0.75, x.shape[1])
    return 100.0 * np.exp(-2.0 * ((x - c) ** 2).sum(axis=1)) * (1.0 + 0.3 * x[:, 0] * x[:, -1])


@pytest.mark.parametrize("loss_type", ["rank", "reg"])
def test_xgb_model_rank_correlates_with_a_smooth_function(loss_type):
    sp, rng = conv_space(), np.random.default_rng(0)
    cfg = autotvm_cfg()
    feats = KnobFeatures(sp)
    train = np.array(sp.sample(rng, 200), dtype=np.int64)
    test = np.array(sp.sample(rng, 2000, exclude=set(train.tolist())), dtype=np.int64)
    model = XGBCostModel(sp, loss_type=loss_type, num_boost_round=cfg.num_boost_round,
                         early_stopping_rounds=cfg.early_stopping_rounds, params=cfg.xgb_params, seed=0)
    t0 = time.perf_counter()
    model.fit(train, smooth_gflops(feats(train)))
    fit_s = time.perf_counter() - t0
    rho = spearman(model.predict(test), smooth_gflops(feats(test)))
    print(f"{loss_type}: Spearman {rho:.3f} on 2000 unseen configs, fit {fit_s:.2f}s, {model.last_fit}")
    assert rho > 0.8 and model.last_fit["n"] == 200  # its speed: benchmarks/, not here


def test_xgb_model_invalid_measurements_are_zero_throughput():
    sp, rng = conv_space(), np.random.default_rng(0)
    idx = np.array(sp.sample(rng, 100), dtype=np.int64)
    y = smooth_gflops(KnobFeatures(sp)(idx))
    y[::4] = 0.0
    model = XGBCostModel(sp, loss_type="reg", params={"nthread": 1}).fit(idx, y)
    assert model.last_fit["n_invalid"] == 25 and model.y_max == pytest.approx(y.max())
    assert model.predict(idx).shape == (100,)
    with pytest.raises(RuntimeError, match="before fit"):
        XGBCostModel(sp).predict(idx)


# ---- the tuner on a pure-Python target -----------------------------------------------------------
class FeatureTarget(FakeTarget):
    """Latency = a structured function of the knob features (one basin, cross terms); an invalid region.

    ``flops`` of the task / latency gives GFLOPS; the target leaves ``gflops`` at 0 like the loop tests'.
    """

    def __init__(self, space, seed=0):
        super().__init__(batch_size=8)
        r = np.random.default_rng(1000 + seed)
        self.features = KnobFeatures(space)
        self.center = r.uniform(0.2, 0.8, space.n_features)
        self.weight = r.uniform(0.5, 3.0, space.n_features)

    def latencies(self, indices):
        x = self.features(np.asarray(indices, dtype=np.int64))
        j, k = min(4, x.shape[1] - 1), min(5, x.shape[1] - 1)
        d = ((x - self.center) ** 2 * self.weight).sum(axis=1) + 0.5 * (x[:, 1] - x[:, k]) ** 2
        lat = 1e-3 * (1.0 + 5.0 * d + 2.0 * d**2)
        return np.where(x[:, 0] + x[:, j] > 1.6, np.inf, lat)  # "too many threads": invalid

    def evaluate(self, configs, fidelity):
        """The whole batch at once (a non-finite latency: an invalid measurement)."""
        return [{"latency_s": float(t)} for t in self.latencies([c.index for c in configs])]

    def optimum(self, space):
        return float(self.latencies(np.arange(space.size)).min())


def fake_task(space):
    t = Task(id="00000000abcd", name="fake", kind="conv2d", mod=None, shape={}, flops=10**9)
    t.space = space
    return t


def run_fake(method_cfg, seed, trials, space=None, prior=None):
    task = fake_task(space or conv_space())
    target = FeatureTarget(task.space, seed)
    method = make_method(method_cfg)
    res = tune_task(task, method, target, Budget(trials), np.random.default_rng(seed), prior=prior)
    return res, method, target


def test_autotvm_beats_random_search_at_equal_trials_and_never_repeats():
    trials, seeds = 192, range(5)
    ratios = {"autotvm": [], "random": []}
    for seed in seeds:
        for name, cfg in (("autotvm", autotvm_cfg()), ("random", {"name": "random"})):
            res, method, target = run_fake(cfg, seed, trials)
            assert len(res.measurements) == trials == len(set(target.measured))
            best = min(m.latency_s for m in res.measurements if m.valid)
            ratios[name].append(best / target.optimum(res.task.space))
            if name == "autotvm":
                assert [e["n_measured"] for e in method.train_log] == [64, 128, 192]
                assert sum(s == "model" for s in method.source.values()) == 2 * 61  # 2 plans of 64 - 3 eps each
                assert sum(s == "eps" for s in method.source.values()) == 2 * 3
    med = {k: float(np.median(v)) for k, v in ratios.items()}
    print(f"best latency / true optimum after {trials} trials, seeds {list(seeds)}: "
          + "; ".join(f"{k} {np.round(v, 3).tolist()} median {med[k]:.3f}" for k, v in ratios.items()))
    assert med["autotvm"] < med["random"]
    assert sum(a < r for a, r in zip(ratios["autotvm"], ratios["random"])) >= 4


def test_autotvm_resume_trains_on_prior_measurements_and_skips_them():
    first, _, _ = run_fake(autotvm_cfg(), 0, 100)
    res, method, target = run_fake(autotvm_cfg(), 0, 160, prior=first.measurements)
    prior_idx = {m.config.index for m in first.measurements}
    assert len(res.measurements) == 160 and len(target.measured) == 60 == len(set(target.measured))
    assert not set(target.measured) & prior_idx
    assert method.train_log[0]["n_measured"] == 100  # trained on the prior measurements right away
    assert sum(method.source[i] == "model" for i in target.measured) >= 50


def test_autotvm_same_seed_same_configs():
    runs = [run_fake(autotvm_cfg(), 3, 96)[2].measured for _ in range(2)]
    assert runs[0] == runs[1]


def test_autotvm_space_smaller_than_the_plan_and_exhaustion():
    sp = Space([SplitKnob("a", 12, 2), ChoiceKnob("b", (0, 1, 2))])  # 18 configs < plan_size
    res, method, target = run_fake(autotvm_cfg(), 0, 100, space=sp)
    assert res.stop_reason == "exhausted" and sorted(target.measured) == list(range(18))
    sp = Space([SplitKnob("a", 64, 3), ChoiceKnob("b", (0, 1))])  # 56 configs; retrains on 16, 32, 48
    res, method, target = run_fake(autotvm_cfg(plan_size=16), 0, 100, space=sp)
    assert res.stop_reason == "exhausted" and sorted(target.measured) == list(range(56))
    assert len(method.train_log) >= 2 and "model" in method.source.values()


def test_autotvm_does_not_train_until_a_measurement_is_valid():
    task = fake_task(conv_space())
    method = make_method(autotvm_cfg(plan_size=8))
    method.setup(task, FakeTarget().info, None, Budget(100), np.random.default_rng(0))
    configs = method.ask(10)
    method.tell([Measurement(task.id, c, Outcome.RUN_ERROR, error="x") for c in configs])
    assert method.train_log == [] and method.plan == []
    configs = method.ask(4)
    method.tell([Measurement.timed(task.id, c, 1e-3 * (k + 1)) for k, c in enumerate(configs)])
    assert len(method.train_log) == 1 and method.train_log[0]["fit"]["n_invalid"] == 10
    assert {method.source[c.index] for c in method.ask(8)} == {"model"}


def test_bad_hyperparameters_are_user_errors():
    from tunebench.errors import UserError

    for bad in ({"plan_size": 0}, {"loss_type": "hinge"}, {"feature": "itervar"}, {"sa_parallel_size": 0},
                {"early_stopping_rounds": 0}):
        with pytest.raises(UserError):
            make_method(autotvm_cfg(**bad))
    assert isinstance(make_method(autotvm_cfg()), AutoTVM)


# ---- one real run through the harness -----------------------------------------------------------
def test_real_tiny_run_reaches_the_model_driven_phase(tiny_cfg, monkeypatch):
    made = []

    def spy(cfg):
        made.append(make_method(cfg))
        return made[-1]

    monkeypatch.setattr(tuning, "make_method", spy)
    tiny_cfg.method = autotvm_cfg(plan_size=8)
    tiny_cfg.budget.trials_per_task = 24
    tiny_cfg.e2e.enabled = False  # the search's phases are the point (test_e2e: the model's rows)
    run_id = experiment.run_experiment(tiny_cfg)
    run = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db").get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["method"] == "autotvm"
    recs = read_records(run.data.tags[RECORD_TAG])
    assert len(recs) == 24 and len({r["index"] for r in recs}) == 24
    method = made[-1]  # the instance that tuned the task (the first one only validated the config)
    assert [e["n_measured"] for e in method.train_log][:2] == [9, 18]  # batches of 3: 9 >= 8, 18 >= 16
    phases = [method.source[r["index"]] for r in recs]
    best = {p: min((r["latency_s"] for r, q in zip(recs, phases) if q == p and r["valid"]), default=None)
            for p in ("random", "model")}
    trainings = [(e["n_measured"], e["fit"]["rounds"], e["search"]["steps"], round(e["seconds"], 2))
                 for e in method.train_log]
    print(f"space {method.space.size} configs; phases {phases}; best latency by phase {best}; "
          f"trainings (measured, rounds, SA steps, s) {trainings}")
    assert phases[:9] == ["random"] * 9 and phases[9:].count("model") >= 12
    assert sum(r["valid"] for r in recs) >= 12
