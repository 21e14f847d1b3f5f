"""method=glimpse: Blueprint, prior, trained parts, bad input, and a synthetic multi-hardware space."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunebench.config.experiment import Budget
from tunebench.errors import UserError
from tunebench.methods.random_search import RandomSearch
from tunebench.methods.tensor_programs.glimpse.blueprint import PCA, catalogue, hardware_of, reconstruction_rmse
from tunebench.methods.tensor_programs.glimpse.cpu_specs import catalogue_features, cpu_features
from tunebench.methods.tensor_programs.glimpse.dataset import group_from_values
from tunebench.methods.tensor_programs.glimpse.method import Glimpse, beam_configs
from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel
from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, prior_cross_entropy, train, train_prior
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.targets.base import TargetInfo
from tunebench.task import Measurement, Task

TRAIN_HW = [("nehalem", 1), ("nehalem", 2), ("haswell", 1), ("skylake-avx512", 1), ("skylake-avx512", 2)]
HELD_OUT = ("haswell", 2)
LAYERS = [(64, 56), (128, 28), (256, 14), (32, 112)]


def _info(mcpu: str, threads: int) -> TargetInfo:
    return TargetInfo(kind="llvm", name="llvm", device_name="test cpu",
                      tvm_target={"kind": "llvm", "mcpu": mcpu, "num-cores": threads})


def _task(channels: int, size: int) -> Task:
    space = Space([SplitKnob("tile_oc", channels, 2), SplitKnob("tile_ow", size, 2), ChoiceKnob("unroll_kw", (0, 1))])
    shape = {"batch": 1, "in_channels": channels, "out_channels": channels, "height": size, "width": size,
             "kernel": 3, "stride": 1, "padding": 1, "groups": 1}
    return Task(f"t{channels}x{size}", f"conv{channels}", "conv2d", None, shape, 2 * 9 * channels**2 * size**2,
                space=space)


def _gflops(hw: tuple[str, int], config) -> float:
    """A synthetic landscape whose optimum moves with the hardware: the inner output-channel tile wants the
    vector lanes (SSE 4, AVX 8, AVX-512 16), the inner width tile 4 per thread; unrolling helps with FMA."""
    lanes = {"nehalem": 4, "haswell": 8, "skylake-avx512": 16}[hw[0]]
    oc, ow = config["tile_oc"][1], config["tile_ow"][1]
    g = math.exp(-0.5 * (math.log2(oc / lanes)) ** 2) * math.exp(-0.3 * (math.log2(ow / (4 * hw[1]))) ** 2)
    return 100.0 * g * (1.1 if config["unroll_kw"] and hw[0] != "nehalem" else 1.0)


def _measure(task: Task, hw, configs) -> list[Measurement]:
    out = []
    for c in configs:
        g = _gflops(hw, c)
        out.append(Measurement.timed(task.id, c, task.flops / g / 1e9, gflops=g))
    return out


def _groups(n_configs: int = 24, seed: int = 0):
    rng = np.random.default_rng(seed)
    groups = []
    for hw in TRAIN_HW:
        for channels, size in LAYERS:
            task = _task(channels, size)
            idx = task.space.sample(rng, n_configs)
            configs = [task.space.get(i) for i in idx]
            g = group_from_values(hardware_of(_info(*hw).tvm_target),
                                  {"task_id": task.id, "kind": task.kind, "shape": task.shape, "flops": task.flops},
                                  [c.to_dict() for c in configs], [True] * len(configs),
                                  [_gflops(hw, c) for c in configs])
            groups.append(g)
    return groups


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    s = TrainSettings(prior_epochs=150, acq_batches=20, acq_episodes=4, steps=8, validity_epochs=10)
    model = train(_groups(), s)
    path = str(tmp_path_factory.mktemp("glimpse") / "model.pt")
    model.save(path)
    return path


def test_blueprints_of_two_variants_differ_and_are_deterministic():
    a, b = cpu_features("haswell", 2), cpu_features("nehalem", 2)
    assert not np.allclose(a, b)
    assert np.array_equal(a, cpu_features("haswell", 2))
    assert not np.allclose(cpu_features("haswell", 1), a)  # threads are hardware too
    pca = PCA.fit(catalogue_features())
    assert np.array_equal(pca.transform(a), PCA.fit(catalogue_features()).transform(a))
    rmse = reconstruction_rmse(catalogue_features())
    assert rmse[0] > rmse[2] > rmse[-1] and rmse[-1] < 1e-9


def test_unknown_mcpu_has_no_blueprint():
    with pytest.raises(UserError, match="target.mcpu='not-a-cpu'"):
        cpu_features("not-a-cpu", 1)


def test_beam_finds_the_most_probable_combinations():
    logp = [np.log([0.1, 0.6, 0.3]), np.log([0.7, 0.3])]
    best = beam_configs(logp, 3)
    assert [d for _, d in best] == [(1, 0), (2, 0), (1, 1)]


def test_prior_samples_only_valid_knob_values(trained):
    task = _task(64, 56)
    m = Glimpse(pretrained=trained, init_samples=8)
    m.setup(task, _info(*HELD_OUT), None, Budget(trials_per_task=16), np.random.default_rng(0))
    configs = m.ask(8)
    assert len(configs) == 8 and len({c.index for c in configs}) == 8
    for c in configs:
        for knob, value in zip(task.space.knobs, c.values):
            assert value in knob.entities
        assert math.prod(c["tile_oc"]) == 64 and math.prod(c["tile_ow"]) == 56
    assert all(m.source[c.index] == "prior" for c in configs)


def test_trained_parts_load_and_round_trip(trained, tmp_path):
    a = GlimpseModel.load(trained)
    path = str(tmp_path / "again.pt")
    a.save(path)
    b = GlimpseModel.load(path)
    for part in ("prior", "acquisition", "validity"):
        sa, sb = getattr(a, part).state_dict(), getattr(b, part).state_dict()
        assert sa.keys() == sb.keys() and all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)
    hw = hardware_of(_info(*HELD_OUT).tvm_target)
    assert np.array_equal(a.theta(hw), b.theta(hw)) and a.theta(hw).shape == (a.theta_dim,)
    assert a.knob_dims == {"tile_oc": 6, "tile_ow": 6, "unroll_kw": 2}


def test_missing_corrupt_and_foreign_pretrained_files_are_refused(trained, tmp_path):
    with pytest.raises(UserError, match="method.pretrained=.*no such file.*glimpse train"):
        Glimpse(pretrained=str(tmp_path / "none.pt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(UserError, match="method.pretrained=.*not a model of"):
        Glimpse(pretrained=str(bad))
    other = Task("x", "dense", "dense", None, {"batch": 1, "in_features": 64, "out_features": 64}, 8192,
                 space=Space([SplitKnob("tile_y", 64, 3), SplitKnob("tile_k", 64, 2)]))
    problem = Glimpse(pretrained=trained).check_task(other, _info(*HELD_OUT))
    assert "was trained for other knobs" in problem and "tile_y(9)" in problem
    assert Glimpse(pretrained=trained).check_task(_task(64, 56), _info(*HELD_OUT)) is None
    gpu = TargetInfo(kind="cuda", name="cuda", device_name="no such gpu", tvm_target={"kind": "cuda"})
    assert "no datasheet" in Glimpse(pretrained=trained).check_task(_task(64, 56), gpu)


def test_the_blueprint_knob_must_match_how_the_model_was_trained(trained):
    """``method.blueprint`` is checked against the model's Blueprint mode: a spec model under
    ``blueprint=constant`` (and constant without a model) is refused with one line naming both."""
    from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel

    assert GlimpseModel.load(trained).blueprint_mode == "spec"
    assert Glimpse(pretrained=trained, blueprint="spec").settings.blueprint == "spec"
    with pytest.raises(UserError, match=r"method.pretrained=.*trained without --constant-blueprint.*"
                                        r"not for method.blueprint=constant; set method.blueprint=spec"):
        Glimpse(pretrained=trained, blueprint="constant")
    with pytest.raises(UserError, match=r"method.blueprint=constant needs method.pretrained"):
        Glimpse(blueprint="constant")


def _best_after(method, task, hw, trials: int, seed: int) -> float:
    method.setup(task, _info(*hw), None, Budget(trials_per_task=trials), np.random.default_rng(seed))
    best, n = 0.0, 0
    while n < trials:
        configs = method.ask(min(4, trials - n))
        if not configs:
            break
        ms = _measure(task, hw, configs)
        method.tell(ms)
        best = max([best] + [m.gflops for m in ms])
        n += len(configs)
    return best


def test_glimpse_beats_random_on_a_held_out_synthetic_hardware(trained):
    task = _task(128, 56)
    g = [_best_after(Glimpse(pretrained=trained, sa_n_iter=50), task, HELD_OUT, 12, s) for s in range(5)]
    r = [_best_after(RandomSearch(), task, HELD_OUT, 12, s) for s in range(5)]
    assert np.mean(g) > np.mean(r) and min(g) >= np.median(r), (g, r)


def test_a_model_for_other_knobs_is_refused_before_the_run(trained, tmp_path):
    import os
    import subprocess
    import sys

    run_py = os.path.join(os.path.dirname(__file__), "..", "..", "run.py")
    proc = subprocess.run([sys.executable, run_py, "method=glimpse", f"method.pretrained={trained}",
                           "model.layers=[{in_features:64,out_features:32}]", "progress=false"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and not ln.startswith("[")]
    assert proc.returncode == 2 and len(lines) == 1, lines[-10:]  # [...] lines: the log of the model's import
    assert lines[0].startswith("error: method.pretrained=") and "was trained for other knobs" in lines[0]
    assert sorted(p for p in os.listdir(tmp_path) if p != "outputs") == []


def test_the_prior_fits_a_held_out_hardware_better_than_a_uniform_prior(trained):
    from tunebench.methods.tensor_programs.glimpse.train import prior_cross_entropy, prior_targets

    task = _task(128, 56)
    rng = np.random.default_rng(7)
    configs = [task.space.get(i) for i in task.space.sample(rng, 48)]
    g = group_from_values(hardware_of(_info(*HELD_OUT).tvm_target),
                          {"task_id": task.id, "kind": task.kind, "shape": task.shape, "flops": task.flops},
                          [c.to_dict() for c in configs], [True] * len(configs), [_gflops(HELD_OUT, c) for c in configs])
    uniform = sum(-(t * np.log(1.0 / len(t))).sum() for t in prior_targets(g, 0.1))
    model = GlimpseModel.load(trained)
    assert prior_cross_entropy(model, g) < 0.9 * uniform, (prior_cross_entropy(model, g), uniform)


def test_h_epochs_are_chosen_on_the_hardware_left_out():
    """With no fixed epoch count, H's is the checked count with the lowest cross-entropy on the hardware left
    out, averaged over the hardware; the curve is what training on the others and scoring the one gives."""
    import torch

    groups = _groups(n_configs=16)
    s = TrainSettings(prior_epochs=None, prior_epochs_max=30, prior_check_every=10, acq_batches=2, acq_episodes=2,
                      steps=4, validity_epochs=2)
    info = train(groups, s).info
    choice = info["prior_epochs_choice"]
    assert choice["checked"] == [10, 20, 30] and len(choice["loss"]) == 3
    assert info["prior_epochs"] == choice["checked"][int(np.argmin(choice["loss"]))]
    knobs = {n: f.shape[1] for g in groups for n, f in zip(g.knobs, g.feats)}
    per_hw = []
    for hw in sorted({g.hw.name for g in groups}):
        torch.manual_seed(s.seed)
        model = GlimpseModel({"cpu": PCA.fit(catalogue("cpu")[1])}, s.dims, "spec", knobs, knobs)
        train_prior(model, [g for g in groups if g.hw.name != hw], s, epochs=20)
        per_hw.append(np.mean([prior_cross_entropy(model, g) for g in groups if g.hw.name == hw]))
    assert choice["loss"][1] == pytest.approx(np.mean(per_hw), rel=1e-5)
    one = [g for g in groups if g.hw.name == groups[0].hw.name]
    alone = train(one, s).info
    assert alone["prior_epochs"] == 30 and alone["prior_epochs_choice"] == {}


def test_the_acquisition_trains_on_the_prior_of_h_without_the_episodes_hardware():
    """Each group's held-out log p is that of H trained on the other hardware only; train() feeds those to the
    acquisition (its weights differ from training on H's own prior; H itself is the same)."""
    import torch

    from tunebench.methods.tensor_programs.glimpse.train import held_out_priors, model_factory, prior_logp

    groups = _groups(n_configs=16)
    s = TrainSettings(prior_epochs=20, acq_batches=3, acq_episodes=2, steps=4, validity_epochs=2)
    held = held_out_priors(model_factory(groups, s), groups, s, [10, 20])
    hw = groups[0].hw.name
    torch.manual_seed(s.seed)
    model = model_factory(groups, s)()
    train_prior(model, [g for g in groups if g.hw.name != hw], s, epochs=20)
    for i, g in enumerate(groups):
        if g.hw.name == hw:
            want = prior_logp(model, model.z(g.kind, g.shape, g.flops, g.hw), g.knobs, g.feats, g.digits)
            assert np.allclose(held.at(20)[i], want, atol=1e-5)
    assert all(lp is not None for lp in held.at(10)) and not np.allclose(held.at(10)[0], held.at(20)[0])
    a, b = train(groups, s), train(groups, TrainSettings(**{**vars(s), "acq_prior": "in-sample"}))
    assert (a.info["acquisition_prior"], b.info["acquisition_prior"]) == ("held-out", "in-sample")
    for part, same in (("prior", True), ("acquisition", False)):
        sa, sb = getattr(a, part).state_dict(), getattr(b, part).state_dict()
        assert all(torch.equal(sa[k], sb[k]) for k in sa) == same, part
    assert held_out_priors(model_factory(groups[:4], s), groups[:4], s, [10]) is None  # one hardware
