"""``target=accel``: mappings of DNN layers on a Gemmini-like accelerator, evaluated by ZigZag's analytical
cost model ([Mei-TC21]) in place of Timeloop ([Parashar-ISPASS19]), the model of [Dinh-MLArchSys23].

Each task is one layer (a loop nest, :mod:`tunebench.targets.accel.layers`) with its mapspace
(:class:`~tunebench.targets.accel.mapspace.MapSpace`: tile factors per memory level and loop orders; the
task's ``mod``, for methods that search it by its structure). A measurement is one ZigZag cost-model
evaluation of the mapping (milliseconds): energy per MAC, latency and EDP; a mapping some memory of which
would hold more than its capacity (ZigZag's utilization > 1) is invalid, as in Timeloop's mapper. The model is
deterministic: nothing is timed, the evaluation's seconds are its cost.
"""

from __future__ import annotations

import hashlib
import json
import time

from tunebench.datasets.layer_spec import check_layer_list
from tunebench.errors import UserError
from tunebench.targets.accel import dosa_target
from tunebench.targets.accel.layers import loops_of, zoo_layer_specs
from tunebench.targets.accel.mapspace import LEVELS, make_mapspace
from tunebench.targets.accel.settings import AccelSettings
from tunebench.targets.base import Target, TargetInfo
from tunebench.task import Measurement, Outcome, Task


def layer_specs(model) -> list[dict]:
    """The layer specs of a model this target maps: ``model=layers``-like (specs) or a zoo network."""
    if hasattr(model, "layers"):
        return [{**s, "count": 1} for s in check_layer_list(model.layers)]
    return zoo_layer_specs(model.name, getattr(model, "seed", 0))


def objective_values(settings: AccelSettings, energy_pj: float, cycles: float, macs: int) -> dict:
    """Every objective of :data:`~tunebench.targets.accel.settings.OBJECTIVES` of one evaluation."""
    latency = cycles / settings.clock_hz
    return {"energy_pj_per_mac": energy_pj / macs, "latency_s": latency, "edp": energy_pj * 1e-12 * latency}


def zigzag_layer(settings: AccelSettings, loops: dict, stride: int) -> tuple:
    """ZigZag's layer, spatial mappings and accelerator of a layer's ``loops`` on the accelerator of
    ``settings`` (what LOMA and SALSA run ZigZag's own mappers on; lent to methods)."""
    from tunebench.targets.accel.zigzag_model import build_layer

    return build_layer(settings, loops, stride)


def mapping_objectives(settings: AccelSettings, model: tuple, nest) -> tuple[dict, bool]:
    """Every objective of one mapping (``nest``: :meth:`MapSpace.nest` of a config) on ``model`` (what
    :func:`zigzag_layer` returned), and whether it fits (every memory's utilization <= 1): the cheap evaluator
    ``mapspace_bo``'s transfer is lent."""
    from tunebench.targets.accel.zigzag_model import evaluate

    layer, sm, smi, acc = model
    cme = evaluate(layer, sm, smi, acc, nest)
    fits = all(u <= 1.0 + 1e-9 for v in cme.mem_utili_shared.values() for u in v)
    return objective_values(settings, cme.energy_total, cme.latency_total2, layer.total_mac_count), fits


#: what the accelerator target lends methods (TargetInfo.lends): a layer's mapspace on other settings, ZigZag's
#: model of a layer, a mapping's objectives on it
LENDS = {"mapspace": make_mapspace, "zigzag_layer": zigzag_layer, "mapping_objectives": mapping_objectives}


