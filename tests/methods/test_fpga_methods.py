"""cgp, dcgp, fpl18, mes and dac19 through the harness loop on the tiny synthetic table (tests/fpga_tiny.py)."""

from collections import Counter

import numpy as np
import pytest
import torch

from fpga_tiny import FIDELITIES, OBJECTIVES, TinyTableTarget, run_method, tiny_task
from tunebench.errors import UserError
from tunebench.methods import make_method
from tunebench.methods.base import Budget
from tunebench.pareto import adrs, pareto_front
from tunebench.testing.fakes import FakeTarget

torch.set_num_threads(1)

FAST = {"cgp": {}, "fpl18": {}, "mes": {"mes_samples": 5},
        "dcgp": {"deep_kernel": [64, 32, 16, 6], "fit_steps": 60, "refit_steps": 15}}


def _impl_front(ms):
    Y = np.array([[m.objectives[o] for o in OBJECTIVES] for m in ms if m.valid and m.fidelity == "impl"])
    return Y


def _true_front(target):
    Y = target.true_front()
    return Y[pareto_front(Y)]


@pytest.mark.parametrize("name", ["cgp", "fpl18", "mes", "dcgp"])
def test_mfbo_methods_on_tiny_table(name):
    target, task = TinyTableTarget(), tiny_task()
    method = make_method({"name": name, "max_iterations": 12, **FAST[name]})
    ms = run_method(method, target, task, trials=200, seed=1)
    fids = Counter(m.fidelity for m in ms)
    # 8 initial designs at every fidelity, nested (the same 8 designs)
    first = ms[:24]
    by_fid = {f: {m.config.index for m in first if m.fidelity == f} for f in FIDELITIES}
    assert all(len(v) == 8 for v in by_fid.values()) and by_fid["impl"] <= by_fid["synth"] <= by_fid["estimate"]
    assert 1 <= method.iteration <= 12 and method.finished in ("max_iterations", "no_hypervolume_gain")
    # every iteration asked the chosen design at its fidelity and the cheaper ones it lacked
    # the estimate stage (~0.01 s against ~4-6 s) turns out free once measured: the other 56 designs
    # are evaluated there; then iterations at synth/impl and the final predicted Pareto designs at impl
    assert fids["estimate"] == 64 and method.report()["free_fidelities"] == ["estimate"]
    final = len(method.learned or [])
    assert sum(fids.values()) == len(ms) and len(ms) <= 64 + 16 + 2 * 12 + final
    for entry in method.log:  # PEIPV choice: the argmax of rho_i * acquisition_i over fidelities
        best = max(entry["scores"].items(), key=lambda kv: kv[1]["rho"] * kv[1]["acq"])
        assert best[0] == entry["fidelity"]
    assert np.isfinite(adrs(_true_front(target), _impl_front(ms)))


@pytest.mark.parametrize("name", ["cgp", "fpl18"])
def test_mfbo_beats_random_designs_of_the_same_count(name):
    """With the default settings (CGPSettings, FPL18Settings) the impl designs found beat random valid designs of the same count (ADRS)."""
    target, task = TinyTableTarget(), tiny_task()
    ms = run_method(make_method({"name": name}), target, task, trials=300, seed=2)
    Y, true, pool = _impl_front(ms), _true_front(target), target.true_front()
    rng = np.random.default_rng(0)
    random_adrs = np.mean([adrs(true, pool[rng.choice(len(pool), len(Y), replace=False)]) for _ in range(200)])
    assert adrs(true, Y) < random_adrs, (adrs(true, Y), random_adrs)


def test_peipv_weighting_uses_stage_times():
    """rho_i = T_impl / T_i from the measured stage seconds; a cost-free weighting gives 1s."""
    target, task = TinyTableTarget(), tiny_task()
    m = make_method({"name": "cgp", "max_iterations": 1, "rho_max": None})
    run_method(m, target, task, trials=200)
    means = [np.mean(m.stage_times[f]) for f in FIDELITIES]
    cum = np.cumsum(means)
    assert m.fidelity_rho() == pytest.approx(list(cum[-1] / cum))
    assert m.fidelity_rho()[0] > 100  # the ~0.01 s estimate stage
    m.rho_max = 24.0
    assert m.fidelity_rho()[0] == 24.0 and m.fidelity_rho()[2] == 1.0
    m.fidelity_weighting = "none"
    assert m.fidelity_rho() == [1.0, 1.0, 1.0]
    # stage_seconds overrides what was measured: [Sun-PhD] Table 3.1 GEMM
    m.fidelity_weighting, m.stage_seconds, m.rho_max = "cost", [137.75, 1379.67, 1744.61], None
    assert m.fidelity_rho()[0] == pytest.approx(3262.03 / 137.75)


