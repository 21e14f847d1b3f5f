"""Composing a typed config outside ``run.py`` (scripts, tests, benchmarks)."""

from __future__ import annotations

from tunebench.config.experiment import ExperimentConfig
from tunebench.harness.setup.store import CONF_DIR


def layers_override(layers: list[dict]) -> str:
    """The ``model.layers=[...]`` override for a list of layer dicts (``model=layers``)."""
    return "model.layers=[" + ",".join("{" + ",".join(f"{k}:{v}" for k, v in L.items()) + "}" for L in layers) + "]"


def compose_config(overrides: list[str], conf_dir: str = CONF_DIR) -> ExperimentConfig:
    """The typed, checked experiment that ``python run.py <overrides>`` would run, for scripts and
    tests that call :func:`tunebench.harness.experiment.run_experiment` directly.

    Pass ``workdir=<path>``: outside a Hydra job the default ``${hydra:runtime.cwd}`` cannot resolve.
    """
    from omegaconf import OmegaConf

    from tunebench.config.load import unknown_keys
    from tunebench.harness.setup.load import load_experiment
    from tunebench.harness.setup.preflight import check_overrides, compose

    check_overrides(overrides, conf_dir, multirun=False)
    cfg = compose(overrides, conf_dir)
    unknown_keys(cfg)
    return load_experiment(OmegaConf.to_container(cfg, resolve=True))
