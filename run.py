"""tunebench entry point: ``python run.py [-m] method=... model=... target=... budget.trials_per_task=...``.

Thin on purpose: Hydra composes the config (the settings classes registered with its ConfigStore),
:func:`tunebench.harness.setup.load.load_experiment` types and checks it,
:func:`tunebench.harness.experiment.run_experiment` does the work. Bad input ends with one line
``error: ...`` and exit code 2; a run stopped by SIGINT (Ctrl-C) or SIGTERM with one line that gives
the ``resume=<run id>`` command, exit code 128 + the signal's number.
"""

import os
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from tunebench.errors import DeviceUnavailable, RunStopped, TrackingOutage, UserError
from tunebench.harness.commands.cli import fail, setup_logging, stopped
from tunebench.harness.setup.store import register_configs

CONF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conf")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from tunebench.errors import E2EError
    from tunebench.harness.experiment import run_experiment
    from tunebench.harness.launch.job_state import write_run_file
    from tunebench.harness.setup.load import load_experiment

    setup_logging()
    try:
        hydra_cfg = HydraConfig.get()
        overrides = list(hydra_cfg.overrides.task)  # resume= refuses those that conflict
        job_dir = hydra_cfg.runtime.output_dir  # run.json: which run to resume if this job is lost
        typed = load_experiment(OmegaConf.to_container(cfg, resolve=True))
        run_id = run_experiment(typed, overrides,
                                on_start=[lambda rid, records: write_run_file(job_dir, rid, records)])
    except UserError as exc:
        fail(str(exc))
    except (TrackingOutage, DeviceUnavailable) as exc:  # every measurement kept; resume=<run id> goes on
        fail(str(exc), code=1)
    except E2EError as exc:  # the run is marked FAILED; its records and task results are kept
        fail(f"end-to-end check failed: {exc}", code=1)
    except RunStopped as exc:  # SIGINT, SIGTERM: the run is KILLED, its records kept; one line says how to resume
        stopped(exc)
    print(f"mlflow run {run_id}", flush=True)


if __name__ == "__main__":  # not in the workers that multiprocessing spawns: they import this file too
    register_configs(CONF_DIR)
    try:
        from tunebench.harness.setup.preflight import preflight

        preflight(sys.argv[1:], CONF_DIR)  # every job of the sweep composed and validated first
    except UserError as exc:
        fail(str(exc))
    main()
