"""Every package under src/ is installed: pyproject.toml lists packages by name (tunebench maps to src/)."""

import os
import tomllib

from conftest import ROOT


def test_every_package_of_src_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        listed = set(tomllib.load(fh)["tool"]["setuptools"]["packages"])
    src = os.path.join(ROOT, "src")
    found = {"tunebench" + root[len(src):].replace(os.sep, ".") for root, _, files in os.walk(src)
             if "__init__.py" in files}
    assert found - listed == set(), f"add {sorted(found - listed)} to [tool.setuptools] packages"
    folders = {root for root, dirs, files in os.walk(src) if any(f.endswith(".py") for f in files)}
    no_init = sorted(f for f in folders if not os.path.exists(os.path.join(f, "__init__.py")))
    assert not no_init, f"folders of modules without __init__.py (not installed): {no_init}"
