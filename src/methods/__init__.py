"""Tuning methods, grouped by the problem they solve, each under its paper's name: ``tensor_programs/``
(schedules of tensor programs on TVM targets: autotvm, chameleon, flextensor, dgp, glimpse, gat,
metaschedule), ``fpga_dse/`` (FPGA design-space exploration: ann, bt, dac19, nsga2, motpe; ``mfgp/``: cgp,
dcgp, fpl18, mes), ``accelerator_mapping/`` (mappings on ``target=accel``: mapspace_bo, loma, salsa),
``graph_memory/`` (execution orders on ``target=memory``: serenity, hmcos and the scheduling baselines). The
methods for any target stay here: random search, exhaustive search, and the shared simulated annealing.
:data:`METHODS` registers each by name; ``make_method(settings)`` builds the one its settings name."""

from __future__ import annotations

from collections.abc import Mapping

from tunebench.config.load import typed
from tunebench.config.plugins import GROUPS, EntryPoints, install, load_class
from tunebench.errors import UserError
from tunebench.methods.accelerator_mapping.bo import MapspaceBO
from tunebench.methods.accelerator_mapping.timeloop_random import TimeloopRandom
from tunebench.methods.accelerator_mapping.zigzag_mappers import LOMA, SALSA
from tunebench.methods.base import Budget, Method, TargetNeeds
from tunebench.methods.exhaustive import Exhaustive
from tunebench.methods.fpga_dse.ann import ANN
from tunebench.methods.fpga_dse.bt import BoostedTrees
from tunebench.methods.fpga_dse.dac19 import DAC19
from tunebench.methods.fpga_dse.mfgp.cgp import CGP
from tunebench.methods.fpga_dse.mfgp.dcgp import DCGP
from tunebench.methods.fpga_dse.mfgp.fpl18 import FPL18
from tunebench.methods.fpga_dse.mfgp.mes import MES
from tunebench.methods.fpga_dse.motpe import MOTPE
from tunebench.methods.fpga_dse.nsga2 import NSGA2
from tunebench.methods.graph_memory.method import SCHEDULE_METHODS
from tunebench.methods.random_search import RandomSearch
from tunebench.methods.tensor_programs.autotvm.tuner import AutoTVM
from tunebench.methods.tensor_programs.chameleon.tuner import Chameleon
from tunebench.methods.tensor_programs.dgp.method import DGP
from tunebench.methods.tensor_programs.flextensor.tuner import FlexTensor
from tunebench.methods.tensor_programs.gat.method import GAT
from tunebench.methods.tensor_programs.glimpse.method import Glimpse
from tunebench.methods.tensor_programs.metaschedule import MetaSchedule
from tunebench.targets.base import TargetInfo

METHODS: dict[str, type[Method]] = {"random": RandomSearch, "autotvm": AutoTVM, "metaschedule": MetaSchedule,
                                    "dgp": DGP, "exhaustive": Exhaustive, "ann": ANN, "bt": BoostedTrees,
                                    "nsga2": NSGA2, "motpe": MOTPE, "cgp": CGP, "dcgp": DCGP, "fpl18": FPL18,
                                    "dac19": DAC19, "mes": MES, "gat": GAT, "chameleon": Chameleon,
                                    "flextensor": FlexTensor, "mapspace_bo": MapspaceBO, "glimpse": Glimpse,
                                    "loma": LOMA, "salsa": SALSA, "timeloop_random": TimeloopRandom,
                                    **SCHEDULE_METHODS}


#: names of the methods registered from an option's ``cls`` (their option is the user's YAML, which
#: Hydra composes; no settings class is stored for them)
FROM_YAML: set[str] = set()


def register_method(name: str, cls: type[Method]) -> type[Method]:
    """Make ``cls`` the method ``method=<name>``; returns the class.

    Raises:
        UserError: ``name`` is another class's already (a built-in's name is never replaced).
    """
    known = METHODS.get(name)
    if known is not None and known is not cls:
        raise UserError(f"method.name={name}: taken by {known.__module__}.{known.__qualname__}; give "
                        f"{cls.__module__}.{cls.__qualname__} another name")
    METHODS[name] = cls
    return cls


