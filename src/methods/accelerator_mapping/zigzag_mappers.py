"""ZigZag's own temporal mappers as methods ([Mei-TC21]): ``loma`` (loop-order based memory allocation:
every ordering of the loops' prime factors, merged to ``lpf_limit`` loops, allocated bottom-up to the
memories; [Symons-AICAS21]) and ``salsa`` (simulated annealing over the same
orderings, [Jung-AICAS23]).

Both are model-based mappers: they search with ZigZag's cost model itself (their *model evaluations*,
reported), then propose their mappings to the target best first (the *trials*). A ZigZag mapping lives in
per-operand memory levels, allocated operand by operand; this mapspace has four nested levels, one loop
nest for all operands (Timeloop's view, [Parashar-ISPASS19]). A ZigZag mapping becomes one of its mappings
by cutting its loop ordering where the levels end: the scratchpad where the first of inputs and weights
ends, the accumulator and the register no higher (the buffers then hold no more than ZigZag allocated, so
the mapping fits); loops of one dimension within a level merge into one factor. Mappings that needed a
cut moved are counted (``clipped``); ZigZag's own best value (``zigzag_best_energy_pj_per_mac``, its
per-operand allocation) is reported beside what the target measures.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from queue import Queue

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, POS_INT, POS_NUM, bounded, knob
from tunebench.methods.base import Method, TargetNeeds
from tunebench.search_space import Config

CRITERIA = {"energy_pj_per_mac": "energy", "latency_s": "latency", "edp": "edp"}


@dataclass
class LOMASettings(MethodSettings):
    """ZigZag's LOMA mapper."""

    name: str = knob("loma", NAME, "the method")
    lpf_limit: int = knob(6, bounded(1, 8), "loop prime factors kept as separate loops (ZigZag's API default 6); "
                                            "at most 8: LOMA enumerates every ordering of them, which grows as the "
                                            "factorial (8! = 40,320 per memory allocation; 7 took 3x the time of 6)")


@dataclass
class SALSASettings(MethodSettings):
    """ZigZag's SALSA mapper: one annealing run per proposed mapping."""

    name: str = knob("salsa", NAME, "the method")
    lpf_limit: int = knob(6, bounded(1, 8), "loop prime factors kept as separate loops (as LOMA, at most 8)")
    iterations: int = knob(1000, POS_INT, "annealing steps of one run (ZigZag's default salsa_iteration_number)")
    start_temperature: float = knob(0.05, POS_NUM, "ZigZag's default salsa_start_temperature")
    max_idle_runs: int = knob(3, POS_INT, "runs in a row that find no new mapping before the method stops (our "
                                          "choice)")


def config_of_temporal_mapping(ms, tm) -> tuple[Config, bool]:
    """The config of ZigZag temporal mapping ``tm`` in mapspace ``ms``, and whether a level's end had to
    move (module docstring)."""
    levels = {str(op): [[(str(d), int(round(f))) for d, f in lv] for lv in loops]
              for op, loops in tm.mapping_dic_origin.items()}
    ordering = [loop for lv in levels["W"] for loop in lv]
    cuts = {op: [sum(len(lv) for lv in levels[op][:i + 1]) for i in range(len(levels[op]) - 1)] for op in levels}
    spad = min(cuts["I"][0], cuts["W"][1])
    acc = min(cuts["O"][0], spad)
    reg = min(cuts["W"][0], acc)
    clipped = (reg, acc, spad, spad) != (cuts["W"][0], cuts["O"][0], cuts["I"][0], cuts["W"][1])
    bounds = (0, reg, acc, spad, len(ordering))
    factors, orders = [], []
    for lv in range(4):
        f = dict.fromkeys(ms.dims, 1)
        order: list[str] = []
        for d, size in ordering[bounds[lv]:bounds[lv + 1]]:
            f[d] *= size
            if d not in order:
                order.append(d)
        factors.append(f)
        orders.append(tuple(order + [d for d in ms.dims if d not in order]))
    return ms.config_of(factors, orders), clipped


def criterion(cme, name: str) -> float:
    if name == "energy":
        return float(cme.energy_total)
    if name == "latency":
        return float(cme.latency_total2)
    return float(cme.energy_total) * float(cme.latency_total2)


