"""The ZigZag side of ``target=accel`` ([Mei-TC21]): the accelerator, a layer and the fixed spatial
mapping as ZigZag objects, built through ZigZag's own validators and factories, and one temporal mapping
evaluated by its ``CostModelEvaluation``.

Memory levels, inner to outer (``LEVELS``), and which operand each keeps ([Dinh-MLArchSys23] §III):
``weight_reg`` (W, one per PE), ``accumulator`` (O), ``scratchpad`` (I and W), ``dram`` (all). An operand
bypasses the levels that do not keep it: in ZigZag's per-operand view, W's second level holds the loops of
the accumulator and scratchpad levels, I's first level the loops of the register, accumulator and
scratchpad levels, O's second level those of the scratchpad and DRAM levels (:data:`OPERAND_LEVELS`).
"""

from __future__ import annotations

import logging
from functools import cache

LEVELS = ("weight_reg", "accumulator", "scratchpad", "dram")
#: ZigZag operand -> for each of its memory levels, the global levels (indices into LEVELS) it spans
OPERAND_LEVELS = {"W": ((0,), (1, 2), (3,)), "I": ((0, 1, 2), (3,)), "O": ((0, 1), (2, 3))}
MEM_OPERAND = {"W": "I2", "I": "I1", "O": "O"}

for _name in ("zigzag", "zigzag.parser", "zigzag.parser.workload_factory"):
    logging.getLogger(_name).setLevel(logging.WARNING)


def _port(name: str, kind: str, bw: tuple[int, int], allocation: list[str]) -> dict:
    return {"name": name, "type": kind, "bandwidth_min": bw[0], "bandwidth_max": bw[1], "allocation": allocation}


def _memory(bits: int, bw: tuple[int, int], pj_per_bit: float, operands: list[str], ports: list[dict],
            served: list[str]) -> dict:
    # ZigZag counts accesses in words of bandwidth_max bits, rounded up to bandwidth_min bits (its
    # _calc_memory_access): r_cost / w_cost are the energy of a bandwidth_max-wide access
    cost = pj_per_bit * bw[1]
    return {"size": int(bits), "r_cost": cost, "w_cost": cost, "area": 0, "latency": 1, "operands": operands,
            "ports": ports, "served_dimensions": served}


