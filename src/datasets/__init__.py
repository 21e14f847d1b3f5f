"""Workloads: the model zoo, PyTorch -> Relax import, and task extraction.

Public API (imported on first use, so that the light parts, e.g. :mod:`.models`, load without TVM):

- :data:`MODELS`, :func:`build_model`, :func:`layers_model` -- PyTorch models (``zoo``);
- :func:`import_model`, :func:`run_relax`, :class:`ImportedModel` -- fused Relax module
  (``relax_import``);
- :func:`extract_tasks`, :func:`model_tasks` -- :class:`~tunebench.task.Task` lists (``tasks``);
- :data:`~tunebench.datasets.models.MODEL_OPTIONS` -- the ``model`` group's options (``models``).
"""

from importlib import import_module

_WHERE = {"ImportedModel": "relax_import", "import_model": "relax_import", "make_target": "relax_import",
          "run_relax": "relax_import", "extract_tasks": "tasks", "model_tasks": "tasks", "MODELS": "zoo",
          "build_model": "zoo", "layers_model": "zoo"}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"tunebench.datasets.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'tunebench.datasets' has no attribute {name!r}")


__all__ = sorted(_WHERE)
