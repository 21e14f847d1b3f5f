"""Classes from outside tunebench: a ``cls: package.module:Class`` in a config option, and installed
packages' entry points (groups ``tunebench.methods``, ``tunebench.targets``, ``tunebench.models``).

Loading one runs the user's own code, by design: they named it. A class that does not import is one
``error:`` line when a run asks for it; an entry point that does not import is one warning line and
leaves every other option usable.
"""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import dataclass, field
from functools import cache

from tunebench.config.knobs import short
from tunebench.errors import UserError

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
PATH_FORM = "package.module:Class"
GROUPS = {"method": "tunebench.methods", "target": "tunebench.targets",
          "model": "tunebench.models"}  # config group -> entry point group


def is_import_path(value) -> bool:
    return isinstance(value, str) and bool(IMPORT_PATH.match(value))


def load_object(path: str, key: str):
    """The object ``path`` (``package.module:Name``) names; ``key`` is the setting that gave it.

    Raises:
        UserError: a malformed path, a module that does not import (with its first error line), a
            missing name.
    """
    if not is_import_path(path):
        raise UserError(f"{key}={short(path)}: must be an import path {PATH_FORM}")
    module_name, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any error of it is theirs to see, in one line
        raise UserError(f"{key}={path}: module {module_name!r} does not import: {_first_line(exc)}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{key}={path}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_class(path: str, key: str, base: type):
    """The class ``path`` names, which must subclass ``base``."""
    obj = load_object(path, key)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise UserError(f"{key}={path}: {short(obj)} is not a subclass of {base.__module__}.{base.__name__}")
    return obj


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass
class EntryPoints:
    """An entry point group's classes: ``loaded`` (name -> class), ``failed`` (name -> the reason)."""

    loaded: dict[str, type] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


@cache
def entry_point_classes(group: str, base: type) -> EntryPoints:
    """Every entry point of ``group`` (``tunebench.methods``, ...) that loads a subclass of ``base``;
    the others are in ``failed``, each reported once on stderr as a one-line warning."""
    from importlib.metadata import entry_points

    out = EntryPoints()
    for ep in entry_points(group=group):
        try:
            out.loaded[ep.name] = load_class(ep.value, f"entry point {group}:{ep.name}", base)
        except UserError as exc:
            out.failed[ep.name] = str(exc)
            print(f"warning: {exc}; {ep.name} is not available", file=sys.stderr, flush=True)
    return out


def install(group: str, base: type, register) -> EntryPoints:
    """The entry points of ``group`` (:func:`entry_point_classes`), each loaded class given to
    ``register(name, cls)``; one that ``register`` refuses (a :class:`UserError`: a name taken) moves to
    ``failed``, with a one-line warning."""
    found = entry_point_classes(group, base)
    for name, cls in list(found.loaded.items()):
        try:
            register(name, cls)
        except UserError as exc:
            found.failed[name] = str(exc)
            del found.loaded[name]
            print(f"warning: entry point {group}:{name}: {exc}; {name} is not available", file=sys.stderr, flush=True)
    return found