def accelerator_data(s) -> dict:
    """ZigZag's accelerator description (what its YAML files hold) of :class:`AccelSettings` ``s``."""
    reg_bw = (s.input_bits, s.input_bits)
    acc_bw = (min(s.array_cols * s.psum_bits, s.accumulator_bw_bits), s.accumulator_bw_bits)  # a row of psums
    spad_bw = (min(s.array_rows * s.input_bits, s.scratchpad_bw_bits), s.scratchpad_bw_bits)  # a row of inputs
    dram_bw = (s.dram_bw_bits, s.dram_bw_bits)
    reg = _memory(s.weight_reg_bits, reg_bw, s.weight_reg_pj_per_bit, ["I2"],
                  [_port("r_port_1", "read", reg_bw, ["I2, tl"]), _port("w_port_1", "write", reg_bw, ["I2, fh"])], [])
    acc = _memory(s.accumulator_kib * 8192, acc_bw, s.accumulator_pj_per_bit, ["O"],
                  [_port("r_port_1", "read", acc_bw, ["O, tl", "O, th"]),
                   _port("w_port_1", "write", acc_bw, ["O, fh", "O, fl"])], ["D1", "D2"])
    spad = _memory(s.scratchpad_kib * 8192, spad_bw, s.scratchpad_pj_per_bit, ["I1", "I2"],
                   [_port("r_port_1", "read", spad_bw, ["I1, tl", "I2, tl"]),
                    _port("w_port_1", "write", spad_bw, ["I1, fh", "I2, fh"])], ["D1", "D2"])
    dram = _memory(2**40, dram_bw, s.dram_pj_per_bit, ["I1", "I2", "O"],
                   [_port("rw_port_1", "read_write", dram_bw,
                          ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"])],
                   ["D1", "D2"])
    return {"name": "gemmini_like", "memories": dict(zip(LEVELS, (reg, acc, spad, dram))),
            "operational_array": {"unit_energy": s.mac_pj, "unit_area": 1, "dimensions": ["D1", "D2"],
                                  "sizes": [s.array_rows, s.array_cols]}}


def mapping_data(s) -> list[dict]:
    """ZigZag's mapping description: the fixed spatial mapping C on D1 (rows), K on D2 (columns)."""
    return [{"name": "default", "spatial_mapping": {"D1": [f"C, {s.array_rows}"], "D2": [f"K, {s.array_cols}"]},
             "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]


def build_accelerator(s):
    """The ZigZag ``Accelerator`` of settings ``s`` (validated by ZigZag's own schema)."""
    from zigzag.parser.accelerator_factory import AcceleratorFactory
    from zigzag.parser.accelerator_validator import AcceleratorValidator

    validator = AcceleratorValidator(accelerator_data(s))
    data = validator.normalized_data
    if not validator.validate():
        raise ValueError(f"ZigZag rejects the accelerator: {validator.validator.errors}")
    return AcceleratorFactory(data).create()


def workload_data(loops: dict, stride: int, precision: dict) -> list[dict]:
    """ZigZag's workload description of one layer: ``loops`` (B, K, C, OY, OX, FY, FX sizes) as a Conv
    (a dense layer / matmul: OY = OX = FY = FX = 1, written as a Gemm)."""
    conv = any(loops.get(d, 1) > 1 for d in ("OY", "OX", "FY", "FX"))
    common = {"id": 0, "name": "layer", "operand_precision": precision, "operand_source": {"I": 0}}
    if not conv:
        return [{**common, "operator_type": "Gemm", "equation": "O[b][k]+=W[k][c]*I[b][c]",
                 "loop_dims": ["B", "K", "C"], "loop_sizes": [loops["B"], loops["K"], loops["C"]]}]
    dims = ["B", "K", "C", "OY", "OX", "FY", "FX"]
    return [{**common, "operator_type": "Conv", "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
             "dimension_relations": [f"ix={stride}*ox+1*fx", f"iy={stride}*oy+1*fy"],
             "loop_dims": dims, "loop_sizes": [loops[d] for d in dims]}]


def build_layer(s, loops: dict, stride: int):
    """ZigZag's ``LayerNode`` of one layer, with the spatial mapping ZigZag derives from the fixed one
    (its ``SpatialMappingGeneratorStage``: limited to the layer's sizes, fractional where a size is not a
    multiple of the array's): ``(layer, spatial_mapping, spatial_mapping_int, accelerator)``."""
    from zigzag.parser.mapping_validator import MappingValidator
    from zigzag.parser.workload_factory import WorkloadFactory
    from zigzag.parser.workload_validator import WorkloadValidator
    from zigzag.stages.mapping.spatial_mapping_generation import SpatialMappingGeneratorStage

    precision = {"W": s.input_bits, "I": s.input_bits, "O": s.psum_bits, "O_final": s.output_bits}
    wv = WorkloadValidator(workload_data(loops, stride, precision))
    mv = MappingValidator(mapping_data(s))
    wdata, mdata = wv.normalized_data, mv.normalized_data
    if not (wv.validate() and mv.validate()):
        raise ValueError(f"ZigZag rejects the layer {loops}")
    layer = WorkloadFactory(wdata, mdata).create().node_list[0]
    accelerator = cached_accelerator(s)
    got: dict = {}
    list(SpatialMappingGeneratorStage([_grabber(got)], accelerator=accelerator, layer=layer).run())
    return got["layer"], got["spatial_mapping"], got["spatial_mapping_int"], accelerator


def _grabber(got: dict):
    """A leaf stage that keeps what the spatial-mapping stage hands on (and evaluates nothing)."""
    from zigzag.stages.stage import Stage

    class Grab(Stage):
        def __init__(self, list_of_callables, **kwargs):
            super().__init__(list_of_callables, **kwargs)
            got.update(kwargs)

        def run(self):
            return iter(())

        def is_leaf(self) -> bool:
            return True

    return Grab


def _settings_key(s) -> tuple:
    import dataclasses

    return tuple((f.name, repr(getattr(s, f.name))) for f in dataclasses.fields(s))


_ACCELERATORS: dict = {}


def cached_accelerator(s):
    """One ZigZag accelerator per distinct settings (building one takes a few ms)."""
    key = _settings_key(s)
    if key not in _ACCELERATORS:
        _ACCELERATORS[key] = build_accelerator(s)
    return _ACCELERATORS[key]


@cache
def zigzag_dims():
    from zigzag.datatypes import LayerDim, LayerOperand

    return ({d: LayerDim(d) for d in ("B", "K", "C", "OY", "OX", "FY", "FX")},
            {o: LayerOperand(o) for o in ("W", "I", "O")})


def temporal_mapping_dict(levels: list[list[tuple[str, int]]]) -> dict:
    """ZigZag's per-operand temporal mapping of a nest given per global level (inner to outer; loops
    inner to outer within a level): each operand's memory levels take the loops of the global levels
    they span (:data:`OPERAND_LEVELS`)."""
    dims, ops = zigzag_dims()
    out = {}
    for op, spans in OPERAND_LEVELS.items():
        out[ops[op]] = [[(dims[d], f) for lv in span for d, f in levels[lv]] for span in spans]
    return out


def evaluate(layer, sm, smi, accelerator, levels: list[list[tuple[str, int]]]):
    """ZigZag's ``CostModelEvaluation`` of the nest ``levels`` (see :func:`temporal_mapping_dict`)."""
    from zigzag.cost_model.cost_model import CostModelEvaluation
    from zigzag.mapping.temporal_mapping import TemporalMapping, TemporalMappingType

    tm = TemporalMapping(temporal_mapping_dict(levels), layer, TemporalMappingType.UNEVEN)
    return CostModelEvaluation(accelerator=accelerator, layer=layer, spatial_mapping=sm, spatial_mapping_int=smi,
                               temporal_mapping=tm, access_same_data_considered_as_no_access=True)
