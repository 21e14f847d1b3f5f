"""Workloads: the model zoo, the ``model`` group's settings, layer specs, single operators, FPGA kernel
spaces, graphs of operations and measured spaces. Nothing here imports a backend: a target turns a model
into its tasks in its own package (TVM: :mod:`tunebench.targets.tvm.workloads`).

Public API (imported on first use, so that the light parts, e.g. :mod:`.models`, load without PyTorch):

- :data:`MODELS`, :func:`build_model`, :func:`layers_model` -- PyTorch models (``zoo``);
- :data:`~tunebench.datasets.models.MODEL_OPTIONS` -- the ``model`` group's options (``models``).
"""

from importlib import import_module

_WHERE = {"MODELS": "zoo", "build_model": "zoo", "layers_model": "zoo"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"tunebench.datasets.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'tunebench.datasets' has no attribute {name!r}")


__all__ = sorted(_WHERE)
