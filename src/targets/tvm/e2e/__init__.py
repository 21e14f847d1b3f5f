"""The end-to-end step a TVM target adds to a run (:meth:`TVMTarget.run_steps`): the whole model (or
each single operator) with every task's best schedule, checked and timed against TVM's default build
and the PyTorch baselines. :mod:`.kernels` gives each task the faster of its tuned and TVM's default
kernel, :mod:`.build` makes and checks the builds, :mod:`.timing` times the rows in interleaved rounds
(in worker processes running :mod:`.model_worker`, whose requests and answers are
:mod:`.model_messages`), :mod:`.step` runs it for a run and logs its metrics. Importing this package
imports neither TVM nor PyTorch."""

from __future__ import annotations

from tunebench.targets.base import RunStep


class EndToEndStep(RunStep):
    """The whole model (or each single operator) with each task's best schedule, against the baselines."""

    def __init__(self, imported):
        self.imported = imported  # the imported model (None: model=ops, each operator on its own)

    def finish(self, run) -> str | None:
        from tunebench.targets.tvm.e2e.step import model_latency, operator_latencies

        run.protocol.wait_if_busy("the end-to-end step")
        cfg = run.cfg
        entries = run.totals.summaries  # the tasks.json entries, given each task's kernel choice
        if self.imported is None:
            error = operator_latencies(cfg.e2e, run.tasks, run.totals.best, run.target, run.tracker, entries=entries)
        else:
            error = model_latency(cfg.e2e, cfg.model.name, self.imported, run.tasks, run.totals.best, run.target,
                                  run.tracker, entries=entries)
        run.tracker.flush()
        return error


__all__ = ["EndToEndStep"]