COSTS = {"estimate": 0.01, "synth": 4.0, "impl": 6.0}  # cumulative seconds: estimate is 0.17 % of impl


def test_a_near_free_fidelity_is_evaluated_everywhere_and_never_chosen():
    target, task = TinyTableTarget(costs=COSTS), tiny_task()
    m = make_method({"name": "cgp", "max_iterations": 6, "patience": 6})
    ms = run_method(m, target, task, trials=300, seed=3)
    n = task.space.size
    assert [x.fidelity for x in ms[:n]] == ["estimate"] * n and {x.config.index for x in ms[:n]} == set(range(n))
    assert all(x.fidelity != "estimate" for x in ms[n:])  # never again, never chosen
    assert m.log and all(e["fidelity"] != "estimate" and "estimate" not in e["scores"] for e in m.log)
    assert m.report()["free_fidelities"] == ["estimate"]
    # 8 nested initial designs at synth and impl follow the sweep
    init = ms[n:n + 16]
    assert Counter(x.fidelity for x in init) == {"synth": 8, "impl": 8}


def test_rho_follows_the_declared_costs_then_the_running_means():
    target, task = TinyTableTarget(costs=COSTS), tiny_task()
    m = make_method({"name": "cgp", "max_iterations": 1})
    m.setup(task, target.task_info(task), None, Budget(300), np.random.default_rng(0))
    assert m.fidelity_rho() == pytest.approx([6.0 / 0.01, 6.0 / 4.0, 1.0])  # declared, no cap
    assert m.free == [0]  # estimate: 0.17 % of impl
    run_method(m, target, task, trials=300)
    cum = np.cumsum([np.mean(m.stage_times[f]) for f in FIDELITIES])  # every fidelity measured: running means
    assert m.fidelity_rho() == pytest.approx(list(cum[-1] / cum))
    m.rho_max = 24.0
    assert m.fidelity_rho()[0] == 24.0
    assert make_method({"name": "cgp", "free_fidelity_ratio": None}).free_ratio is None


def test_the_final_step_spends_only_the_remaining_budget():
    def run(trials):
        m = make_method({"name": "fpl18", "max_iterations": 4, "final_beta": 2.0})
        return m, run_method(m, TinyTableTarget(costs=COSTS), tiny_task(), trials=trials, seed=4)

    m, ms = run(400)
    new = [i for i in m.learned if i not in {x.config.index for x in ms[:-m.report()["final_designs"]]
                                             if x.fidelity == "impl"}]
    assert m.finished in ("max_iterations", "no_hypervolume_gain") and len(new) >= 2
    impl = {x.config.index for x in ms if x.fidelity == "impl"}
    assert set(m.learned) <= impl  # the learned set: predicted Pareto designs, all measured at impl
    before = len(ms) - len(new)
    assert all(x.fidelity == "impl" for x in ms[before:])
    m2, ms2 = run(before + 1)  # the same run (same seed) with one trial left for the final step
    assert len(ms2) == before + 1 and ms2[-1].fidelity == "impl"
    assert [x.config.index for x in ms2[:before]] == [x.config.index for x in ms[:before]]


def test_cheap_fidelities_chosen_when_costs_differ():
    """With cost weighting the cheap fidelities are picked more often than without it."""
    target, task = TinyTableTarget(), tiny_task()
    picks = {}
    for weighting in ("cost", "none"):
        m = make_method({"name": "fpl18", "max_iterations": 10, "patience": 10, "fidelity_weighting": weighting,
                         "free_fidelity_ratio": None})
        run_method(m, target, task, trials=200, seed=2)
        picks[weighting] = sum(e["fidelity"] != "impl" for e in m.log) / len(m.log)
    assert picks["cost"] > picks["none"]


