"""benchmarks/glimpse_prior_loo.py: H left out one hardware at a time, at the chosen and at fixed epochs."""
import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "tests", "methods"))
import glimpse_prior_loo as gpl

from test_glimpse import _groups
from tunebench.methods.tensor_programs.glimpse.train import TrainSettings


def test_every_hardware_is_left_out_once_and_scored_where_it_was_chosen():
    groups = _groups(n_configs=12)
    base = TrainSettings(prior_epochs_max=20, prior_check_every=10)
    tab = gpl.study(groups, seeds=[0], fixed=[10, 20], base=base, log=lambda *_: None)
    assert sorted(tab) == sorted({g.hw.name for g in groups})
    for hw, row in tab.items():
        assert row["layers"] == sum(g.hw.name == hw for g in groups)
        for mode in gpl.MODES:
            (r,) = row[mode]
            assert r["chosen_epochs"] in (10, 20)
            assert r["chosen"] == r["fixed"][str(r["chosen_epochs"])]  # the same training run, scored once
    md = gpl.markdown(tab, [10, 20])
    assert md.count("\n| ") == len(tab) and "Blueprint lower on" in md