class AccelTarget(Target):
    """A Gemmini-like accelerator as ZigZag models it (module docstring). Capabilities
    (:mod:`tunebench.targets.capabilities`): output checks (:meth:`check`) and its own metrics
    (:meth:`best_metrics`, :meth:`run_metrics`). It lends :data:`LENDS` to the methods that search mapspaces."""

    kind = "accel"
    Settings = AccelSettings
    workloads = ("tensor_program", dosa_target.WORKLOAD)
    lends = LENDS

    def __init__(self, settings: AccelSettings):
        super().__init__()
        self.settings, self.name, self.batch_size = settings, settings.name, settings.batch_size
        self.objectives = list(settings.objectives)
        self._layers: dict = {}
        self._dosa: dict | None = None  # model=dosa_firesim: what the run records of its data (dosa_target.details)

    @classmethod
    def nominal_info(cls, settings: AccelSettings | None = None, model=None) -> TargetInfo:
        """With ``model=dosa_firesim``: its fidelities (zigzag, firesim), one objective (latency_s) and no
        mapspace (:mod:`.dosa_target`)."""
        settings = settings if settings is not None else cls.Settings()
        multi = len(settings.objectives) > 1
        fields = dict(objectives=tuple(settings.objectives),
                      scale={o: float(settings.scale[o]) for o in settings.objectives} if multi else None,
                      reference_point=(10.0,) * len(settings.objectives) if multi else None,
                      details=cls.describe_hardware(settings))
        if dosa_target.is_dosa(model):
            fields.update(dosa_target.nominal_fields(settings))
        return TargetInfo(kind=cls.kind, name=settings.name, device_name=settings.name,
                          batch_size=settings.batch_size, lends=dict(cls.lends), **fields)

    @staticmethod
    def describe_hardware(s: AccelSettings) -> dict:
        return {"model": "zigzag-dse 3.9.1 CostModelEvaluation", "mapspace": True, "levels": list(LEVELS),
                "array": f"{s.array_rows}x{s.array_cols} weight-stationary (C rows, K columns)",
                "accumulator_kib": s.accumulator_kib, "scratchpad_kib": s.scratchpad_kib,
                "weight_reg_bits": s.weight_reg_bits}

    def info_fields(self, task: Task | None = None) -> dict:
        info = self.nominal_info(self.settings)
        if self._dosa is not None:
            return {**super().info_fields(task), "details": {**self._dosa, "clock_hz": self.settings.clock_hz}}
        return {**super().info_fields(task), "scale": info.scale, "reference_point": info.reference_point,
                "details": info.details}

    @classmethod
    def check_model(cls, settings: AccelSettings, model, own_schedules: bool) -> None:
        """Every layer must map: a convolution without groups or a dense layer. (Its smallest tile, one
        array's worth, fits every buffer: the settings' own check.) A user's model (``model=torch``,
        ``model=onnx``) is refused: this target maps layer specs and the zoo networks' layers, not a graph."""
        from tunebench.datasets.models import ZOO, OnnxModel, TorchModel

        if dosa_target.is_dosa(model):
            dosa_target.check_dosa_model(settings, model)
            return
        if isinstance(model, (TorchModel, OnnxModel)):
            raise UserError(f"model={model.name} cannot run on target=accel: it maps conv2d / dense layer specs "
                            f"(model=layers, model=accel_paper) and the zoo networks ({', '.join(ZOO)}); give your "
                            "model's layers as model.layers, or tune it on target=llvm or cuda")
        if not hasattr(model, "layers") and getattr(model, "workload", "") != "tensor_program":
            return
        for spec in layer_specs(model):
            loops_of(spec)

    # ---- tasks ------------------------------------------------------------------------------
    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        if dosa_target.is_dosa(model):
            dosa_target.check_dosa_model(self.settings, model)
            tasks, left = dosa_target.load_dosa_tasks(self.settings, model, self.kind)
            self.objectives, self.fidelities = list(dosa_target.OBJECTIVES), list(dosa_target.FIDELITIES)
            self._dosa = dosa_target.details(left, tasks)
            return tasks, None
        tasks = []
        for i, spec in enumerate(layer_specs(model)):
            space = make_mapspace(self.settings, spec)
            count = spec.pop("count")
            key = json.dumps({"loops": space.loops, "stride": space.stride, "hw": self.describe_hardware(self.settings)},
                             sort_keys=True)
            macs = 1
            for v in space.loops.values():
                macs *= v
            kind = "dense" if space.loops["OY"] * space.loops["OX"] * space.loops["FY"] == 1 else "conv2d"
            task = Task(id=hashlib.sha1(key.encode()).hexdigest()[:16], name=f"layer{i}_{kind}", kind=kind,
                        mod=space, shape=spec, flops=2 * macs, weight=count, target_kind=self.kind, space=space.space)
            tasks.append(task)
        if not tasks:
            raise UserError(f"model={model.name} has no conv2d or dense layer for target=accel")
        return tasks, None

    # ---- measuring ----------------------------------------------------------------------------
    def layer_model(self, task: Task):
        """ZigZag's layer, spatial mappings and accelerator for ``task`` (built once per task)."""
        if task.id not in self._layers:
            from tunebench.targets.accel.zigzag_model import build_layer

            self._layers[task.id] = build_layer(self.settings, task.mod.loops, task.mod.stride)
        return self._layers[task.id]

    def evaluate(self, task: Task, config) -> dict:
        """ZigZag's figures of one mapping: energy (pJ), cycles, MACs, utilization per operand and
        level, whether it fits (every utilization <= 1), DRAM word accesses per operand."""
        from tunebench.targets.accel.zigzag_model import evaluate

        layer, sm, smi, acc = self.layer_model(task)
        cme = evaluate(layer, sm, smi, acc, task.mod.nest(config))
        util = {str(op): [float(u) for u in v] for op, v in cme.mem_utili_shared.items()}
        from zigzag.mapping.data_movement import DataDirection

        dram = {str(op): {d.name: int(v[-1].get(d)) for d in DataDirection} for op, v in cme.memory_word_access.items()}
        return {"energy_pj": float(cme.energy_total), "cycles": float(cme.latency_total2),
                "macs": int(layer.total_mac_count), "utilization": util,
                "fits": all(u <= 1.0 + 1e-9 for v in util.values() for u in v), "dram_accesses": dram}

    def check(self, task: Task, config) -> tuple[bool | None, str]:
        """The reported mapping re-derived from scratch: a complete tiling of the layer (factors times the
        spatial unrolling cover every dimension), evaluated again by ZigZag on an accelerator and layer
        built anew from the settings, to the same energy and cycles, every memory within capacity.
        ``model=dosa_firesim``: :func:`.dosa_target.check`."""
        if isinstance(task.mod, dosa_target.DosaLayer):
            return dosa_target.check(self, task, config)
        from tunebench.targets.accel.zigzag_model import build_accelerator, build_layer, evaluate

        ms = task.mod
        factors = ms.factors(config)
        for d in ms.dims:
            covered = 1
            for lv in factors:
                covered *= lv[d]
            if covered != ms.temporal[d]:
                return False, f"dimension {d}: factors cover {covered} of {ms.temporal[d]}"
        first = self.evaluate(task, config)
        layer, sm, smi, _ = build_layer(self.settings, ms.loops, ms.stride)
        cme = evaluate(layer, sm, smi, build_accelerator(self.settings), ms.nest(config))
        same = abs(cme.energy_total - first["energy_pj"]) <= 1e-9 * first["energy_pj"] and \
            cme.latency_total2 == first["cycles"]
        fits = all(u <= 1.0 + 1e-9 for v in cme.mem_utili_shared.values() for u in v)
        return same and fits, (f"ZigZag again from scratch: {cme.energy_total:.6g} pJ, {cme.latency_total2:.6g} cycles "
                               f"(measured {first['energy_pj']:.6g} pJ, {first['cycles']:.6g}); fits: {fits}")

    def best_metrics(self, task: Task, best: Measurement) -> dict[str, float]:
        """The best mapping's energy (pJ), cycles and MACs (one instance of the layer); ``model=dosa_firesim``:
        :func:`.dosa_target.best_metrics`."""
        if isinstance(task.mod, dosa_target.DosaLayer):
            return dosa_target.best_metrics(self, task, best)
        try:
            r = self.evaluate(task, best.config)
        except (ValueError, AssertionError, ZeroDivisionError):
            return {}
        return {"energy_pj": r["energy_pj"], "cycles": r["cycles"], "macs": float(r["macs"])}

    def run_metrics(self, rows: list[tuple[Task, dict[str, float]]], summaries: list[dict]) -> dict[str, float]:
        """The network's numbers with every layer at its best mapping, each layer counted as often as the
        model runs it (task weight): energy per MAC (total energy / total MACs), total energy (µJ),
        modelled latency (cycles / clock, layers one after the other) and their product (EDP, J s).
        ``model=dosa_firesim``: :func:`.dosa_target.run_metrics`."""
        if self._dosa is not None:
            return dosa_target.run_metrics(rows)
        energy = sum(t.weight * r["energy_pj"] for t, r in rows)
        macs = sum(t.weight * r["macs"] for t, r in rows)
        latency = sum(t.weight * r["cycles"] for t, r in rows) / self.settings.clock_hz
        return {"energy_pj_per_mac": energy / macs, "energy_uj": energy * 1e-6,
                "model_latency_ms": latency * 1e3, "edp_js": energy * 1e-12 * latency}

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        if isinstance(task.mod, dosa_target.DosaLayer):
            return dosa_target.measure(self, task, configs, fidelity)
        return [self._measure_one(task, c) for c in configs]

    def _measure_one(self, task: Task, config) -> Measurement:
        start = time.perf_counter()
        try:
            r = self.evaluate(task, config)
        except (ValueError, AssertionError, ZeroDivisionError) as e:  # ZigZag's refusals of a mapping
            spent = time.perf_counter() - start
            self._stats["run_phase_s"] += spent
            return Measurement(task.id, config, Outcome.INFEASIBLE, error=f"ZigZag: {type(e).__name__}: {e}",
                               cost_s=spent)
        spent = time.perf_counter() - start
        self._stats["run_phase_s"] += spent
        if not r["fits"]:
            over = {op: [round(u, 3) for u in v] for op, v in r["utilization"].items() if max(v) > 1.0 + 1e-9}
            return Measurement(task.id, config, Outcome.INFEASIBLE, error=f"does not fit: utilization {over}",
                               cost_s=spent)
        values = objective_values(self.settings, r["energy_pj"], r["cycles"], r["macs"])
        latency = values["latency_s"]
        return Measurement.ok(task.id, config, {o: values[o] for o in self.objectives}, latency,
                              gflops=task.flops / latency / 1e9, cost_s=spent, run_s=spent)