def test_dac19_on_tiny_table():
    target, task = TinyTableTarget(), tiny_task()
    m = make_method({"name": "dac19", "n_init": 12})
    ms = run_method(m, target, task, trials=500)
    init = ms[:24]
    assert Counter(x.fidelity for x in init) == {"estimate": 12, "impl": 12}
    later = ms[24:]
    assert later and all(x.fidelity == "impl" for x in later)
    assert len({x.config.index for x in later}) == len(later)       # each predicted Pareto design once
    assert not {x.config.index for x in later} & {x.config.index for x in init}
    Y = _impl_front(ms)
    assert adrs(_true_front(target), Y) < adrs(_true_front(target), _impl_front(init))


def test_mfbo_rejects_single_objective_targets_and_bad_values():
    tvm_like = FakeTarget(batch_size=1)  # one objective latency_s, one fidelity hw

    with pytest.raises(UserError, match="multi-objective"):
        make_method({"name": "cgp"}).setup(tiny_task(), tvm_like.info, None, Budget(4), np.random.default_rng(0))
    with pytest.raises(UserError, match="method.model"):
        make_method({"name": "cgp", "model": "bogus"})
    with pytest.raises(UserError, match="ar1"):
        make_method({"name": "cgp", "chaining": "ar1"})
    with pytest.raises(UserError, match="n_init"):
        make_method({"name": "cgp", "n_init": [8, 8]}).setup(tiny_task(), TinyTableTarget().info, None,
                                                              Budget(4), np.random.default_rng(0))


def test_mfbo_settings_declare_each_default_once():
    """The four methods share MFBOSettings; each class changes only what its method does differently."""
    from tunebench.methods.fpga_dse.mfgp.settings import CGPSettings, DCGPSettings, FPL18Settings, MESSettings

    cgp, dcgp, fpl18, mes = CGPSettings(), DCGPSettings(), FPL18Settings(), MESSettings()
    assert (cgp.model, cgp.chaining, cgp.acquisition, cgp.deep_kernel, cgp.optimizer) == ("icm", "nargp", "eipv", None,
                                                                                           "lbfgs")
    assert (dcgp.deep_kernel, dcgp.optimizer, dcgp.fit_steps) == ([1000, 500, 50, 6], "adam", 50)
    assert (fpl18.model, fpl18.chaining) == ("independent", "ar1") and (mes.model, mes.acquisition) == ("independent",
                                                                                                         "mes")
    differ = {n: {k for k, v in vars(s).items() if v != getattr(cgp, k)} for n, s in
              (("dcgp", dcgp), ("fpl18", fpl18), ("mes", mes))}
    assert differ == {"dcgp": {"name", "deep_kernel", "optimizer", "fit_steps"},
                      "fpl18": {"name", "model", "chaining"}, "mes": {"name", "model", "acquisition"}}
    assert (cgp.max_init_fraction, cgp.free_fidelity_ratio, cgp.ref_point, cgp.n_init) == (0.25, 0.01, 1.0, 8)
    m = make_method({"name": "cgp", "n_init": [8, 6, 4], "ref_point": [1.0, 1.5, 2.0], "stage_seconds": [1, 2, 3]})
    assert m.n_init == [8, 6, 4] and m.ref_point == [1.0, 1.5, 2.0] and m.stage_seconds == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("cfg, needle", [
    ({"name": "cgp", "free_fidelity_ratio": 2}, "method.free_fidelity_ratio=2"),
    ({"name": "cgp", "free_fidelity_ratio": "abc"}, "method.free_fidelity_ratio='abc'"),
    ({"name": "dcgp", "final_beta": -1}, "method.final_beta=-1"),
    ({"name": "mes", "model": "icm"}, "method.acquisition='mes': needs method.model=independent"),
    ({"name": "dcgp", "model": "independent"}, "method.deep_kernel=[1000, 500, 50, 6]: needs method.model=icm"),
    ({"name": "cgp", "n_init": [8, 0]}, "method.n_init=[8, 0]"),
    ({"name": "cgp", "ref_point": "x"}, "method.ref_point='x'"),
    ({"name": "cgp", "max_iterations": 0}, "method.max_iterations=0")])
