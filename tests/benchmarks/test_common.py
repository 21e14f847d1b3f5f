"""The provenance every benchmark result file carries (benchmarks/_common.py): machine and commit."""

import os
import sys

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import _common


def test_machine_info_and_provenance_name_the_machine_and_commit():
    info, prov = _common.machine_info(), _common.provenance()
    assert info["cores"] == os.cpu_count() and info["cpu"] and info["tvm"] and info["torch"]
    assert prov["git_commit"] and prov["date"]
