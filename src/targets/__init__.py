"""Measurement backends. ``make_target(cfg)`` builds the one named by ``cfg["kind"]``."""

from __future__ import annotations

from tunebench.errors import UserError

TARGET_KINDS = ("llvm", "cuda", "fpga_open", "table", "vivado")


def make_target(cfg: dict, measure: dict | None = None):
    """The target for a target config dict (``conf/target/*.yaml``); ``measure``: the experiment's
    measurement-protocol settings (used by the TVM targets)."""
    kind = cfg.get("kind")
    if kind in ("llvm", "cuda"):
        from tunebench.targets.tvm.target import TVMTarget

        return TVMTarget(cfg, measure)
    if kind == "fpga_open":
        from tunebench.targets.fpga.open_flow import FPGAOpenTarget

        return FPGAOpenTarget(cfg)
    if kind == "vivado":
        from tunebench.targets.fpga.vivado import VivadoTarget

        return VivadoTarget(cfg)
    if kind == "table":
        from tunebench.targets.fpga.table_target import TableTarget

        return TableTarget(cfg)
    raise UserError(f"target kind={kind!r} is unknown; valid: {', '.join(TARGET_KINDS)}")