def test_mfbo_bad_settings_are_one_line(cfg, needle):
    with pytest.raises(UserError) as exc:
        make_method(cfg)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_dse_settings_defaults_and_checks(tmp_path):
    """ann, bt and dac19 share their initial-design knobs; every DSE baseline's bad value is a one-line error."""
    from tunebench.methods.fpga_dse.ann import ANN, ANNSettings
    from tunebench.methods.fpga_dse.bt import BTSettings
    from tunebench.methods.fpga_dse.dac19 import DAC19Settings

    assert {(s.n_init, s.max_init_fraction) for s in (ANNSettings(), BTSettings(), DAC19Settings())} == {(48, 0.25)}
    ann = ANN(n_init=8, hidden=[32, 16])
    assert (ann.n_init, ann.max_init_fraction, ann.hidden, ann.settings.name) == (8, 0.25, (32, 16), "ann")
    m = make_method({"name": "dac19", "max_init_fraction": None, "xgb_params": {"max_depth": 4}})
    assert m.max_init_fraction is None and m.xgb_params == {"max_depth": 4, "eta": 0.1, "nthread": 1}
    for cfg, says in (({"name": "dac19", "n_init": 1}, "method.n_init=1: must be an integer >= 2"),
                      ({"name": "ann", "hidden": [64, 0]}, "method.hidden=[64, 0]"),
                      ({"name": "bt", "max_init_fraction": 2}, "method.max_init_fraction=2"),
                      ({"name": "dac19", "rted_mu": 0}, "method.rted_mu=0"),
                      ({"name": "nsga2", "population_size": 1}, "method.population_size=1"),
                      ({"name": "nsga2", "mutation_prob": 1.5}, "method.mutation_prob=1.5"),
                      ({"name": "motpe", "n_ei_candidates": 0}, "method.n_ei_candidates=0"),
                      ({"name": "motpe", "storage": "redis://x"}, "method.storage='redis://x': is not a storage"),
                      ({"name": "nsga2", "storage": "journal:/no/such/folder/s.log"},
                       "folder /no/such/folder does not exist or is not writable"),
                      ({"name": "motpe", "study": "a/b"}, "method.study='a/b'")):
        with pytest.raises(UserError) as err:
            make_method(cfg)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
    journal = f"journal:{tmp_path}/study.log"
    m = make_method({"name": "nsga2", "storage": journal, "study": "s1"})
    assert (m.storage_url, m.study_prefix) == (journal, "s1")


def _first_phase_done(method) -> bool:
    """The method measured its whole first phase and has not started its own search yet."""
    if hasattr(method, "initial_done"):  # cgp, dcgp, fpl18, mes
        return not method.queue and not method.initial_done and method.iteration == 0
    if hasattr(method, "phase"):  # dac19
        return not method.queue and method.phase == "initial"
    return not method.queue and not method.predicted  # ann, bt


@pytest.mark.parametrize("kernel", ["gemm", "conv", "spmv"])
@pytest.mark.parametrize("name,settings", [
    ("cgp", {}), ("mes", {"n_init": [12, 6, 3]}), ("fpl18", {"free_fidelity_ratio": None}), ("dac19", {}),
    ("dac19", {"n_init": 500, "max_init_fraction": None}), ("ann", {"n_init": 20}), ("bt", {})])
def test_a_budget_below_the_first_phase_is_refused_naming_the_minimum(kernel, name, settings):
    """``Method.check_budget`` on the shipped tables: the minimum it names is the first phase exactly
    (a budget of it completes that phase and nothing more; one trial less is refused)."""
    import re

    from conftest import target_settings
    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets import make_target
    from tunebench.targets.fpga.tasks import fpga_tasks

    target = make_target(target_settings("table"))
    task = fpga_tasks(MODEL_OPTIONS[f"hls_{kernel}"], "table")[0]
    method, info = make_method({"name": name, **settings}), target.task_info(task)
    problem = method.check_budget(task, info, Budget(1))
    assert problem.startswith(f"method={name} needs at least ") and f"on task {task.name}" in problem, problem
    need = int(re.search(r"needs at least (\d+) trials", problem).group(1))
    assert method.check_budget(task, info, Budget(need)) is None
    assert method.check_budget(task, info, Budget(need - 1)) is not None
    for trials, done in ((need - 1, False), (need, True)):
        method = make_method({"name": name, **settings})
        assert len(run_method(method, target, task, trials=trials)) == trials
        assert _first_phase_done(method) == done, (trials, need)
