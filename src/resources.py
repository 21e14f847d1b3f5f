"""Files shipped with tunebench: the Hydra config tree (``conf/``) and the FPGA design-space tables
(``data/fpga/``).

A regular ``pip install .`` installs them as package data (packages ``tunebench.conf`` and
``tunebench.data``); in a source checkout or an editable install they are the repository's own
``conf/`` and ``data/`` folders beside ``src/``.
"""

from __future__ import annotations

import os
from importlib import resources

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository, when run from it


def _shipped(package: str, folder: str) -> str:
    try:
        return str(resources.files(package))
    except ModuleNotFoundError:  # a source checkout / editable install: the folder beside src/
        path = os.path.join(_CHECKOUT, folder)
        if not os.path.isdir(path):
            raise
        return path


def conf_dir() -> str:
    """The folder of ``config.yaml`` and the config groups (method/, model/, target/, budget/)."""
    return _shipped("tunebench.conf", "conf")


def data_dir(*parts: str) -> str:
    """A folder of shipped data, e.g. ``data_dir("fpga")`` for the FPGA tables."""
    return os.path.join(_shipped("tunebench.data", "data"), *parts)
