"""`make bench`'s verdict: a failed overhead threshold on a noisy machine blames the machine, not the harness."""
import os
import sys

import pytest

from conftest import ROOT
from tunebench.protocol.noise import NoisePolicy

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import harness_overhead as ho


def out(share: float) -> dict:
    return {"harness_overhead_share": share, "protocol_share": 0.1, "build_share": 0.3, "run_share": 0.5,
            "check_share": 0.0, "trials_per_minute": 100.0, "loadavg_before": [3.9], "loadavg_after": [4.1],
            "accounted_share": 0.9}


@pytest.mark.parametrize("share, noisy, code", [(0.01, False, 0), (0.01, True, 0), (0.15, False, 1), (0.15, True, 3)])
def test_overhead_verdict_and_exit_code(share, noisy, code, capsys):
    metrics = {"n_noisy_tasks": 1 if noisy else 0, "n_noisy_measurements": 0, "calib_max_slowdown": 1.0}
    _, reasons = ho.noise_evidence(metrics, NoisePolicy(), lock_wait_share=0.0)
    assert ho.verdict(out(share), reasons) == code
    err = capsys.readouterr().err
    assert ("NOISY MACHINE" in err) == (code == 3) and ("DEFECT" in err) == (code == 1)


def test_noise_evidence_names_each_signal():
    metrics = {"n_noisy_tasks": 2, "n_noisy_measurements": 5, "calib_max_slowdown": 3.5}
    ev, reasons = ho.noise_evidence(metrics, NoisePolicy(), lock_wait_share=0.05)
    assert ev["calib_max_slowdown"] == 3.5 and len(reasons) == 4
    assert ho.noise_evidence({"calib_max_slowdown": 1.1}, NoisePolicy(), 0.0)[1] == []
