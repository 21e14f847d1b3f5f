"""Turn a candidate (knob config or schedule trace) of a task into a scheduled IRModule."""

from __future__ import annotations

import json

from tunebench.space import Config, TraceConfig


def apply_trace(mod, trace_json: str):
    """Replay a trace (JSON text, see :func:`tunebench.space.trace_to_json`) on ``mod``'s PrimFunc."""
    import tvm

    sch = tvm.s_tir.Schedule(mod)
    tvm.s_tir.schedule.Trace.apply_json_to_schedule(json.loads(trace_json), sch)
    return sch.mod


def schedule(mod, task_kind: str, target_kind: str, config: Config | TraceConfig, template=None,
             variant: str | None = None):
    """The scheduled module of ``config`` for the task ``mod`` of kind ``task_kind`` on ``target_kind``.

    Knob configs go through the task kind's template of ``variant`` (None: the default; ``template``
    may be passed to reuse one); traces are replayed as they are.
    """
    if isinstance(config, TraceConfig):
        return apply_trace(mod, config.trace)
    if template is None:
        from tunebench.targets.tvm.templates import get_template

        template = get_template(task_kind, target_kind, variant)
    return template.apply(mod, config)
