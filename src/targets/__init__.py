"""Measurement backends. :data:`TARGETS` holds every target class by its ``kind``; a class owns its
facts (``Settings``, ``workloads``, objectives, fidelities, templates, how a model becomes its tasks:
:class:`~tunebench.targets.base.Target`). ``make_target(settings)`` builds the one a config names."""

from __future__ import annotations

from tunebench.errors import UserError
from tunebench.targets.accel.target import AccelTarget
from tunebench.targets.base import Target
from tunebench.targets.fpga.open_flow import FPGAOpenTarget
from tunebench.targets.fpga.table_target import TableTarget
from tunebench.targets.fpga.vivado import VivadoTarget
from tunebench.targets.tvm.cuda import CUDATarget
from tunebench.targets.tvm.llvm import LLVMTarget

#: target kind -> its class (its settings' default ``name`` is the ``target=<name>`` option)
TARGETS: dict[str, type[Target]] = {}


def register_target(cls: type[Target]) -> type[Target]:
    """Add a target class under its ``kind`` (usable as a class decorator); returns the class."""
    TARGETS[cls.kind] = cls
    return cls


for _cls in (LLVMTarget, CUDATarget, FPGAOpenTarget, VivadoTarget, TableTarget, AccelTarget):
    register_target(_cls)


def target_class(kind) -> type[Target]:
    """The target class of ``kind``; an unknown kind raises :class:`UserError` naming the valid ones."""
    if kind not in TARGETS:
        raise UserError(f"target kind={kind!r} is unknown; valid: {', '.join(TARGETS)}")
    return TARGETS[kind]


def make_target(settings, measure=None) -> Target:
    """The target for its settings (``target=<name>``); ``measure``: the experiment's measurement
    settings (:class:`~tunebench.config.experiment.MeasureSettings`; the targets that time kernels use them)."""
    return target_class(settings.kind)(settings, measure)
