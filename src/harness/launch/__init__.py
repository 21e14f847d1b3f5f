"""Running sweeps elsewhere: the Ray launcher's back end (:mod:`.ray`; Hydra's entry point is
``hydra_plugins/tunebench_launchers/``) and the ``run.json`` a job leaves for whoever launched it
(:mod:`.job_state`)."""