class ZigZagMapper(Method):
    """What LOMA and SALSA share: ZigZag's layer for the task, the projection of its mappings, the queue
    of proposals best first."""

    needs = TargetNeeds(objectives="single", mapspace=True)

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.ms = task.mod  # ZigZag's model of the layer: lent by the target (target=accel)
        self.layer, self.sm, self.smi, self.accelerator = target_info.lends["zigzag_layer"](
            self.ms.hardware, self.ms.loops, self.ms.stride)
        self.criterion = CRITERIA.get(target_info.objectives[0], "energy")
        self.queue: list[tuple[float, Config]] = []
        self.model_evaluations = 0
        self.clipped = 0
        self.native_best = math.inf
        self.search_s = 0.0

    def offer(self, cme, tm) -> None:
        """One mapping ZigZag evaluated, kept as a proposal (ranked by ZigZag's own value)."""
        value = criterion(cme, self.criterion)
        self.native_best = min(self.native_best, value)
        config, clipped = config_of_temporal_mapping(self.ms, tm)
        self.clipped += clipped
        self.queue.append((value, config))

    def pop_new(self) -> Config | None:
        if self.space.size == 0:
            return None
        self.queue.sort(key=lambda vc: (vc[0], vc[1].index))
        while self.queue:
            _, config = self.queue.pop(0)
            if config.index not in self.visited:
                return config
        return None

    def report(self) -> dict:
        macs = self.layer.total_mac_count
        out = {"model_evaluations": self.model_evaluations, "clipped": self.clipped,
               "mapper_search_s": self.search_s}
        if math.isfinite(self.native_best) and self.criterion == "energy":
            out["zigzag_best_energy_pj_per_mac"] = self.native_best / macs
        return out


class LOMA(ZigZagMapper):
    """Every loop ordering LOMA generates, evaluated by ZigZag, proposed best first (module docstring)."""

    name = "loma"
    Settings = LOMASettings

    def _search(self) -> None:
        from zigzag.cost_model.cost_model import CostModelEvaluation
        from zigzag.mapping.temporal_mapping import TemporalMappingType
        from zigzag.opt.loma.engine import LomaEngine, NoValidLoopOrderingFoundException

        start = time.perf_counter()
        engine = LomaEngine(accelerator=self.accelerator, layer=self.layer, spatial_mapping=self.sm,
                            mapping_type=TemporalMappingType.UNEVEN, loma_lpf_limit=self.settings.lpf_limit)
        try:
            for tm in engine.run():
                cme = CostModelEvaluation(accelerator=self.accelerator, layer=self.layer, spatial_mapping=self.sm,
                                          spatial_mapping_int=self.smi, temporal_mapping=tm,
                                          access_same_data_considered_as_no_access=True)
                self.model_evaluations += 1
                self.offer(cme, tm)
        except NoValidLoopOrderingFoundException:
            pass
        self.search_s += time.perf_counter() - start
        self.searched = True

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.searched = False

    def ask(self, n: int) -> list[Config]:
        if not self.searched:
            self._search()
        out = []
        while len(out) < n:
            config = self.pop_new()
            if config is None:
                break
            self.visited.add(config.index)
            out.append(config)
        return out


class SALSA(ZigZagMapper):
    """One ZigZag SALSA run per proposal; its best mapping is proposed (module docstring). The run draws
    from NumPy's global generator, seeded per task by the harness."""

    name = "salsa"
    Settings = SALSASettings

    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        self.runs = 0
        self.idle_runs = 0

    def _run_once(self) -> None:
        from zigzag.mapping.temporal_mapping import TemporalMappingType
        from zigzag.opt.salsa.engine import SalsaEngine

        s = self.settings
        start = time.perf_counter()
        engine = SalsaEngine(accelerator=self.accelerator, layer=self.layer, spatial_mapping=self.sm,
                             mapping_type=TemporalMappingType.UNEVEN, salsa_iteration_number=s.iterations,
                             salsa_start_temperature=s.start_temperature,
                             salsa_opt_criterion="latency" if self.criterion == "latency" else "energy",
                             loma_lpf_limit=s.lpf_limit)
        queue: Queue = Queue()
        engine.run(queue)
        cme = queue.get()
        self.model_evaluations += 3 + s.iterations  # its three starting states and one per step
        self.runs += 1
        self.search_s += time.perf_counter() - start
        self.offer(cme, cme.temporal_mapping)

    def ask(self, n: int) -> list[Config]:
        out = []
        while len(out) < n and self.idle_runs < self.settings.max_idle_runs:
            config = self.pop_new()
            if config is None:
                self._run_once()
                config = self.pop_new()
            if config is None:
                self.idle_runs += 1
                continue
            self.idle_runs = 0
            self.visited.add(config.index)
            out.append(config)
        return out

    def report(self) -> dict:
        return {**super().report(), "salsa_runs": self.runs}