def installed_methods() -> EntryPoints:
    """The methods installed packages declare (entry point group ``tunebench.methods``: name =
    ``package.module:Class``), registered under their names; those that fail are in ``failed``."""
    return install(GROUPS["method"], Method, register_method)


def plugin_method(path: str, name: str | None) -> type[Method]:
    """The method class ``path`` names (``method.cls`` of an option from outside tunebench),
    registered as ``name`` (default: its settings' own name)."""
    cls = load_method_class(path, "method.cls", need_name=name is None)
    name = name or cls.Settings().name
    FROM_YAML.add(name)
    return register_method(name, cls)


def load_method_class(path: str, key: str, need_name: bool = True) -> type[Method]:
    """The :class:`Method` subclass ``path`` names, checked to be usable: not abstract (it defines
    ``ask`` and ``tell``), with a ``Settings`` dataclass deriving from ``MethodSettings`` whose defaults
    build, and (``need_name``) a default ``name`` there.

    Raises:
        UserError: one line naming ``key=path`` and what the class lacks.
    """
    import dataclasses
    import inspect

    from tunebench.config.experiment import MethodSettings

    cls = load_class(path, key, Method)
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise UserError(f"{key}={path}: {cls.__name__} is abstract: it does not define {missing}")
    settings = getattr(cls, "Settings", None)
    if not (isinstance(settings, type) and issubclass(settings, MethodSettings) and dataclasses.is_dataclass(settings)):
        raise UserError(f"{key}={path}: {cls.__name__}.Settings must be a dataclass deriving from "
                        "tunebench.config.experiment.MethodSettings (docs/USAGE.md §Your own method)")
    fields = {f.name: f for f in dataclasses.fields(settings)}
    required = [n for n, f in fields.items() if n != "name" and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    if required:
        raise UserError(f"{key}={path}: {settings.__name__} has knobs without a default ({', '.join(required)}): "
                        "every hyperparameter needs one")
    if need_name and fields["name"].default in (dataclasses.MISSING, None, "???", ""):
        raise UserError(f"{key}={path}: its option needs a name (method.name, or a default name on "
                        f"{settings.__name__})")
    return cls


def method_class(name) -> type[Method]:
    """The registered method called ``name``; an unknown name raises :class:`UserError`."""
    if name not in METHODS:
        failed = installed_methods().failed
        if name in failed:
            raise UserError(failed[name])
        raise UserError(f"method={name!r} is unknown; valid: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def make_method(settings, **overrides) -> Method:
    """A fresh method instance from its settings (a :class:`MethodSettings`), from a method name, or
    from a mapping with ``name`` and hyperparameters (typed and checked like a composed config).

    Raises:
        UserError: for an unknown method name or hyperparameter, or a bad value (one line).
    """
    if isinstance(settings, str):
        settings = {"name": settings}
    name = settings["name"] if isinstance(settings, Mapping) else settings.name
    cls = method_class(name)
    if isinstance(settings, Mapping):
        settings = typed(cls.Settings, settings, "method")
    return cls(settings, **overrides)


def check_compatible(method: type[Method], target_info: TargetInfo) -> None:
    """Raise :class:`UserError` when ``method`` cannot run on the target ``target_info`` describes
    (``Method.needs``); the message lists the registered targets it runs on."""
    problems = method.needs.problems(target_info)
    if problems:
        from tunebench.targets import TARGETS

        name = {cls: key for key, cls in METHODS.items()}.get(method, method.name)
        fits = [cls.Settings().name for cls in TARGETS.values() if not method.needs.problems(cls.nominal_info())]
        raise UserError(f"method={name} cannot run on target={target_info.name}: "
                        f"it needs {'; '.join(problems)}; targets it runs on: {', '.join(fits)}")


__all__ = ["Budget", "Method", "METHODS", "TargetNeeds", "check_compatible", "installed_methods", "make_method",
           "method_class", "plugin_method", "register_method"]
