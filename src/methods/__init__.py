"""Tuning methods, one module each. ``make_method(cfg)`` builds the one named by ``cfg["name"]``."""

from __future__ import annotations

import inspect

from tunebench.errors import UserError
from tunebench.methods.autotvm import AutoTVM
from tunebench.methods.base import Budget, Method
from tunebench.methods.gat import GAT
from tunebench.methods.metaschedule import MetaSchedule
from tunebench.methods.random_search import RandomSearch

METHODS: dict[str, type[Method]] = {"random": RandomSearch, "autotvm": AutoTVM, "metaschedule": MetaSchedule,
                                  "gat": GAT}


def make_method(cfg: dict) -> Method:
    """A fresh method instance from a method config dict: ``name`` plus its hyperparameters.

    Raises:
        UserError: for an unknown method name or hyperparameter (one line naming what is valid).
    """
    cfg = dict(cfg)
    name = cfg.pop("name", None)
    if name not in METHODS:
        raise UserError(f"method={name!r} is unknown; valid: {', '.join(sorted(METHODS))}")
    cls = METHODS[name]
    params = inspect.signature(cls.__init__).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        valid = [p for p in params if p != "self"]
        for key in cfg:
            if key not in valid:
                raise UserError(f"method.{key}: not a hyperparameter of method={name}; "
                                f"valid: {', '.join(valid) or '(none)'}")
    return cls(**cfg)


__all__ = ["Budget", "Method", "METHODS", "make_method"]
