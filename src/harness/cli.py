"""Command-line glue: one-line errors, logging set-up, and composing a config outside ``run.py``."""

from __future__ import annotations

import logging
import os
import sys

from tunebench.harness.config_check import CONF_DIR


def layers_override(layers: list[dict]) -> str:
    """The ``model.layers=[...]`` override for a list of layer dicts (``model=layers``)."""
    return "model.layers=[" + ",".join("{" + ",".join(f"{k}:{v}" for k, v in L.items()) + "}" for L in layers) + "]"


def compose_config(overrides: list[str], conf_dir: str = CONF_DIR) -> dict:
    """The resolved experiment config that ``python run.py <overrides>`` would run, as a dict, for
    scripts and tests that call :func:`tunebench.harness.experiment.run_experiment` directly.

    Pass ``workdir=<path>``: outside a Hydra job the default ``${hydra:runtime.cwd}`` cannot resolve.
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from tunebench.harness.preflight import check_overrides

    check_overrides(overrides, conf_dir, multirun=False)
    with initialize_config_dir(config_dir=os.path.abspath(conf_dir), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return OmegaConf.to_container(cfg, resolve=True)


def fail(msg: str, code: int = 2) -> None:
    """Print a one-line error and exit."""
    print(f"error: {msg}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s %(levelname)s %(name)s] %(message)s",
                        datefmt="%H:%M:%S", force=True)
    for noisy in ("mlflow", "alembic", "urllib3", "git"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
