"""The config groups, registered with Hydra's ConfigStore: the experiment's schema and one option per
registered method, model and target (their settings classes), so that ``method=autotvm`` composes
:class:`~tunebench.methods.tensor_programs.autotvm.settings.AutoTVMSettings` with its defaults and Hydra checks the
type of every override. YAML options in ``conf/<group>/`` (the budget presets, a user's own options)
sit beside them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from omegaconf import MISSING

from tunebench.config.experiment import ExperimentConfig
from tunebench.config.knobs import knob
from tunebench.resources import conf_dir

CONF_DIR = conf_dir()
GROUPS = ("method", "model", "target", "budget")  # the config groups chosen by name (method=..., ...)
SCHEMA = "tunebench_schema"  # the experiment's schema, first in conf/config.yaml's defaults list


@dataclass
class ComposedExperiment(ExperimentConfig):
    """The schema Hydra composes with: the experiment, with the method and target groups open to an
    option from outside tunebench (a YAML whose ``cls`` names the class: its settings type it when the
    config is loaded, :mod:`tunebench.harness.setup.load`). Registered options keep their own types,
    so Hydra checks every override of theirs."""

    method: Any = knob(MISSING, None, "the tuning method (method=<name>)")
    target: Any = knob(MISSING, None, "where configs are measured (target=<name>)")


def registered_options() -> dict[str, dict[str, object]]:
    """group -> option name -> its settings class or instance (methods, models, targets), installed
    packages' entry points included (``tunebench.methods``, ``tunebench.targets``, ``tunebench.models``)."""
    from tunebench import methods, targets
    from tunebench.datasets.models import MODEL_OPTIONS, installed_models

    methods.installed_methods(), targets.installed_targets(), installed_models()
    return {"method": {name: cls.Settings(name=name) for name, cls in methods.METHODS.items()
                       if name not in methods.FROM_YAML},
            "model": dict(MODEL_OPTIONS),
            "target": {cls.Settings().name: cls.Settings for kind, cls in targets.TARGETS.items()
                       if kind not in targets.FROM_YAML}}


def builtin_options(group: str, conf: str = CONF_DIR) -> set[str]:
    """The options tunebench itself ships in ``group``: :func:`group_options` without those installed
    packages add (their entry points) and those from ``hydra.searchpath`` YAML."""
    from importlib.metadata import entry_points

    from tunebench.config.plugins import GROUPS as ENTRY_POINT_GROUPS

    installed = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUPS[group])} if group in ENTRY_POINT_GROUPS \
        else set()
    return set(group_options(group, conf)) - installed


def failed_options(group: str) -> dict[str, str]:
    """option name -> why its installed package's entry point did not load (one line)."""
    from tunebench.methods import installed_methods
    from tunebench.targets import installed_targets

    loaders = {"method": installed_methods, "target": installed_targets}
    return loaders[group]().failed if group in loaders else {}


def register_configs(conf: str = CONF_DIR) -> None:
    """Store the schema and every registered option (idempotent). A YAML option of the same name in
    ``conf/<group>/`` takes precedence over the registered one (it is not stored)."""
    from hydra.core.config_store import ConfigStore

    from tunebench.harness.launch.ray import RaySettings

    store = ConfigStore.instance()
    store.store(name=SCHEMA, node=ComposedExperiment)
    store.store(group="hydra/launcher", name="tunebench_ray", node=RaySettings, package="hydra.launcher")
    for group, options in registered_options().items():
        for name, node in options.items():
            if not os.path.isfile(os.path.join(conf, group, f"{name}.yaml")):
                store.store(group=group, name=name, node=node)


def group_options(group: str, conf: str = CONF_DIR, search: tuple[str, ...] = ()) -> list[str]:
    """The options of a config group: its registered settings and the YAML files in ``conf/<group>/``
    and in each folder of ``search`` (``hydra.searchpath``)."""
    files = set()
    for root in (conf, *search):
        folder = os.path.join(root, group)
        files |= {f[:-5] for f in os.listdir(folder) if f.endswith(".yaml")} if os.path.isdir(folder) else set()
    return sorted(files | set(registered_options().get(group, {})))
