"""Declaring a knob once: its type, default, check and documentation on one dataclass field.

Every settings class of tunebench (the harness's ``budget``, ``measure``, ``e2e``, ``tracking``; each
target's, model's and method's knobs) is a dataclass deriving from :class:`Settings` whose fields are
made with :func:`knob`::

    @dataclass
    class AutoTVMSettings(MethodSettings):
        plan_size: int = knob(64, POS_INT, "[Ahn-PhD] Table 2.3 (b_GBT = 64): retrain + replan every 64")

OmegaConf checks the type (and rejects unknown keys) when a config is composed; :func:`validate` then
applies each field's check and the class's cross-key rules (:meth:`Settings.check`), raising one
:class:`~tunebench.errors.UserError` that names the dotted key, the value and what is valid.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field
from typing import Any

from tunebench.errors import UserError

Check = Callable[[Any], "str | None"]  # a value -> what is wrong with it, or None


def knob(default: Any = MISSING, check: Check | None = None, doc: str = "", *,
         factory: Callable[[], Any] | None = None, nonfinite: bool = False) -> Any:
    """A settings field: its ``default`` (a list or dict default is copied per instance), its
    ``check`` (see :func:`rule`) and ``doc``, the line a user reads about it (with its source).

    Every number in a knob's value, nested lists and mappings included, must be finite (``inf``,
    ``nan`` are refused by :func:`validate` before any check runs) unless ``nonfinite`` is set, which
    the knob's ``doc`` must then explain."""
    meta = {"check": check, "doc": doc, "nonfinite": nonfinite}
    if factory is None and isinstance(default, (list, dict)):
        factory = _copier(default)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _copier(value):
    return lambda: copy.deepcopy(value)


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def nonfinite_in(v) -> float | None:
    """The first ``inf`` or ``nan`` anywhere in ``v`` (a number, or lists and mappings of them), else None."""
    if isinstance(v, float):
        return None if math.isfinite(v) else v
    items = v.values() if isinstance(v, dict) else v if isinstance(v, (list, tuple)) else ()
    for item in items:
        found = nonfinite_in(item)
        if found is not None:
            return found
    return None


def rule(test: Callable[[Any], bool], what: str) -> Check:
    """A check from a predicate and the text that says what is valid."""
    return lambda v: None if test(v) else what


def opt(check: Check) -> Check:
    """``check``, or null."""
    def nullable(v):
        problem = None if v is None else check(v)
        return problem and f"{problem} or null"
    return nullable


def choice(*valid) -> Check:
    return rule(lambda v: v in valid, "valid: " + ", ".join(map(str, valid)))


def in_range(lo: float, hi: float) -> Check:
    return rule(lambda v: is_num(v) and lo <= v <= hi, f"must be in [{lo:g}, {hi:g}]")


def bounded(lo: int, hi: int) -> Check:
    """An integer in [lo, hi]: ``hi`` a sane maximum, so that a typo'd size fails before a run."""
    return rule(lambda v: is_int(v) and lo <= v <= hi, f"must be an integer in [{lo}, {hi}]")


def each(check: Check, what: str) -> Check:
    """Every item of a list passes ``check``; ``what`` says what the list must hold."""
    return rule(lambda v: isinstance(v, (list, tuple)) and all(check(x) is None for x in v), what)


POS_INT = rule(lambda v: is_int(v) and v > 0, "must be a positive integer")
NONNEG_INT = rule(lambda v: is_int(v) and v >= 0, "must be an integer >= 0")
POS_NUM = rule(lambda v: is_num(v) and v > 0, "must be a positive number")
NONNEG_NUM = rule(lambda v: is_num(v) and v >= 0, "must be a number >= 0")
NAME = rule(lambda v: isinstance(v, str) and v.strip() != "", "must be a non-empty string")
FRACTION = in_range(0.0, 1.0)


def short(value) -> str:
    """``repr(value)``, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def bad(key: str, value, problem: str) -> UserError:
    """The one-line error for ``key=value``."""
    return UserError(f"{key}={short(value)}: {problem}")


@dataclass
class Settings:
    """Base of every settings class: :meth:`check` holds the rules that span several keys."""

    def check(self, prefix: str) -> None:
        """Cross-key rules; raise :class:`UserError` (``prefix``: the dotted path of this node)."""


def join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def validate(obj, prefix: str = "") -> None:
    """Apply every field's check (nested settings included, depth first) and then the class's
    :meth:`Settings.check`; the first problem raises :class:`UserError`."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not f.metadata.get("nonfinite") and nonfinite_in(value) is not None:
            raise bad(join(prefix, f.name), value, f"must be finite (holds {nonfinite_in(value)})")
        check = f.metadata.get("check")
        problem = check(value) if check is not None else None
        if problem:
            raise bad(join(prefix, f.name), value, problem)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            validate(value, join(prefix, f.name))
    if isinstance(obj, Settings):
        type(obj).check(obj, prefix)  # from the class: a field may be called check (target.check)


def knob_docs(cls) -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type, default, doc)`` of every knob of a settings class, nested ones included."""
    out = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)
        if dataclasses.is_dataclass(default):
            out += [(f"{f.name}.{k}", t, d, doc) for k, t, d, doc in knob_docs(type(default))]
        else:
            out.append((f.name, _type_name(hints.get(f.name, f.type)), default, f.metadata.get("doc", "")))
    return out


def _hints(cls) -> dict:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception:
        return {}


def _type_name(t) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")
