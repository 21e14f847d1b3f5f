"""``target=table``: replays a design-space table (tunebench.targets.fpga.table) instead of running tools.

Each measurement returns the table's objectives at the asked fidelity and is charged the recorded
tool seconds of the stages it needs (``stage_chain``; a recorded flow's :func:`tool_flow_chain`) that
were not yet charged for that config in this run (impl after synth: impl only), exactly as the live
``fpga_open`` target reuses netlists.
The harness adds these seconds to the task's search clock (``simulated_clock``); nothing sleeps.
"""

from __future__ import annotations

from tunebench.datasets import fpga_recorded
from tunebench.targets.fpga.common import (
    TOOL_STAGES,
    FPGATargetBase,
    cumulative_costs,
    stage_chain,
    table_stage_means,
    tool_flow_chain,
)
from tunebench.targets.fpga.settings import TableSettings
from tunebench.targets.fpga.table import charge_stages, default_table, read_table, row_measurement, write_table
from tunebench.task import Measurement, Outcome, Task


class TableTarget(FPGATargetBase):
    """Replays a design-space table (module docstring); its tool seconds go to the search clock. It has
    tables (:class:`~tunebench.targets.capabilities.HasTables`: :meth:`table_for`)."""

    kind = "table"
    Settings = TableSettings
    lends = {"write_table": write_table}  # method=exhaustive writes this target's design-space table
    simulated_clock = True

    workloads = ("hls_kernel", "fpga_recorded")

    def __init__(self, settings: TableSettings):
        super().__init__(settings)
        self.path = settings.table
        self._tables: dict[str, object] = {}
        self._charged: dict[tuple[str, int], set[str]] = {}

    @classmethod
    def check_model(cls, settings, model, own_schedules: bool) -> None:
        """A recorded model (``model=machsuite_*`` / ``spector_*``): its table intact, the asked
        fidelities and objectives recorded (docs/USAGE.md §Recorded FPGA design spaces)."""
        if model.workload == "fpga_recorded":
            fpga_recorded.adopt(settings, model.kernel)
        else:
            settings.check_scale("target")

    def load_tasks(self, model, own_schedules: bool = False):
        """An FPGA kernel's task, or a recorded model's: then the data set's fidelities, objectives,
        capacity, scale and reference point replace those left at their defaults. Every task's table is
        read now and must match its space (a bad table fails before the run)."""
        if model.workload != "fpga_recorded":
            tasks, _ = super().load_tasks(model, own_schedules)
        else:
            self.apply_settings(fpga_recorded.adopt(self.settings, model.kernel))
            tasks = [fpga_recorded.recorded_task(model.kernel, self.kind)]
        for task in tasks:
            self.table_for(task)
        return tasks, None

    def details(self) -> dict:
        return {"table": self.path or "shipped: data/fpga/<kernel>.csv or data/fpga_recorded/ (recorded models)"}

    def table_for(self, task: Task):
        """The table replayed for ``task`` (read once per task)."""
        if task.id not in self._tables:
            path = self.path or default_table(task.mod["name"])
            self._tables[task.id] = read_table(path, task.space, self.fidelities, self.objectives)
        return self._tables[task.id]

    def fidelity_costs(self, task: Task) -> dict[str, float] | None:
        """T_f from the table's recorded seconds: the mean of each stage over the designs that ran it,
        summed over the stages a report at f needs from scratch. A recorded model's stages without
        seconds (its sources have no functional simulation: ``sim.tool_s`` is 0) cost nothing."""
        means = table_stage_means(self.table_for(task))
        if task.kind == "fpga_recorded":
            means = {s: means.get(s, 0.0) for s in TOOL_STAGES}
        return cumulative_costs(means, self.fidelities, chain_of(task))

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        fid = self.fidelity_of(fidelity)
        df = self.table_for(task)
        out = []
        for c in configs:
            if not listed(df, c):
                out.append(Measurement(task.id, c, Outcome.INFEASIBLE, fidelity=fid,
                                       error=f"not a design of the table: {c.to_dict()}"))
                continue
            row = df.loc[c.index]
            done = self._charged.setdefault((task.id, c.index), set())
            stage_s = charge_stages(row, fid, done, chain_of(task))
            self._stats["tool_s"] += sum(stage_s.values())
            out.append(row_measurement(task, c, row, fid, self.objectives, stage_s))
        return out


def chain_of(task: Task):
    """The stages a report needs: a recorded flow's run one after the other (HLS before synthesis,
    :func:`tool_flow_chain`); the open flow's synthesis needs no estimate (:func:`stage_chain`)."""
    return tool_flow_chain if task.kind == "fpga_recorded" else stage_chain


def listed(df, config) -> bool:
    """Whether ``config`` is the table's design at its index (same knob values): a config of another
    space, or one the table does not hold, is not."""
    if config.index not in df.index:
        return False
    return all(k in df.columns and str(df.at[config.index, k]) == str(v) for k, v in zip(config.names, config.values))
