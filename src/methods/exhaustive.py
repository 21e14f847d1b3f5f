"""``method=exhaustive``: every config of the (pruned) space at every fidelity of the target, in index
order, or the part of it ``max_factor`` bounds, or a uniform ``sample`` of it; ``part="K/N"`` keeps every N-th
of those, from the K-th on (disjoint parts of one seeded sample for sittings that ``space merge`` joins).

On an FPGA target, when the whole space is measured, it writes the design-space table (with the
writer the target lends: ``TargetInfo.lends["write_table"]``) to ``out``: the ground-truth tables for ``target=table`` and ADRS; table
assembly (``tunebench.harness.commands.assemble_table``) runs it on the part of a space still missing.
On a TVM target it measures a task's space for ``target=replay`` (``python -m tunebench space measure``)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np

from tunebench.config.arguments import parse_part
from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, POS_INT, knob, opt, rule
from tunebench.methods.base import Method

log = logging.getLogger(__name__)


def exhaustive_queue(space, fidelities, reverse: bool = False, shard: tuple[int, int] = (0, 1),
                     only: dict | None = None, skip=frozenset(), max_factor: int | None = None,
                     sample: tuple[int, int] | None = None, part: tuple[int, int] = (1, 1)) -> list[tuple[int, str]]:
    """The ``(config index, fidelity)`` pairs to measure, in order: every config (last index first when
    ``reverse``) whose index is K modulo N (``shard=(K, N)``), whose knob values match ``only`` (compared
    as text) and whose split factors after the outermost are all at most ``max_factor``, at every
    fidelity; ``sample=(n, seed)`` keeps a uniform sample of n of those configs (the same n for the same
    seed); ``part=(K, N)`` then keeps the K-th, (K+N)-th, ... of those (1-based: N parts that do not overlap and
    together make the whole); pairs in ``skip`` (already measured) are left out."""
    only = only or {}
    keep = []
    for i in (reversed(range(space.size)) if reverse else range(space.size)):
        if i % shard[1] != shard[0]:
            continue
        config = space.get(i)
        values = config.to_dict()
        if all(str(values[k]) == v for k, v in only.items()) and within(config, max_factor):
            keep.append(i)
    if sample is not None and sample[0] < len(keep):
        picked = np.random.default_rng(sample[1]).choice(len(keep), size=sample[0], replace=False)
        keep = [keep[j] for j in sorted(picked)]
    keep = keep[part[0] - 1::part[1]]
    return [(i, f) for i in keep for f in fidelities if (i, f) not in skip]


PART = rule(lambda v: parse_part(v) is not None, "must be K/N with whole numbers 1 <= K <= N (e.g. 1/2)")


def within(config, max_factor: int | None) -> bool:
    """Every split knob's factors after the outermost are at most ``max_factor`` (None: no bound)."""
    if max_factor is None:
        return True
    return all(max(v[1:], default=1) <= max_factor for v in config.values if isinstance(v, tuple))


@dataclass
class ExhaustiveSettings(MethodSettings):
    """Every config of the pruned space at every fidelity of the target (or the part ``max_factor`` bounds,
    or a uniform ``sample``); writes the design-space table (FPGA targets, whole space). Needs
    ``budget.trials_per_task`` >= configs x fidelities (e.g. 1000 for hls_gemm)."""

    name: str = knob("exhaustive", NAME, "the method")
    out: str | None = knob(None, opt(NAME), "CSV path; null = fpga_tables/<kernel>.csv in the working directory "
                                            "(our choice)")
    max_factor: int | None = knob(None, opt(POS_INT), "measure only configs whose split factors after the "
                                                      "outermost are all <= this (a bounded subspace); null = all")
    sample: int | None = knob(None, opt(POS_INT), "measure a uniform sample of this many configs (drawn with the "
                                                  "run's seed) instead of all; null = all")
    part: str = knob("1/1", PART, "K/N: measure only the K-th of N disjoint parts of the configs chosen (every N-th "
                                  "from the K-th; the same seed and sample give the same parts); 1/1 = all of them")


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
        self.whole = (shard[1] == 1 and not only and not skip and self.settings.max_factor is None
                      and self.settings.sample is None and parse_part(self.settings.part) == (1, 1))

    def check_task(self, task, target_info) -> str | None:
        """``out`` needs a target that writes design-space tables (lends ``write_table``: the FPGA targets)."""
        if self.out is not None and "write_table" not in target_info.lends:
            return (f"method.out={self.out}: target {target_info.name} writes no design-space table (the FPGA "
                    "targets do); leave method.out unset")
        return None

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.fids = list(target_info.fidelities)
        sample = None if self.settings.sample is None else (self.settings.sample, int(rng.integers(2**31)))
        self.queue = exhaustive_queue(self.space, self.fids, **self.part, max_factor=self.settings.max_factor,
                                      sample=sample, part=parse_part(self.settings.part))
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
        table = (self.target_info.capacity is not None or self.out is not None) and "write_table" in self.target_info.lends
        if table and self.whole and len(self.got) >= len(self.queue) and self.written is None:
            write_table = self.target_info.lends["write_table"]  # the target's (FPGA targets lend it)
            path = self.out or os.path.join("fpga_tables", f"{self.task.name}.csv")
            self.got.sort(key=lambda m: m.config.index)  # stable: fidelities stay in order within a config
            write_table(path, self.space, self.fids, list(self.target_info.objectives), self.got)
            self.written = path
            log.info("exhaustive: wrote %d configs x %d fidelities to %s", self.space.size, len(self.fids), path)
