"""``method=exhaustive``: every config of the (pruned) space at every fidelity of the target, in index
order; when all are measured, writes the design-space table (tunebench.targets.fpga.table) to ``out``.
Used to make the ground-truth tables for ``target=table`` and ADRS; table assembly
(``tunebench.harness.commands.assemble_table``) runs it on the part of a space still missing."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, knob, opt
from tunebench.methods.base import Method

log = logging.getLogger(__name__)


def exhaustive_queue(space, fidelities, reverse: bool = False, shard: tuple[int, int] = (0, 1),
                     only: dict | None = None, skip=frozenset()) -> list[tuple[int, str]]:
    """The ``(config index, fidelity)`` pairs to measure, in order: every config (last index first when
    ``reverse``) whose index is K modulo N (``shard=(K, N)``) and whose knob values match ``only``
    (compared as text), at every fidelity; pairs in ``skip`` (already measured) are left out."""
    only = only or {}
    out = []
    for i in (reversed(range(space.size)) if reverse else range(space.size)):
        if i % shard[1] != shard[0]:
            continue
        values = space.get(i).to_dict()
        if all(str(values[k]) == v for k, v in only.items()):
            out += [(i, f) for f in fidelities if (i, f) not in skip]
    return out


@dataclass
class ExhaustiveSettings(MethodSettings):
    """Every config of the pruned space at every fidelity of the target; writes the design-space table (FPGA
    targets). Needs ``budget.trials_per_task`` >= space size x fidelities (e.g. 1000 for hls_gemm)."""

    name: str = knob("exhaustive", NAME, "the method")
    out: str | None = knob(None, opt(NAME), "CSV path; null = fpga_tables/<kernel>.csv in the working directory "
                                            "(our choice)")


class Exhaustive(Method):
    """Settings: :class:`ExhaustiveSettings` (``out``). The keyword arguments after it are not user settings:
    table assembly (``tunebench.harness.commands.assemble_table``) passes them.

    Args:
        reverse, shard, only, skip: a part of the space (:func:`exhaustive_queue`); the table is written
            only when the whole space was asked for.
    """

    name = "exhaustive"
    Settings = ExhaustiveSettings

    def __init__(self, settings: ExhaustiveSettings | None = None, *, reverse: bool = False,
                 shard: tuple[int, int] = (0, 1), only: dict | None = None, skip=frozenset(), **overrides):
        super().__init__(settings, **overrides)
        self.out = self.settings.out
        self.part = {"reverse": reverse, "shard": tuple(shard), "only": dict(only or {}), "skip": frozenset(skip)}
        self.whole = shard[1] == 1 and not only and not skip

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.fids = list(target_info.fidelities)
        self.queue = exhaustive_queue(self.space, self.fids, **self.part)
        self.pos = 0
        self.got = []
        self.done: set[tuple[int, str]] = set()  # (config index, fidelity) told, a resumed run's records too
        self.written = None

    def ask(self, n):
        items = []
        while len(items) < n and self.pos < len(self.queue):
            if self.queue[self.pos] not in self.done:
                items.append(self.queue[self.pos])
            self.pos += 1
        return [(self.space.get(i), f) for i, f in items]

    def tell(self, measurements):
        super().tell(measurements)
        self.got += measurements
        self.done.update((m.config.index, m.fidelity) for m in measurements)
        if self.whole and len(self.got) >= len(self.queue) and self.written is None:
            from tunebench.targets.fpga.table import write_table

            path = self.out or os.path.join("fpga_tables", f"{self.task.name}.csv")
            self.got.sort(key=lambda m: m.config.index)  # stable: fidelities stay in order within a config
            write_table(path, self.space, self.fids, list(self.target_info.objectives), self.got)
            self.written = path
            log.info("exhaustive: wrote %d configs x %d fidelities to %s", self.space.size, len(self.fids), path)
