"""Tuning methods, one module each. ``make_method(cfg)`` builds the one named by ``cfg["name"]``."""

from __future__ import annotations

from tunebench.errors import UserError
from tunebench.methods.autotvm import AutoTVM
from tunebench.methods.base import Budget, Method
from tunebench.methods.random_search import RandomSearch

METHODS: dict[str, type[Method]] = {"random": RandomSearch, "autotvm": AutoTVM}


def make_method(cfg: dict) -> Method:
    """A fresh method instance from a method config dict: ``name`` plus its hyperparameters."""
    cfg = dict(cfg)
    name = cfg.pop("name", None)
    if name not in METHODS:
        raise UserError(f"method={name!r} is unknown; valid: {', '.join(sorted(METHODS))}")
    return METHODS[name](**cfg)


__all__ = ["Budget", "Method", "METHODS", "make_method"]
