"""benchmarks/glimpse_acq_replay.py: greedy episodes of each model's acquisition on a held-out hardware's pool."""
import os
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tests", "methods"))
import glimpse_acq_replay as gar

from test_glimpse import HELD_OUT, TRAIN_HW, _gflops, _info, _task
from tunebench.methods.tensor_programs.glimpse.blueprint import hardware_of
from tunebench.methods.tensor_programs.glimpse.dataset import group_from_values
from tunebench.methods.tensor_programs.glimpse.train import TrainSettings, _z, prior_logp, train


def _pool(hw, n=20):
    rng = np.random.default_rng(3)
    out = []
    for channels, size in ((64, 56), (128, 28)):
        task = _task(channels, size)
        configs = [task.space.get(i) for i in task.space.sample(rng, n)]
        out.append(group_from_values(hardware_of(_info(*hw).tvm_target),
                                     {"task_id": task.id, "kind": task.kind, "shape": task.shape, "flops": task.flops},
                                     [c.to_dict() for c in configs], [True] * n, [_gflops(hw, c) for c in configs]))
    return out


def test_episodes_start_from_the_prior_s_configs_and_climb_to_the_pool_s_best(tmp_path):
    training = [g for hw in TRAIN_HW for g in _pool(hw, 16)]
    s = TrainSettings(prior_epochs=20, acq_batches=2, acq_episodes=2, steps=4, validity_epochs=2)
    for arm, mode in (("spec", "spec"), ("const", "constant")):
        train(training, TrainSettings(**{**vars(s), "blueprint_mode": mode})).save(str(tmp_path / f"glimpse_{arm}_s0.pt"))
    pool = _pool(HELD_OUT)
    tab = gar.study(pool, [str(tmp_path)], [0], init=4, steps=16, budget=20)
    for arm in gar.ARMS:
        for acq in gar.ACQUISITIONS:
            e = tab[str(tmp_path)][arm][acq]
            (curve,) = e["curve"]
            assert len(curve) == 17 and all(b >= a for a, b in zip(curve, curve[1:]))
            assert curve[-1] == 1.0  # 4 + 16 = every config of the pool seen
            assert e["acquisition_prior"] == "held-out"
    from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel

    model = GlimpseModel.load(str(tmp_path / "glimpse_spec_s0.pt"))
    g = pool[0]
    first = np.argsort(-prior_logp(model, _z(model, g), g.knobs, g.feats, g.digits), kind="stable")[:4]
    want = (g.y[first].max() / g.y.max() + pool[1].y[np.argsort(-prior_logp(
        model, _z(model, pool[1]), pool[1].knobs, pool[1].feats, pool[1].digits), kind="stable")[:4]].max()
        / pool[1].y.max()) / 2
    assert tab[str(tmp_path)]["spec"]["learned"]["curve"][0][0] == pytest.approx(want)
    assert "| held-out | spec | learned |" in gar.markdown(tab, 4, 16)
    with pytest.raises(SystemExit) as exc:  # a pool on hardware the models were trained on is no hold-out
        gar.study(_pool(TRAIN_HW[0]), [str(tmp_path)], [0], init=4, steps=4, budget=20)
    assert exc.value.code == 2


def test_every_hardware_is_left_out_once_with_both_acquisition_priors():
    import types

    groups = [g for hw in TRAIN_HW[:3] for g in _pool(hw, 12)]
    base = TrainSettings(prior_epochs_max=20, prior_check_every=10, acq_batches=2, acq_episodes=2, steps=4,
                         validity_epochs=2)
    a = types.SimpleNamespace(init=4, steps=8, budget=16)
    tab = gar.leave_out_study(groups, [0], a, base=base, log=lambda *_: None)
    assert sorted(tab) == sorted({g.hw.name for g in groups})
    for arms in tab.values():
        assert sorted(arms) == ["const", "spec"]
        for cell in arms.values():
            assert sorted(cell) == ["ei", "learned", "learned-in-sample"]
            assert all(len(c) == 1 and len(c[0]) == 9 and c[0][-1] <= 1.0 for c in cell.values())
            assert cell["ei"][0][0] == cell["learned"][0][0] == cell["learned-in-sample"][0][0]  # one prior
    md = gar.leave_out_markdown(tab, 4, 8)
    assert md.count("| mean |") == 6 and "| after 12 trials |" in md
