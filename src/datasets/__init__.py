"""Workloads: the model zoo, PyTorch -> Relax import, and task extraction.

Public API:

- :data:`MODELS`, :func:`build_model`, :func:`layers_model` -- PyTorch models (``zoo``);
- :func:`import_model`, :func:`run_relax`, :class:`ImportedModel` -- fused Relax module
  (``relax_import``);
- :func:`extract_tasks`, :func:`model_tasks` -- :class:`~tunebench.task.Task` lists (``tasks``).
"""

from tunebench.datasets.relax_import import ImportedModel, import_model, make_target, run_relax
from tunebench.datasets.tasks import extract_tasks, model_tasks
from tunebench.datasets.zoo import MODELS, build_model, layers_model

__all__ = ["MODELS", "build_model", "layers_model", "import_model", "run_relax", "ImportedModel",
           "make_target", "extract_tasks", "model_tasks"]
