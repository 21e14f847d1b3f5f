"""A composed or saved config (plain data) as a typed, validated :class:`ExperimentConfig`.

Each group's settings class is found by the option's own identity: a method by ``method.name``
(:data:`~tunebench.methods.METHODS`), a model by ``model.name``
(:data:`~tunebench.datasets.models.MODEL_OPTIONS`), a target by ``target.kind``
(:data:`~tunebench.targets.TARGETS`). ``budget.method_overrides.<method name>`` is merged into the
method's settings here, so everything below sees the settings a run really uses."""

from __future__ import annotations

from collections.abc import Mapping

from tunebench.config.experiment import ExperimentConfig
from tunebench.config.knobs import short, validate
from tunebench.config.load import config_error, unknown_keys
from tunebench.errors import UserError


def _group(data: Mapping, group: str) -> Mapping:
    node = data.get(group)
    if not isinstance(node, Mapping):
        raise UserError(f"{group}={short(node)}: must be a config group (a mapping)")
    return node


def settings_classes(data: Mapping) -> dict:
    """group -> the settings class (or instance to start from) of the option ``data`` names; a method
    or target from outside tunebench (its ``cls``) is imported and registered first."""
    from tunebench.datasets.models import MODEL_OPTIONS, installed_models
    from tunebench.methods import method_class, plugin_method
    from tunebench.targets import plugin_target, target_class

    method, model, target = _group(data, "method"), _group(data, "model"), _group(data, "target")
    installed_models()
    if model.get("name") not in MODEL_OPTIONS:
        raise UserError(f"model.name={short(model.get('name'))} is unknown; valid: {', '.join(MODEL_OPTIONS)}")
    method_cls = plugin_method(method["cls"], method.get("name")) if method.get("cls") else \
        method_class(method.get("name"))
    target_cls = plugin_target(target["cls"]) if target.get("cls") else target_class(target.get("kind"))
    return {"method": method_cls.Settings, "model": type(MODEL_OPTIONS[model["name"]]), "target": target_cls.Settings}


def with_method_overrides(data: Mapping) -> dict:
    """``data`` with ``budget.method_overrides.<method name>`` merged into ``method`` (deeply)."""
    overrides = (data.get("budget") or {}).get("method_overrides") or {}
    if not isinstance(overrides, Mapping):
        raise UserError(f"budget.method_overrides={short(overrides)}: must map method names to mappings of settings")
    name = _group(data, "method").get("name")
    extra = overrides.get(name)
    if not extra:
        return dict(data)
    if not isinstance(extra, Mapping):
        raise UserError(f"budget.method_overrides.{name}={short(extra)}: must be a mapping of settings")
    return {**data, "method": _deep_merge(data["method"], extra)}


def _deep_merge(base: Mapping, extra: Mapping) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def load_experiment(data: Mapping) -> ExperimentConfig:
    """The typed experiment of ``data`` (a composed config as plain data, or a run's saved
    ``config.yaml``), every value checked (:func:`~tunebench.config.knobs.validate`).

    Raises:
        UserError: the first unknown option or key, or bad value (one line).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    data = with_method_overrides(data)
    classes = settings_classes(data)
    try:
        node = OmegaConf.structured(ExperimentConfig)
        for group, cls in classes.items():
            node[group] = OmegaConf.structured(cls)
        node = OmegaConf.merge(node, data)
        unknown_keys(node)
        cfg = OmegaConf.to_object(node)
    except OmegaConfBaseException as exc:
        raise config_error(exc) from None
    validate(cfg)
    return cfg
