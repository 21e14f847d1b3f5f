"""From composed (or saved) config data to typed settings objects, with one-line errors.

OmegaConf does the typing: a settings dataclass becomes a structured config, data is merged into it
(a value of the wrong type or an unknown key fails), and :func:`OmegaConf.to_object` builds the
dataclass instances. This module turns OmegaConf's exceptions into :class:`UserError` s that name the
dotted key, the value and what is valid, and rejects keys a structured node does not declare (Hydra
adds ``+key=value`` overrides to structured nodes without complaint).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunebench.config.knobs import join, short, validate
from tunebench.errors import UserError

#: field names whose value is an open mapping by design (any key goes): a budget's per-method
#: overrides, a library's parameter dict, ... A settings class lists its own in ``OPEN_KEYS``.
OPEN = "OPEN_KEYS"


def _expected(exc) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    for marker, what in (("Dict[", "must be a mapping"), ("List[", "must be a list"),
                         ("to Integer", "must be an integer"), ("to Float", "must be a number"),
                         ("valid bool", "must be true or false"), ("to String", "must be a string"),
                         ("to string", "must be a string"), ("ListConfig", "must be a list"),
                         ("DictConfig", "must be a mapping")):
        if marker in text:
            return what
    return text or type(exc).__name__


def config_error(exc, prefix: str = "") -> UserError:
    """One line for an OmegaConf error: ``key=value: must be ...`` or ``key is unknown: ...``."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    key = join(prefix, str(getattr(exc, "full_key", "") or ""))
    if isinstance(exc, (ConfigKeyError, ConfigAttributeError)):
        return UserError(f"{key} is unknown{_valid_keys(exc)}")
    if isinstance(exc, ValidationError):
        return UserError(f"{key}={short(getattr(exc, 'value', None))}: {_expected(exc)}")
    return UserError(f"{key}: {str(exc).splitlines()[0]}")


def _valid_keys(exc) -> str:
    obj_type = getattr(exc, "object_type", None)
    if obj_type is not None and dataclasses.is_dataclass(obj_type):
        return "; valid: " + ", ".join(f.name for f in dataclasses.fields(obj_type))
    return ""


def unknown_keys(node, prefix: str = "") -> None:
    """Raise :class:`UserError` for a key of a structured node that its dataclass does not declare
    (nested nodes too; the fields of :data:`OPEN` are not looked into)."""
    from omegaconf import DictConfig, OmegaConf

    obj_type = OmegaConf.get_type(node)
    fields = {f.name for f in dataclasses.fields(obj_type)} if dataclasses.is_dataclass(obj_type) else None
    open_keys = set(getattr(obj_type, OPEN, ()))
    for key in node.keys():
        if fields is not None and key not in fields:
            where = prefix or "the config"
            raise UserError(f"{join(prefix, str(key))} is unknown: {where} has no key {str(key)!r}; "
                            f"valid: {', '.join(sorted(fields))}")
        child = node._get_node(key)
        if isinstance(child, DictConfig) and key not in open_keys and not child._is_missing() \
                and not child._is_none():
            unknown_keys(child, join(prefix, str(key)))


def typed(cls, data: Any = None, prefix: str = ""):
    """An instance of the settings dataclass ``cls`` from ``data`` (a dict, a DictConfig or None: the
    defaults), type-checked, free of unknown keys and validated (:func:`~tunebench.config.knobs.validate`).

    Raises:
        UserError: the first bad value or unknown key, named with ``prefix``.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        node = OmegaConf.structured(cls)
        if data is not None:
            node = OmegaConf.merge(node, data)
        unknown_keys(node, prefix)
        obj = OmegaConf.to_object(node)
    except OmegaConfBaseException as exc:
        raise config_error(exc, prefix) from None
    validate(obj, prefix)
    return obj


def plain(obj) -> Any:
    """A settings object (or anything holding them) as plain data: dicts, lists, scalars (what a run's
    ``config.yaml`` and its MLflow params hold)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def with_overrides(cls, base, overrides: dict, prefix: str):
    """``base`` (an instance of the settings class ``cls``, or None: its defaults) with ``overrides``
    (field name -> value) applied, validated. A mapping given for a nested settings field (chameleon's
    ``ppo=dict(lr=...)``) is typed onto that field's current value, its keys replacing those values. An
    unknown name or a bad value raises :class:`UserError`."""
    obj = base if base is not None else cls()
    if not isinstance(obj, cls):
        raise UserError(f"{prefix}: settings of type {type(obj).__name__}, expected {cls.__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    for key in overrides:
        if key not in names:
            raise UserError(f"{join(prefix, key)} is unknown; valid: {', '.join(names)}")
    overrides = {key: _nested(getattr(obj, key), value, join(prefix, key)) for key, value in overrides.items()}
    obj = dataclasses.replace(obj, **overrides) if overrides else obj
    validate(obj, prefix)
    return obj


_NOTHING = object()


def dotted_get(obj, dotted: str, default=_NOTHING):
    """``obj.a.b`` for ``"a.b"`` (attributes of settings objects, keys of mappings); ``default`` when a
    part is missing (``KeyError`` without one)."""
    for part in dotted.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            obj = getattr(obj, part)
        elif default is _NOTHING:
            raise KeyError(dotted)
        else:
            return default
    return obj


def dotted_set(obj, dotted: str, value) -> None:
    """Set ``obj.a.b = value`` for ``"a.b"`` (settings objects are mutable dataclasses)."""
    *parents, last = dotted.split(".")
    for part in parents:
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    if isinstance(obj, dict):
        obj[last] = value
    else:
        setattr(obj, last, value)


def _nested(current, value, prefix: str):
    """``value`` for a field holding ``current``: a mapping for a nested settings object becomes one."""
    if dataclasses.is_dataclass(current) and not isinstance(current, type) and isinstance(value, Mapping):
        return typed(type(current), {**plain(current), **value}, prefix)
    return value


@dataclass(frozen=True)
class SavedRun:
    """What tools that read finished runs need of a run's saved ``config.yaml`` (any tunebench
    version's): the option names, the target's kind, the seed and the model's own config."""

    method: str
    model: str
    target: str
    target_kind: str
    seed: int | None
    model_config: dict

    @classmethod
    def read(cls, saved: Mapping) -> SavedRun:
        method, model, target = (saved.get(g) or {} for g in ("method", "model", "target"))
        return cls(method=str(method.get("name")), model=str(model.get("name")), target=str(target.get("name")),
                   target_kind=str(target.get("kind") or target.get("name")), seed=saved.get("seed"),
                   model_config=dict(model))
