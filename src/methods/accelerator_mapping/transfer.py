"""Source data of ``mapspace_bo``'s transfer across hardware configurations ([Dinh-MLArchSys23] §III-B):
the same layer on other accelerators (the task's settings with some knobs changed), Sobol points of the
encoding evaluated by ZigZag inside the method. The paper pre-trains on the data of earlier tuning on
four memory configurations; here they are made at the start of the task, and their seconds are the
task's ``pretrain_s`` (left out of ``search_time_excl_source_s``)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tunebench.config.knobs import validate
from tunebench.errors import UserError
from tunebench.methods.accelerator_mapping.encoding import Encoding


def source_data(task, lends, objective: str, order: str, changes: list[dict], points: np.ndarray,
                features: str = "encoding"):
    """``(X, log y, source index)`` of ``points`` on every configuration of ``changes`` (rows whose mapping
    ZigZag finds invalid are left out), with what the target lends (``TargetInfo.lends``: ``mapspace``,
    ``zigzag_layer``, ``mapping_objectives``). ``X`` is the GP's view of the points (``features``: ``encoding``,
    or ``mapping``: the mapping each decodes to on its own configuration)."""
    base = task.mod.hardware
    X, y, src = [], [], []
    for k, change in enumerate(changes):
        try:
            settings = dataclasses.replace(base, **change)
        except TypeError as e:
            raise UserError(f"method.transfer_from[{k}]={change!r}: {e}; valid: knobs of target=accel") from None
        validate(settings, f"method.transfer_from[{k}]")
        ms = lends["mapspace"](settings, task.shape)
        if ms.dims != task.mod.dims:
            raise UserError(f"method.transfer_from[{k}]={change!r}: changes the layer's loop dimensions on the array; "
                            "valid: memory and bandwidth knobs")
        enc = Encoding(ms, order)
        view = enc.mapping_features(points) if features == "mapping" else enc.gp_inputs(points)
        model = lends["zigzag_layer"](settings, ms.loops, ms.stride)
        for x, row in zip(points, view):
            values, fits = lends["mapping_objectives"](settings, model, ms.nest(enc.decode(x)))
            value = values[objective]
            if fits and value > 0:
                X.append(row)
                y.append(math.log(value))
                src.append(k)
    return np.array(X).reshape(len(X), view.shape[1]), np.array(y), np.array(src)
