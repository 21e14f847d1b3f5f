"""``hydra/launcher=tunebench_ray``: every job of a ``run.py -m`` sweep as one Ray task.

The work is done in :mod:`tunebench.harness.launch.ray`; this class only adapts it to Hydra's
``Launcher`` interface (Hydra instantiates launchers from the ``hydra_plugins`` namespace only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class RayLauncher(Launcher):
    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from tunebench.harness.launch.ray import launch

        return launch(self.settings, self.hydra_context, self.task_function, self.config,
                      job_overrides, initial_job_idx)
