"""benchmarks/glimpse_loo.sh and glimpse_table.py refuse what they cannot do before measuring or writing."""
import os
import subprocess
import sys

from conftest import ROOT


def _sh(args, env=None, **kw):
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}, **kw)


def test_a_variant_this_machine_cannot_run_stops_the_script_before_its_work_dir_exists(tmp_path):
    work = tmp_path / "w"
    res = _sh(["bash", "benchmarks/glimpse_loo.sh", str(work)], env={"MCPUS": "nehalem pentium4", "STAGES": "data"},
              timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: glimpse_loo: target.mcpu='pentium4' is not an LLVM CPU")
    assert "set MCPUS and HOLDOUT" in res.stderr and not work.exists()


def test_the_table_of_a_folder_without_runs_is_one_error_line(tmp_path):
    res = _sh([sys.executable, "benchmarks/glimpse_table.py", str(tmp_path)], timeout=120)
    assert res.returncode == 2 and res.stderr.startswith(f"error: {tmp_path}: no records/") and not res.stdout
