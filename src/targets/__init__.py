"""Measurement backends. :data:`TARGETS` holds every target class by its ``kind``; a class owns its
facts (``Settings``, ``workloads``, objectives, fidelities, templates, how a model becomes its tasks:
:class:`~tunebench.targets.base.Target`). ``make_target(settings)`` builds the one a config names."""

from __future__ import annotations

from tunebench.config.plugins import GROUPS, EntryPoints, install, load_class
from tunebench.errors import UserError
from tunebench.targets.accel.target import AccelTarget
from tunebench.targets.base import Target
from tunebench.targets.capabilities import TimesKernels
from tunebench.targets.fpga.open_flow import FPGAOpenTarget
from tunebench.targets.fpga.table_target import TableTarget
from tunebench.targets.fpga.vivado import VivadoTarget
from tunebench.targets.memory.target import MemoryTarget
from tunebench.targets.replay import ReplayTarget
from tunebench.targets.tvm.cuda import CUDATarget
from tunebench.targets.tvm.llvm import LLVMTarget

#: target kind -> its class (its settings' default ``name`` is the ``target=<name>`` option)
TARGETS: dict[str, type[Target]] = {}


#: kinds of the targets registered from an option's ``cls`` (their option is the user's YAML)
FROM_YAML: set[str] = set()


def register_target(cls: type[Target]) -> type[Target]:
    """Add a target class under its ``kind`` (usable as a class decorator); returns the class.

    Raises:
        UserError: the kind is another class's already (a built-in target is never replaced).
    """
    known = TARGETS.get(cls.kind)
    if known is not None and known is not cls:
        raise UserError(f"target.kind={cls.kind}: taken by {known.__module__}.{known.__qualname__}; give "
                        f"{cls.__module__}.{cls.__qualname__} another kind")
    TARGETS[cls.kind] = cls
    return cls


for _cls in (LLVMTarget, CUDATarget, FPGAOpenTarget, VivadoTarget, TableTarget, MemoryTarget, ReplayTarget,
             AccelTarget):
    register_target(_cls)


def installed_targets() -> EntryPoints:
    """The targets installed packages declare (entry point group ``tunebench.targets``: name =
    ``package.module:Class``), registered by kind; those that fail are in ``failed``."""
    return install(GROUPS["target"], Target, lambda name, cls: register_target(cls))


def plugin_target(path: str) -> type[Target]:
    """The target class ``path`` names (``target.cls`` of an option from outside tunebench), registered."""
    cls = register_target(load_class(path, "target.cls", Target))
    FROM_YAML.add(cls.kind)
    return cls


def target_class(kind) -> type[Target]:
    """The target class of ``kind``; an unknown kind raises :class:`UserError` naming the valid ones."""
    if kind not in TARGETS:
        raise UserError(f"target kind={kind!r} is unknown; valid: {', '.join(TARGETS)}")
    return TARGETS[kind]


def target_with(kind, capability: type) -> type[Target]:
    """The target class of ``kind``, which has ``capability`` (a protocol of
    :mod:`tunebench.targets.capabilities` asked of the class); :class:`UserError` naming the kinds that have it
    otherwise. How a method reaches what a target offers without a target built (its offline commands)."""
    cls = target_class(kind)
    if not issubclass(cls, capability):
        having = ", ".join(k for k, c in TARGETS.items() if issubclass(c, capability))
        raise UserError(f"target kind={kind!r} does not offer {capability.__name__}; valid: {having}")
    return cls


def make_target(settings, measure=None) -> Target:
    """The target for its settings (``target=<name>``); ``measure``: the experiment's measurement
    settings (:class:`~tunebench.config.experiment.MeasureSettings`), given only to a target that times
    kernels (:class:`~tunebench.targets.capabilities.TimesKernels`; None: its defaults)."""
    cls = target_class(settings.kind)
    return cls(settings, measure) if issubclass(cls, TimesKernels) else cls(settings)
