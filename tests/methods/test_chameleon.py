"""method=chameleon: the loop on AutoTVM's cost model (explorer x sampling), on a pure-Python target,
and one short real run on llvm."""
import json
import os

import pytest
from mlflow.tracking import MlflowClient

from test_autotvm import run_fake
from tunebench.config.load import plain
from tunebench.errors import UserError
from tunebench.methods import make_method
from tunebench.methods.tensor_programs.autotvm.settings import AutoTVMSettings
from tunebench.methods.tensor_programs.chameleon.settings import ChameleonSettings, PPOSettings

SMALL = {"plan_size": 16, "iteration_opt": 5, "episode_rl": 32, "step_rl": 60}


def chameleon_cfg(**over):
    return plain(ChameleonSettings()) | over


def test_the_settings_extend_autotvm_with_the_thesis_settings():
    cfg = chameleon_cfg()
    autotvm = plain(AutoTVMSettings())
    assert {k: cfg[k] for k in autotvm if k not in ("name", "loss_type")} == \
        {k: v for k, v in autotvm.items() if k not in ("name", "loss_type")}
    assert (cfg["loss_type"], cfg["iteration_opt"], cfg["episode_rl"], cfg["step_rl"], cfg["threshold_meta"]) == \
        ("reg", 16, 128, 500, 2.5)
    assert make_method(cfg).plan_size == 64


def test_keyword_overrides_type_a_ppo_mapping_onto_the_ppo_settings():
    from tunebench.methods.tensor_programs.chameleon.tuner import Chameleon

    method = Chameleon(ChameleonSettings(ppo=PPOSettings(hidden=32)), ppo={"lr": 0.01})
    assert (method.ppo.lr, method.ppo.hidden, method.ppo.gamma) == (0.01, 32, 0.9)
    with pytest.raises(UserError, match="method.ppo.width is unknown"):
        Chameleon(ppo={"width": 3})


def test_sa_with_greedy_sampling_is_autotvm():
    trials = 80
    autotvm = plain(AutoTVMSettings()) | {"loss_type": "reg", "plan_size": 16}
    a = run_fake(autotvm, 2, trials)[2].measured
    c = run_fake(chameleon_cfg(explorer="sa", sampling="greedy", plan_size=16, iteration_opt=10), 2, trials)[2].measured
    assert a == c


@pytest.mark.parametrize("explorer", ["rl", "sa"])
def test_adaptive_sampling_improves_on_its_first_batch_with_fewer_measurements(explorer):
    res, method, target = run_fake(chameleon_cfg(explorer=explorer, **SMALL), 0, 200)
    lat = [m.latency_s for m in res.measurements]
    first = min(lat[:16])  # the random first iteration
    best = min(lat)
    report = method.report()
    print(f"{explorer}+adaptive: {len(lat)} measurements, samples {report['samples']}, "
          f"synthesized {report['synthesized']}; best/optimum first batch {first / target.optimum(res.task.space):.3f}, "
          f"after {best / target.optimum(res.task.space):.3f}")
    assert best < first
    assert res.stop_reason == "exhausted" and report["stop"] == "iteration_opt" and report["iterations"] == 5
    assert len(report["samples"]) == 4 and len(lat) == 16 + sum(report["samples"]) < 5 * 16
    assert len(set(target.measured)) == len(target.measured)  # nothing measured twice


def test_greedy_sampling_runs_iteration_opt_blocks_of_plan_size():
    res, method, target = run_fake(chameleon_cfg(sampling="greedy", **SMALL), 1, 500)
    assert len(res.measurements) == 5 * 16 and res.stop_reason == "exhausted"
    assert [e["n_measured"] for e in method.train_log] == [16, 32, 48, 64, 80]
    assert all(e["search"]["explorer"] == "rl" for e in method.train_log)


def test_same_seed_same_configs():
    runs = [run_fake(chameleon_cfg(**SMALL), 4, 60)[2].measured for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("bad, says", [({"explorer": "ppo"}, "method.explorer='ppo'"),
                                       ({"sampling": "kmeans"}, "method.sampling='kmeans'"),
                                       ({"iteration_opt": 0}, "method.iteration_opt=0"),
                                       ({"k_range": [8, 8]}, "method.k_range"),
                                       ({"threshold_meta": 0.5}, "method.threshold_meta=0.5"),
                                       ({"ppo": {"lr": 1e-3, "width": 3}}, "method.ppo"),
                                       ({"plan_size": 0}, "method.plan_size=0"),
                                       ({"episodes": 3}, "method.episodes is unknown")])
def test_bad_hyperparameters_are_user_errors(bad, says):
    with pytest.raises(UserError, match=says.replace("[", r"\[")):
        make_method(chameleon_cfg(**bad))


def test_a_short_real_run_on_llvm(tiny_cfg):
    from tunebench.harness.experiment import run_experiment

    cfg = tiny_cfg
    cfg.method = ChameleonSettings(plan_size=4, iteration_opt=3, episode_rl=8, step_rl=20, k_range=[2, 4])
    cfg.budget.trials_per_task = 30
    cfg.e2e.enabled = False
    run = MlflowClient(f"sqlite:///{cfg.workdir}/mlflow.db").get_run(run_experiment(cfg))
    assert run.info.status == "FINISHED"
    with open(os.path.join(os.path.dirname(run.data.tags["tunebench.record_file"]), "tasks.json")) as fh:
        (task,) = json.load(fh)
    assert 4 + 2 * 2 <= task["trials"] < 30  # the random iteration, then two samples of at least k=2
    assert task["method_report"]["stop"] == "iteration_opt" and task["check"]["ok"] is True


def test_sample_synthesis_on_a_measured_space_takes_the_nearest_listed_config():
    """A listed (measured) space may not hold the per-knob mode: the valid candidate sharing the most
    knob values with it is taken instead of failing."""
    from tunebench.listed_space import ListedSpace
    from tunebench.methods.tensor_programs.chameleon.sampling import mode_config
    from tunebench.search_space import ChoiceKnob

    knobs = [ChoiceKnob("a", (0, 1)), ChoiceKnob("b", (0, 1)), ChoiceKnob("c", (0, 1))]
    space = ListedSpace(knobs, [[0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 1, 1]])  # (0, 0, 0) is not listed
    assert not space.contains_digits([0, 0, 0])
    assert mode_config(space, [0, 1, 2], set()) == 0  # modes (0, 0, 0): config 0 shares two values, first
    assert mode_config(space, [0, 1, 2, 3], {3}) == 0
    full = ListedSpace(knobs, [[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])
    assert full.digits(mode_config(full, [1, 2, 4], set())) == [0, 0, 0]  # listed: the mode itself
