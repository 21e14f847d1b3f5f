"""The config groups, registered with Hydra's ConfigStore: the experiment's schema and one option per
registered method, model and target (their settings classes), so that ``method=autotvm`` composes
:class:`~tunebench.methods.autotvm.settings.AutoTVMSettings` with its defaults and Hydra checks the
type of every override. YAML options in ``conf/<group>/`` (the budget presets, a user's own options)
sit beside them."""

from __future__ import annotations

import os

from tunebench.config.experiment import ExperimentConfig
from tunebench.resources import conf_dir

CONF_DIR = conf_dir()
GROUPS = ("method", "model", "target", "budget")  # the config groups chosen by name (method=..., ...)
SCHEMA = "tunebench_schema"  # the experiment's schema, first in conf/config.yaml's defaults list


def registered_options() -> dict[str, dict[str, object]]:
    """group -> option name -> its settings class or instance (methods, models, targets)."""
    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.methods import METHODS
    from tunebench.targets import TARGETS

    return {"method": {name: cls.Settings for name, cls in METHODS.items()},
            "model": dict(MODEL_OPTIONS),
            "target": {cls.Settings().name: cls.Settings for cls in TARGETS.values()}}


def register_configs(conf: str = CONF_DIR) -> None:
    """Store the schema and every registered option (idempotent). A YAML option of the same name in
    ``conf/<group>/`` takes precedence over the registered one (it is not stored)."""
    from hydra.core.config_store import ConfigStore

    from tunebench.harness.launch.ray import RaySettings

    store = ConfigStore.instance()
    store.store(name=SCHEMA, node=ExperimentConfig)
    store.store(group="hydra/launcher", name="tunebench_ray", node=RaySettings, package="hydra.launcher")
    for group, options in registered_options().items():
        for name, node in options.items():
            if not os.path.isfile(os.path.join(conf, group, f"{name}.yaml")):
                store.store(group=group, name=name, node=node)


def group_options(group: str, conf: str = CONF_DIR) -> list[str]:
    """The options of a config group: its registered settings and the YAML files in ``conf/<group>/``."""
    folder = os.path.join(conf, group)
    files = [f[:-5] for f in os.listdir(folder) if f.endswith(".yaml")] if os.path.isdir(folder) else []
    return sorted(set(files) | set(registered_options().get(group, {})))
