"""From the command line to a checked, typed :class:`~tunebench.config.experiment.ExperimentConfig`:
the config groups registered with Hydra (:mod:`.store`), typed loading (:mod:`.load`), the checks that
span groups (:mod:`.validate`), the command line checked before anything runs (:mod:`.preflight`),
``resume=`` (:mod:`.resume`) and composing a config outside ``run.py`` (:mod:`.compose`)."""
