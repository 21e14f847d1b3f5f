"""The checks of a typed experiment that span config groups, or need the file system: each value on
its own is checked where it is declared (its settings class). Still nothing is built, measured or
written: a failure is one :class:`UserError` and nothing else happens."""

from __future__ import annotations

import os
import tempfile

from tunebench.config.experiment import ExperimentConfig
from tunebench.config.knobs import validate
from tunebench.errors import UserError


def _writable_folder(path: str) -> bool:
    """``path`` is a folder this process can create entries in (tried: root ignores permission bits)."""
    if not os.path.isdir(path):
        return False
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".tunebench-probe-", dir=path))
    except OSError:
        return False
    return True


def check_paths(cfg: ExperimentConfig) -> None:
    """``workdir`` is a writable folder; ``records_dir`` (relative to it) is or can be made one."""
    if not _writable_folder(cfg.workdir):
        raise UserError(f"workdir={cfg.workdir}: not a writable folder")
    probe = os.path.join(os.path.abspath(cfg.workdir), cfg.records_dir)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not _writable_folder(probe):
        raise UserError(f"records_dir={cfg.records_dir}: {probe} is not a writable folder")


def check_model_target(cfg: ExperimentConfig) -> None:
    """The target measures the model's kind of workload (``Target.workloads``)."""
    from tunebench.datasets.models import MODEL_OPTIONS
    from tunebench.targets import TARGETS, target_class

    workload = cfg.model.workload
    if workload in target_class(cfg.target.kind).workloads:
        return
    models = [n for n, m in MODEL_OPTIONS.items() if m.workload == workload]
    targets = [cls.Settings().name for cls in TARGETS.values() if workload in cls.workloads]
    raise UserError(f"model={cfg.model.name} and target={cfg.target.name} do not go together: "
                    f"{', '.join(models)} need target {'/'.join(targets) or '(none registered)'}")


def validate_config(cfg: ExperimentConfig) -> None:
    """Every static check of a typed experiment (no device, store or target touched): each value where
    it is declared (a config changed after it was loaded is checked again), then across groups."""
    from tunebench.methods import check_compatible, make_method, method_class
    from tunebench.targets import target_class

    validate(cfg)
    check_paths(cfg)
    check_model_target(cfg)
    method_cls = method_class(cfg.method.name)
    target_cls = target_class(cfg.target.kind)
    check_compatible(method_cls, target_cls.nominal_info(cfg.target, cfg.model))
    target_cls.check_model(cfg.target, cfg.model, own_schedules=method_cls.needs.compiles)
    make_method(cfg.method)

