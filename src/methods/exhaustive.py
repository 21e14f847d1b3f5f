"""``method=exhaustive``: every config of the (pruned) space at every fidelity of the target, in index
order; when all are measured, writes the design-space table (tunebench.targets.fpga.table) to ``out``.
Used to make the ground-truth tables for ``target=table`` and ADRS."""

from __future__ import annotations

import logging
import os

from tunebench.methods.base import Method

log = logging.getLogger(__name__)


class Exhaustive(Method):
    """Args:
        out: CSV path for the table; null = ``fpga_tables/<task name>.csv`` under the working directory.
    """

    name = "exhaustive"

    def __init__(self, out: str | None = None):
        self.out = out

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.fids = list(target_info.fidelities)
        self.queue = [(i, f) for i in range(self.space.size) for f in self.fids]
        self.pos = 0
        self.got = []
        self.written = None

    def ask(self, n):
        items = self.queue[self.pos:self.pos + n]
        self.pos += len(items)
        return [(self.space.get(i), f) for i, f in items]

    def tell(self, measurements):
        super().tell(measurements)
        self.got += measurements
        if len(self.got) >= len(self.queue) and self.written is None:
            from tunebench.targets.fpga.table import write_table

            path = self.out or os.path.join("fpga_tables", f"{self.task.name}.csv")
            write_table(path, self.space, self.fids, list(self.target_info.objectives), self.got)
            self.written = path
            log.info("exhaustive: wrote %d configs x %d fidelities to %s", self.space.size, len(self.fids), path)
